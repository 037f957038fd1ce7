/**
 * The "why?" of a pending job in the Jobs tab: a small button on the row's state line, and one
 * explanation box above the list that asks the server why the job waits (`cluster_why`: Slurm's
 * reason in plain words, the priority factors against the jobs ahead, the fair-share, the expected
 * start, and what would start it sooner). The box lies outside the scrolling list, so every row
 * keeps its one height and the answer stays while the list scrolls. Where `sbatch --test-only`
 * says the job starts sooner elsewhere and Betty recorded its script, one button moves it there:
 * the resubmission's card (the diff against the recorded script) arrives in the chat.
 */
import * as React from 'react';

import { IPlacement } from '../api';
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

/** Where the job would start sooner, and whether Betty can resubmit it there (it recorded the script). */
export interface IMove extends IPlacement {
  /** The options that move it, as sbatch spells them (`--gres=gpu:h100:2`). */
  change: string;
  resubmittable: boolean;
}

type Answer =
  | { kind: 'loading' }
  | { kind: 'shown'; lines: string[]; move: IMove | null }
  | { kind: 'failed'; message: string };

/** The explanation's lines from the outcome, and its move; its first line of summary when it failed. */
export function whyLines(outcome: IOutcome): Answer {
  if (!outcome.ok) {
    return { kind: 'failed', message: outcome.summary.split('\n')[0] || 'Betty could not explain it' };
  }
  const value = outcome.data?.kind === 'json' ? (outcome.data.value as { lines?: unknown; sooner?: unknown }) : null;
  const lines = Array.isArray(value?.lines) ? value.lines.map(line => String(line)) : [];
  const move = moveOf(value?.sooner);
  return lines.length > 0 ? { kind: 'shown', lines, move } : { kind: 'shown', lines: outcome.summary.split('\n'), move };
}

/** `data.sooner` as a move, or null when it is not one. */
function moveOf(sooner: unknown): IMove | null {
  if (typeof sooner !== 'object' || sooner === null) {
    return null;
  }
  const { partition, gpu_type, change, resubmit } = sooner as Record<string, unknown>;
  if (typeof partition !== 'string' || typeof change !== 'string') {
    return null;
  }
  return {
    partition,
    gpu_type: typeof gpu_type === 'string' ? gpu_type : null,
    change,
    resubmittable: typeof resubmit === 'object' && resubmit !== null
  };
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
  /** Resubmit the job moved to `placement` (its card arrives in the chat); absent: no button. */
  onMove?: (jobId: string, placement: IPlacement) => Promise<void>;
  onClose: () => void;
}

/** The one explanation box of the Jobs tab: asks when a "why?" is clicked, takes the focus. */
export function WhyBox({ job, load, onMove, onClose }: IWhyBoxProps): JSX.Element {
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
          {answer.move?.resubmittable && onMove && <MoveButton jobId={job.jobId} move={answer.move} onMove={onMove} />}
        </div>
      )}
    </section>
  );
}

/** "Resubmit with --gres=gpu:h100:2": opens the resubmission's card in the chat; a refusal is shown beside it. */
function MoveButton(props: {
  jobId: string;
  move: IMove;
  onMove: (jobId: string, placement: IPlacement) => Promise<void>;
}): JSX.Element {
  const { jobId, move, onMove } = props;
  const [problem, setProblem] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);
  const click = () => {
    setBusy(true);
    setProblem(null);
    onMove(jobId, { partition: move.partition, gpu_type: move.gpu_type }).then(
      () => setBusy(false),
      error => {
        setBusy(false);
        setProblem(String((error as Error)?.message ?? error));
      }
    );
  };
  return (
    <div className="betty-PendingWhy-move">
      <button
        className="betty-Button"
        data-testid="betty-job-why-move"
        disabled={busy}
        title="A card to approve in the chat: the job's recorded script with only this change; the job stays queued until you cancel it"
        onClick={click}
      >
        Resubmit with {visibleText(move.change)}
      </button>
      {problem && (
        <span className="betty-PendingWhy-error" role="alert" data-testid="betty-job-why-move-error">
          {visibleText(problem.split('\n')[0])}
        </span>
      )}
    </div>
  );
}
