/**
 * The header's view of the clusters: the list as the server's configuration says now (a
 * cluster added with `betty cluster add` shows up without restarting Jupyter) and the health
 * of the cluster the chat works on, read again every so often. The server keeps a health check
 * for a few seconds, so reading it here costs the login node little.
 */
import * as React from 'react';

import { BettyAPI } from './api';
import { ICluster, IClusterHealth, LinkProblem } from './models';
import { visibleText } from './safe';

/** Milliseconds between reads of the cluster list (it is also read when the picker is opened). */
export const CLUSTERS_POLL_MS = 30_000;
/** Milliseconds between reads of the selected cluster's health. */
export const HEALTH_POLL_MS = 15_000;

/** What the status dot shows: checking, the cluster answers, or it does not. */
export type HealthState = 'checking' | 'ok' | 'failing';

/** The status dot: its state, a few words beside it when something is wrong, and its tooltip. */
export interface IHealthDot {
  state: HealthState;
  label: string;
  tooltip: string;
}

/** A few words for each problem, shown beside the dot. */
export const PROBLEM_WORDS: Record<LinkProblem, string> = {
  'host-unknown': 'host not found',
  refused: 'connection refused',
  'no-answer': 'no answer',
  'host-key-unknown': 'host key not trusted yet',
  'host-key-changed': 'host key changed',
  login: 'login refused',
  link: 'cannot connect',
  slurm: 'Slurm not answering',
  config: 'profile unusable'
};

/** The dot for `health` of `cluster` (null: not checked yet). Text from the server is made visible. */
export function healthDot(cluster: string | null, health: IClusterHealth | null): IHealthDot {
  if (cluster === null) {
    return { state: 'checking', label: '', tooltip: 'No cluster selected' };
  }
  if (!health || health.cluster !== cluster) {
    return { state: 'checking', label: '', tooltip: `Checking ${visibleText(cluster)}…` };
  }
  const message = visibleText(health.message);
  if (health.ok) {
    return { state: 'ok', label: '', tooltip: message };
  }
  const label = health.problem ? PROBLEM_WORDS[health.problem] : 'cannot connect';
  return { state: 'failing', label, tooltip: `${label}: ${message}` };
}

/** What {@link useClusterStatus} gives the header. */
export interface IClusterStatus {
  /** The clusters as last read (the ones the panel started with until then). */
  clusters: ICluster[];
  /** The selected cluster's health as last read; null while the first check runs. */
  health: IClusterHealth | null;
  /** Read the cluster list now (the picker was focused or opened). */
  refresh: () => void;
}

/**
 * The cluster list and `cluster`'s health, read now and every {@link CLUSTERS_POLL_MS} and
 * {@link HEALTH_POLL_MS}. Without `api` it shows `initial` and no health.
 */
export function useClusterStatus(
  api: BettyAPI | undefined,
  cluster: string | null,
  initial: ICluster[]
): IClusterStatus {
  const [listed, setListed] = React.useState<ICluster[] | null>(null);
  const [health, setHealth] = React.useState<IClusterHealth | null>(null);

  const refresh = React.useCallback(() => {
    if (api) {
      api.clusters().then(
        answer => setListed(answer.clusters),
        () => undefined // the server is away: the list stays as it was
      );
    }
  }, [api]);

  React.useEffect(() => {
    const timer = setInterval(refresh, CLUSTERS_POLL_MS);
    return () => clearInterval(timer);
  }, [refresh]);

  React.useEffect(() => {
    setHealth(null);
    if (!api || cluster === null) {
      return;
    }
    let current = true;
    const check = () =>
      api.clusterHealth(cluster).then(
        answer => current && setHealth(answer),
        (error: Error) =>
          current &&
          setHealth({
            cluster,
            ok: false,
            problem: null,
            message: `Jupyter did not answer Betty's health check: ${error.message}`,
            checked_at: Date.now() / 1000
          })
      );
    void check();
    const timer = setInterval(check, HEALTH_POLL_MS);
    return () => {
      current = false;
      clearInterval(timer);
    };
  }, [api, cluster]);

  return { clusters: listed ?? initial, health, refresh };
}
