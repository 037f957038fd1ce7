/**
 * The Jobs tab's "Node kernels": the person's running `%betty kernel` allocations on the cluster,
 * each with the time left (counted down between reads) and a Stop button. Stop is the person's own
 * click, confirmed in a dialog, and goes to the person-only `node_kernel_stop`: it cancels only the
 * job recorded for that kernel. Nothing is shown while there is none.
 */
import * as React from 'react';
import { Dialog, showDialog } from '@jupyterlab/apputils';

import { INodeKernel, INodeKernels, IOutcome } from '../models';
import { visibleText } from '../safe';

/** How often the time left is counted down, in milliseconds. */
const TICK_MS = 15_000;

/** Props of {@link NodeKernelsView}. */
export interface INodeKernelsViewProps {
  cluster: string | null;
  /** Whether the tab is on screen: it reads the allocations only then. */
  visible: boolean;
  refreshSeconds: number;
  load: (cluster: string) => Promise<INodeKernels>;
  /** Cancel the allocation (`POST node-kernels/{token}/stop`). */
  stop: (kernel: INodeKernel, cluster: string) => Promise<IOutcome>;
  /** Ask the person before Stop (default: JupyterLab's dialog). */
  confirm?: (kernel: INodeKernel) => Promise<boolean>;
  /** The clock, in milliseconds (tests give their own). */
  now?: () => number;
}

interface IRead {
  kernels: INodeKernel[];
  /** When they were read (`now()`): the time left counts down from there. */
  at: number;
  error: string | null;
}

/** `ends at 21:04 (118 min left)` from what the server read `secondsAgo` seconds ago; "" before it starts. */
export function timeLeft(kernel: INodeKernel, secondsAgo: number): string {
  if (!kernel.ends || kernel.seconds_left === null || kernel.seconds_left === undefined) {
    return '';
  }
  const left = Math.max(0, kernel.seconds_left - secondsAgo);
  return `ends at ${kernel.ends.slice(11, 16)} (${Math.ceil(left / 60)} min left)`;
}

/** The "Node kernels" section of the Jobs tab. */
export function NodeKernelsView(props: INodeKernelsViewProps): JSX.Element | null {
  const { cluster, visible, refreshSeconds, load, stop } = props;
  const now = props.now ?? Date.now;
  const confirm = props.confirm ?? confirmStop;
  const [read, setRead] = React.useState<IRead>({ kernels: [], at: 0, error: null });
  const [notes, setNotes] = React.useState<Record<string, string>>({});
  const [, setTick] = React.useState(0);

  const refresh = React.useCallback(async () => {
    if (cluster === null) {
      return;
    }
    try {
      const answer = await load(cluster);
      setRead({ kernels: answer.kernels, at: now(), error: null });
    } catch (error) {
      setRead(previous => ({ ...previous, error: (error as Error).message }));
    }
  }, [cluster, load]);

  React.useEffect(() => {
    if (!visible || cluster === null) {
      return;
    }
    void refresh();
    const timer = setInterval(() => void refresh(), Math.max(2, refreshSeconds) * 1000);
    const ticker = setInterval(() => setTick(tick => tick + 1), TICK_MS);
    return () => {
      clearInterval(timer);
      clearInterval(ticker);
    };
  }, [visible, cluster, refreshSeconds, refresh]);

  const onStop = async (kernel: INodeKernel) => {
    if (cluster === null || !(await confirm(kernel))) {
      return;
    }
    setNotes(previous => ({ ...previous, [kernel.kernel]: 'stopping…' }));
    try {
      const outcome = await stop(kernel, cluster);
      setNotes(previous => ({ ...previous, [kernel.kernel]: firstLine(outcome.summary) }));
    } catch (error) {
      setNotes(previous => ({ ...previous, [kernel.kernel]: firstLine((error as Error).message) }));
    }
    await refresh();
  };

  const stopped = Object.keys(notes).filter(token => !read.kernels.some(k => k.kernel === token));
  if (read.kernels.length === 0 && stopped.length === 0 && read.error === null) {
    return null;
  }
  const secondsAgo = Math.max(0, (now() - read.at) / 1000);
  return (
    <section className="betty-NodeKernels" data-testid="betty-node-kernels" aria-label="Node kernels">
      <div className="betty-NodeKernels-title">Node kernels</div>
      {read.error && (
        <div className="betty-Tab-error" role="alert" data-testid="betty-node-kernels-error">
          {visibleText(firstLine(read.error))}
        </div>
      )}
      {read.kernels.map(kernel => {
        const left = timeLeft(kernel, secondsAgo);
        const note = notes[kernel.kernel];
        return (
          <div className="betty-NodeKernel" data-testid="betty-node-kernel" data-job={kernel.job_id} key={kernel.kernel}>
            <div className="betty-NodeKernel-text">
              <div className="betty-JobRow-title">
                job <span className="betty-JobRow-id">{visibleText(kernel.job_id)}</span> ·{' '}
                <span className={`betty-State betty-State-${visibleText(kernel.state)}`}>
                  {visibleText(kernel.state)}
                </span>
              </div>
              <div className="betty-JobRow-sub" data-testid="betty-node-kernel-left">
                {left || visibleText(kernel.line)}
              </div>
              {note && (
                <div className="betty-JobRow-sub" data-testid="betty-node-kernel-note">
                  {visibleText(note)}
                </div>
              )}
            </div>
            <button
              className="betty-Button betty-Button-reject"
              data-testid="betty-node-kernel-stop"
              title="Stop this node kernel: its allocation is cancelled"
              disabled={note === 'stopping…'}
              onClick={() => void onStop(kernel)}
            >
              Stop
            </button>
          </div>
        );
      })}
      {stopped.map(token => (
        <div className="betty-JobRow-sub" data-testid="betty-node-kernel-note" key={token}>
          {visibleText(notes[token])}
        </div>
      ))}
    </section>
  );
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0] ?? '';
}

async function confirmStop(kernel: INodeKernel): Promise<boolean> {
  const result = await showDialog({
    title: `Stop node kernel job ${visibleText(kernel.job_id)}?`,
    body:
      'Its allocation is cancelled: what the node’s kernel holds (its variables) is lost, and the ' +
      'notebook’s cells run in its own kernel again.',
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
  });
  return result.button.accept;
}
