/**
 * The "why?" of a pending row in the Jobs tab: asks the server why the job waits (`cluster_why`:
 * Slurm's reason in plain words, the priority factors against the jobs ahead, the fair-share, the
 * expected start, and what would start it sooner) and shows the answer under the row.
 */
import * as React from 'react';

import { IOutcome } from '../contract/serverApi';
import { visibleText } from '../safe';

/** Props of {@link PendingWhy}. */
export interface IPendingWhyProps {
  jobId: string;
  /** Ask the server why the job waits (`GET clusters/{name}/jobs/{id}/why`). */
  load: () => Promise<IOutcome>;
}

type Answer =
  | { kind: 'closed' }
  | { kind: 'loading' }
  | { kind: 'shown'; lines: string[] }
  | { kind: 'failed'; message: string };

/** The explanation's lines from the outcome; its first line of summary when it failed. */
export function whyLines(outcome: IOutcome): Answer {
  if (!outcome.ok) {
    return { kind: 'failed', message: outcome.summary.split('\n')[0] || 'Betty could not explain it' };
  }
  const value = outcome.data?.kind === 'json' ? (outcome.data.value as { lines?: unknown }) : null;
  const lines = Array.isArray(value?.lines) ? value.lines.map(line => String(line)) : [];
  return lines.length > 0 ? { kind: 'shown', lines } : { kind: 'shown', lines: outcome.summary.split('\n') };
}

/** A "why?" button; open, the explanation (asked again each time it opens). */
export function PendingWhy({ jobId, load }: IPendingWhyProps): JSX.Element {
  const [answer, setAnswer] = React.useState<Answer>({ kind: 'closed' });
  const toggle = async () => {
    if (answer.kind !== 'closed') {
      setAnswer({ kind: 'closed' });
      return;
    }
    setAnswer({ kind: 'loading' });
    try {
      setAnswer(whyLines(await load()));
    } catch (error) {
      setAnswer({ kind: 'failed', message: String((error as Error).message ?? error) });
    }
  };
  return (
    <div className="betty-PendingWhy" data-testid="betty-job-why">
      <button
        className="betty-Button betty-PendingWhy-toggle"
        data-testid="betty-job-why-toggle"
        title={`Why is job ${jobId} still pending, and what would start it sooner?`}
        aria-expanded={answer.kind !== 'closed'}
        onClick={() => void toggle()}
      >
        {answer.kind === 'closed' ? 'why?' : 'hide why'}
      </button>
      {answer.kind === 'loading' && <div className="betty-JobRow-sub">asking Slurm…</div>}
      {answer.kind === 'failed' && (
        <div className="betty-PendingWhy-error" data-testid="betty-job-why-error">
          {visibleText(answer.message)}
        </div>
      )}
      {answer.kind === 'shown' && (
        <div className="betty-PendingWhy-answer" data-testid="betty-job-why-answer">
          <p className="betty-PendingWhy-headline">{visibleText(answer.lines[0] ?? '')}</p>
          <ul>
            {answer.lines.slice(1).map((line, index) => (
              <li key={index}>{visibleText(line)}</li>
            ))}
          </ul>
        </div>
      )}
    </div>
  );
}

/** The "why?" of a row: only for a pending job, when the cluster is known and the server can be asked. */
export function pendingWhy(
  jobId: string,
  state: string,
  cluster: string | null,
  loadWhy: ((cluster: string, jobId: string) => Promise<IOutcome>) | undefined
): JSX.Element | null {
  const where = cluster;
  const ask = loadWhy;
  if (state !== 'PENDING' || where === null || ask === undefined) {
    return null;
  }
  return <PendingWhy jobId={jobId} load={() => ask(where, jobId)} />;
}
