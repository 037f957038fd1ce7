/**
 * The Cluster tab: what the cluster is doing now, per partition — nodes by state, CPUs and GPUs (by type)
 * allocated, idle and down as bars drawn here in SVG, the queue's depth and the next expected start —
 * and the person's own share. It reads `GET clusters/{name}/overview` (one `sinfo` and one `squeue` on the
 * server, kept there a few seconds for every panel) only while the tab is on screen, paced like the job
 * watcher: soon after a change, twice as long after each answer that changed nothing, four times as long
 * while the cluster does not answer.
 */
import * as React from 'react';

import { formatClock } from '../format';
import { IClusterOverview, IOverviewData, IPartitionLoad, IShare } from '../models';
import { Poll } from '../poll';
import { visibleText } from '../safe';

/** Milliseconds before the next look after a change, and the longest wait while nothing changes. */
export const CLUSTER_PACE = { fastest: 5_000, slowest: 60_000 };

/** Colours of a CPU's or GPU's use, as in the notebook's figure. */
export const USE_COLORS: Record<string, string> = {
  allocated: '#C44E52',
  idle: '#55A868',
  down: '#8C8C8C'
};
const USES = ['allocated', 'idle', 'down'];

/** Props of {@link ClusterView}. */
export interface IClusterViewProps {
  cluster: string | null;
  /** Whether the tab is on screen: it reads the cluster only then. */
  visible: boolean;
  loadOverview: (cluster: string) => Promise<IClusterOverview>;
}

interface IClusterState {
  answer: IClusterOverview | null;
  error: string | null;
  at: Date | null;
}

/** Two answers that show the same cluster (the time they were read aside). */
export function sameOverview(previous: IClusterOverview, next: IClusterOverview): boolean {
  const strip = (answer: IClusterOverview) =>
    JSON.stringify({ ...answer, overview: answer.overview && { ...answer.overview, read_at: '' } });
  return strip(previous) === strip(next);
}

/** An expected wait as a person reads it: `now`, `~12 min`, `~3 h`, `~2 d`; `unknown` without one. */
export function waitText(seconds: number | null): string {
  if (seconds === null) {
    return 'unknown';
  }
  if (seconds < 60) {
    return 'now';
  }
  if (seconds < 3600) {
    return `~${Math.round(seconds / 60)} min`;
  }
  return seconds < 2 * 86400 ? `~${Math.round(seconds / 3600)} h` : `~${Math.round(seconds / 86400)} d`;
}

/** The Cluster tab. */
export function ClusterView({ cluster, visible, loadOverview }: IClusterViewProps): JSX.Element {
  const [state, setState] = React.useState<IClusterState>({ answer: null, error: null, at: null });
  const poll = React.useMemo(() => {
    if (cluster === null) {
      return null;
    }
    const read = async () => {
      try {
        return await loadOverview(cluster);
      } catch (error) {
        setState(previous => ({ ...previous, error: (error as Error).message }));
        throw error;
      }
    };
    const show = (answer: IClusterOverview) =>
      setState({ answer, error: answer.ok ? null : answer.message, at: new Date() });
    return new Poll(read, show, { ...CLUSTER_PACE, same: sameOverview, failed: answer => !answer.ok });
  }, [cluster, loadOverview]);

  React.useEffect(() => {
    if (!visible || poll === null) {
      return;
    }
    poll.start();
    return () => poll.stop();
  }, [visible, poll]);

  const overview = state.answer?.overview ?? null;
  return (
    <div className="betty-Cluster" data-testid="betty-cluster">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">
          What {cluster ? visibleText(cluster) : 'the cluster'} is doing
          {state.at && <span className="betty-Tab-clock"> · {formatClock(state.at)}</span>}
        </span>
        <button
          className="betty-Button"
          data-testid="betty-cluster-refresh"
          onClick={() => {
            poll?.stop();
            poll?.start();
          }}
        >
          Refresh
        </button>
      </div>
      {state.error && (
        <div className="betty-Tab-error" role="alert" data-testid="betty-cluster-error">
          {visibleText(state.error)}
        </div>
      )}
      {overview && <Share overview={overview} />}
      {overview && overview.partitions.length === 0 && (
        <div className="betty-Tab-empty">The cluster reports no partitions.</div>
      )}
      {overview && overview.partitions.length > 0 && <Legend />}
      {overview?.partitions.map(partition => (
        <Partition key={partition.partition} partition={partition} />
      ))}
    </div>
  );
}

