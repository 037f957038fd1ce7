/**
 * The panel's header, always visible: the mode switch (coloured by mode), the cluster
 * picker (its list read again when opened and every so often), the selected cluster's health
 * (the dot, with the cause in words when it fails), the chat's connection when it is not open,
 * and a button for a new chat.
 */
import * as React from 'react';

import { BettyAPI } from '../api';
import { healthDot, useClusterStatus } from '../clusterStatus';
import { ICluster, Mode, MODES } from '../models';
import { SocketStatus } from '../socket';

/** What each mode lets the agent do, in one line. */
export const MODE_HELP: Record<Mode, string> = {
  off: 'Off: the agent calls no tool.',
  propose: 'Propose: the agent reads freely; actions come back as proposals and nothing runs.',
  confirm: 'Confirm: reads ask once per session, every action asks.',
  auto: 'Auto: reads run without asking; submitting, cancelling and new pages still ask every time.'
};

/** Why the site does not let the person choose `mode` (one line), or null when it does. */
export function siteRefuses(
  mode: Mode,
  allowed: readonly Mode[] | undefined,
  policy: string | null | undefined
): string | null {
  if (!allowed || allowed.includes(mode)) {
    return null;
  }
  const where = policy ? ` (${policy})` : '';
  return `Your site does not allow ${mode} mode; it allows ${allowed.join(', ')}${where}.`;
}

/** Props of {@link Header}. */
export interface IHeaderProps {
  clusters: ICluster[];
  cluster: string | null;
  /** Where the cluster list and the health are read again; without it the header shows `clusters` only. */
  api?: BettyAPI;
  mode: Mode | null;
  /** The modes the site's policy lets the person choose (every mode when absent), and its file. */
  allowedModes?: readonly Mode[];
  sitePolicy?: string | null;
  status: SocketStatus;
  onCluster: (name: string) => void;
  onMode: (mode: Mode) => void;
  onNewChat: () => void;
}

const STATUS_TEXT: Record<SocketStatus, string> = {
  connecting: 'connecting…',
  open: 'connected',
  reconnecting: 'reconnecting…',
  closed: 'not connected'
};

/** The header: mode switch, cluster picker, connection state, new chat. */
export function Header(props: IHeaderProps): JSX.Element {
  const { cluster, mode, status } = props;
  const { clusters, health, refresh } = useClusterStatus(props.api, cluster, props.clusters);
  const dot = healthDot(cluster, health);
  return (
    <div className="betty-Header" data-testid="betty-header">
      <div
        className="betty-ModeSwitch"
        role="radiogroup"
        aria-label="Betty's mode"
        data-testid="betty-mode-switch"
        data-mode={mode ?? ''}
      >
        {MODES.map(each => {
          const refused = siteRefuses(each, props.allowedModes, props.sitePolicy);
          return (
            <button
              key={each}
              role="radio"
              aria-checked={mode === each}
              className={`betty-ModeSwitch-option betty-mode-${each}${mode === each ? ' betty-mod-selected' : ''}`}
              data-testid={`betty-mode-${each}`}
              data-site-refused={refused ? 'true' : undefined}
              title={refused ?? MODE_HELP[each]}
              disabled={mode === null || refused !== null}
              onClick={() => mode !== each && props.onMode(each)}
            >
              {each}
            </button>
          );
        })}
      </div>
      <div className="betty-Header-row">
        <select
          className="betty-ClusterPicker"
          data-testid="betty-cluster-picker"
          aria-label="Cluster"
          title="Switching the cluster starts a new chat on it"
          value={cluster ?? ''}
          disabled={clusters.length === 0}
          onFocus={refresh}
          onMouseDown={refresh}
          onChange={event => props.onCluster(event.target.value)}
        >
          {clusters.length === 0 && <option value="">no cluster configured</option>}
          {clusters.map(each => (
            <option
              key={each.name}
              value={each.name}
              title={`${each.transport} ${each.host}`.trim()}
            >
              {each.name}
            </option>
          ))}
        </select>
        <span
          className={`betty-ClusterHealth betty-ClusterHealth-${dot.state}`}
          data-testid="betty-cluster-health"
          data-health={dot.state}
          data-problem={health?.problem ?? ''}
          role="status"
          title={dot.tooltip}
        >
          ●
        </span>
        <span
          className={`betty-Connection betty-Connection-${status}`}
          data-testid="betty-connection"
          data-status={status}
          title={`Chat ${STATUS_TEXT[status]}`}
        >
          {status === 'open' ? null : `chat ${STATUS_TEXT[status]}`}
        </span>
        <button
          className="betty-Button betty-Header-new"
          data-testid="betty-new-chat"
          title="Start a new chat with Betty on this cluster (Betty's side panel)"
          aria-label="New Betty chat"
          onClick={props.onNewChat}
        >
          New Betty chat
        </button>
      </div>
      {dot.state === 'failing' && (
        <div className="betty-ClusterProblem" data-testid="betty-cluster-problem" role="alert">
          {dot.tooltip}
        </div>
      )}
    </div>
  );
}
