/**
 * The "why?" of a pending job in the Jobs tab: a small button on the row's state line, and one
 * explanation box above the list that asks the server why the job waits (`cluster_why`: Slurm's
 * reason in plain words, the priority factors against the jobs ahead, the fair-share, the expected
 * start, and what would start it sooner). The box lies outside the scrolling list, so every row
 * keeps its one height and the answer stays while the list scrolls.
 */
import * as React from 'react';

import { IOutcome } from '../contract/serverApi';
import { visibleText } from '../safe';

/** The pending job whose "why?" was asked, and how many times (each ask loads again). */
export interface IWhyFor {
  /** The cluster the job runs on: the box closes when the tab shows another. */
  cluster: string;
  jobId: string;
  name: string;
  asked: number;
}

/** The id of the explanation box, which the shown job's "why?" controls. */
const WHY_BOX_ID = 'betty-job-why-box';

type Answer = { kind: 'loading' } | { kind: 'shown'; lines: string[] } | { kind: 'failed'; message: string };

/** The explanation's lines from the outcome; its first line of summary when it failed. */
export function whyLines(outcome: IOutcome): Answer {
  if (!outcome.ok) {
    return { kind: 'failed', message: outcome.summary.split('\n')[0] || 'Betty could not explain it' };
  }
  const value = outcome.data?.kind === 'json' ? (outcome.data.value as { lines?: unknown }) : null;
  const lines = Array.isArray(value?.lines) ? value.lines.map(line => String(line)) : [];
  return lines.length > 0 ? { kind: 'shown', lines } : { kind: 'shown', lines: outcome.summary.split('\n') };
}

/** Props of {@link WhyButton}. */
export interface IWhyButtonProps {
  jobId: string;
  /** Whether the box above the list explains this job now. */
  shown: boolean;
  onAsk: () => void;
}

/** The "why?" on a pending row's state line: one line of small text, within the row's height. */
export function WhyButton({ jobId, shown, onAsk }: IWhyButtonProps): JSX.Element {
  return (
    <button
      className="betty-Button betty-PendingWhy-toggle"
      data-testid="betty-job-why-toggle"
      title={`Why is job ${jobId} still pending, and what would start it sooner?`}
      aria-expanded={shown}
      aria-controls={shown ? WHY_BOX_ID : undefined}
      onClick={onAsk}
    >
      why?
    </button>
  );
}

/** Props of {@link WhyBox}. */
export interface IWhyBoxProps {
  job: IWhyFor;
  /** Ask the server why the job waits (`GET clusters/{name}/jobs/{id}/why`). */
  load: (jobId: string) => Promise<IOutcome>;
  onClose: () => void;
}

/** The one explanation box of the Jobs tab: asks when a "why?" is clicked, takes the focus. */
export function WhyBox({ job, load, onClose }: IWhyBoxProps): JSX.Element {
  const [answer, setAnswer] = React.useState<Answer>({ kind: 'loading' });
  const box = React.useRef<HTMLElement>(null);
  // the list re-renders as it scrolls: only a new "why?" asks again, never a new `load`
  const loader = React.useRef(load);
  loader.current = load;
  React.useEffect(() => {
    let current = true;
    setAnswer({ kind: 'loading' });
    box.current?.focus();
    loader.current(job.jobId).then(
      outcome => current && setAnswer(whyLines(outcome)),
      error => current && setAnswer({ kind: 'failed', message: String((error as Error)?.message ?? error) })
    );
    return () => {
      current = false;
    };
  }, [job.jobId, job.asked]);
  return (
    <section
      className="betty-PendingWhy"
      data-testid="betty-job-why"
      data-job-id={job.jobId}
      id={WHY_BOX_ID}
      aria-label={visibleText(`Why job ${job.jobId} is pending`)}
      aria-live="polite"
      tabIndex={-1}
      ref={box}
    >
      <div className="betty-PendingWhy-head">
        <span
          className="betty-PendingWhy-title"
          data-testid="betty-job-why-title"
          title={visibleText(`Why job ${job.jobId} · ${job.name} waits`)}
        >
          Why job {job.jobId} · {visibleText(job.name)} waits
        </span>
        <button
          className="betty-Button betty-PendingWhy-close"
          data-testid="betty-job-why-close"
          title="Close the explanation"
          aria-label="Close the explanation"
          onClick={onClose}
        >
          ×
        </button>
      </div>
      {answer.kind === 'loading' && <div className="betty-PendingWhy-wait">asking Slurm…</div>}
      {answer.kind === 'failed' && (
        <div className="betty-PendingWhy-error" data-testid="betty-job-why-error">
          {visibleText(answer.message.split('\n')[0])}
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
    </section>
  );
}