function Share({ overview }: { overview: IOverviewData }): JSX.Element {
  const mine: IShare = overview.mine;
  const who = overview.user === null ? 'you (login name unknown)' : visibleText(overview.user);
  return (
    <div className="betty-Cluster-share" data-testid="betty-cluster-share">
      Yours ({who}): <strong>{mine.running}</strong> running ({mine.cpus} CPUs, {mine.gpus} GPUs),{' '}
      <strong>{mine.pending}</strong> pending
    </div>
  );
}

function Legend(): JSX.Element {
  return (
    <div className="betty-Cluster-legend">
      {USES.map(use => (
        <span key={use}>
          <svg width={10} height={10} aria-hidden="true">
            <rect width={10} height={10} fill={USE_COLORS[use]} />
          </svg>{' '}
          {use}
        </span>
      ))}
    </div>
  );
}

function Partition({ partition }: { partition: IPartitionLoad }): JSX.Element {
  const nodes = partition.nodes;
  const mine = partition.mine;
  const name = visibleText(partition.partition);
  return (
    <section
      className="betty-Cluster-partition"
      data-testid="betty-cluster-partition"
      data-partition={partition.partition}
    >
      <div className="betty-Cluster-title">
        <strong>{name}</strong>
        {partition.default && <span className="betty-Cluster-default"> (default)</span>}
        <span className="betty-Cluster-nodes">
          {' '}
          · nodes {nodes.idle ?? 0} idle, {nodes.mixed ?? 0} mixed, {nodes.allocated ?? 0} allocated,{' '}
          {nodes.down ?? 0} down
        </span>
      </div>
      <UseBar label="CPUs" uses={partition.cpus} testId="betty-cluster-cpus" />
      {Object.entries(partition.gpus).map(([kind, uses]) => (
        <UseBar key={kind} label={`GPUs ${visibleText(kind)}`} uses={uses} testId="betty-cluster-gpus" />
      ))}
      <div className="betty-Cluster-queue" data-testid="betty-cluster-queue">
        {partition.running} running, {partition.pending} pending
        {partition.pending > 0 && <> · next start {waitText(partition.next_start_seconds)}</>}
        {(mine.running > 0 || mine.pending > 0) && (
          <span className="betty-Cluster-mine" data-testid="betty-cluster-mine">
            {' '}
            · yours: {mine.running} running ({mine.cpus} CPUs, {mine.gpus} GPUs), {mine.pending} pending
          </span>
        )}
      </div>
    </section>
  );
}

/** One horizontal bar: allocated, idle and down stacked, with the counts written beside it. */
function UseBar(props: { label: string; uses: Record<string, number>; testId: string }): JSX.Element {
  const { label, uses, testId } = props;
  const total = USES.reduce((sum, use) => sum + (uses[use] ?? 0), 0);
  const width = 200;
  let x = 0;
  const words = `${uses.allocated ?? 0}/${total} used${uses.down ? `, ${uses.down} down` : ''}`;
  return (
    <div className="betty-Cluster-bar" data-testid={testId} data-used={uses.allocated ?? 0} data-total={total}>
      <span className="betty-Cluster-label">{label}</span>
      <svg viewBox={`0 0 ${width} 12`} preserveAspectRatio="none" role="img" aria-label={`${label}: ${words}`}>
        <title>{`${label}: ${words}`}</title>
        {USES.map(use => {
          const part = total > 0 ? ((uses[use] ?? 0) / total) * width : 0;
          const rect = <rect key={use} data-use={use} x={x} y={0} width={part} height={12} fill={USE_COLORS[use]} />;
          x += part;
          return rect;
        })}
      </svg>
      <span className="betty-Cluster-count">{words}</span>
    </div>
  );
}
