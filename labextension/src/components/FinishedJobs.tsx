/**
 * The Jobs tab's recent finished jobs (from accounting), in one list that scrolls through all
 * of them with only the rows in view in the page: state and exit code, what each used of what
 * it asked for (EfficiencyBadge), filterable by state, and for each job Betty recorded a
 * Resubmit… that opens its script in an approval card's editor in the chat (nothing is
 * submitted until the person approves that card).
 */
import * as React from 'react';

import { formatStamp } from '../format';
import { experimentNotebook, IExperiment, IOutcome } from '../models';
import { visibleText } from '../safe';
import { EfficiencyBadge, IJobEfficiency, useEfficiency } from './EfficiencyBadge';
import { OpenLink } from './OpenLink';
import { IFinishedJob } from '../table';
import { RoomRow, RowWindowRegion, useRowWindow } from './RowWindow';

/**
 * A finished job's row height in pixels until one is measured: the stylesheet gives every row
 * one height (`--betty-finished-row-height`), and the list measures the first row it shows.
 */
export const FINISHED_ROW_HEIGHT = 54;

/** Props of {@link FinishedJobs}. */
export interface IFinishedJobsProps {
  jobs: IFinishedJob[];
  experimentOf: (jobId: string) => IExperiment | undefined;
  onResubmit: (jobId: string) => Promise<void>;
  onOpen: (path: string) => void;
  /** The cluster the jobs ran on, and how to read their efficiency (a badge on each row when given). */
  cluster?: string | null;
  loadEfficiency?: (cluster: string, jobIds: string[]) => Promise<IOutcome>;
}

/** The finished jobs, newest first, in one scrolling list, with a state filter. */
export function FinishedJobs(props: IFinishedJobsProps): JSX.Element {
  const { jobs, experimentOf, onResubmit, onOpen } = props;
  const [state, setState] = React.useState('');
  const shown = React.useMemo(
    () => jobs.filter(job => state === '' || job.state === state),
    [jobs, state]
  );
  const rows = useRowWindow(shown.length, { rowHeight: FINISHED_ROW_HEIGHT, from: state, least: 2 });
  // One efficiency read for the rows in the page (the window), asked again for the new rows as the list scrolls.
  const efficiency = useEfficiency(
    props.loadEfficiency,
    props.cluster ?? null,
    shown.slice(rows.first, rows.end).map(job => job.jobId),
    jobs
  );
  return (
    <section className="betty-FinishedJobs" data-testid="betty-finished-jobs">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">Finished recently</span>
        <StateFilter
          states={jobs.map(job => job.state)}
          value={state}
          onChange={setState}
          testId="betty-finished-filter"
          label="Show finished jobs in this state"
        />
      </div>
      {shown.length === 0 ? (
        <div className="betty-Tab-empty" data-testid="betty-finished-empty">
          No job of yours finished in the last week{state ? ` as ${visibleText(state)}` : ''}.
        </div>
      ) : (
        <RowWindowRegion rows={rows} className="betty-FinishedJobs-scroll" testId="betty-finished-list" label="Your jobs finished recently">
          <ul className="betty-FinishedJobs-list" role="list" ref={rows.rows}>
            <RoomRow as="li" height={rows.before} />
            {shown.slice(rows.first, rows.end).map((job, i) => (
              <FinishedRow
                key={job.jobId}
                job={job}
                position={rows.first + i}
                total={shown.length}
                experiment={experimentOf(job.jobId)}
                efficiency={efficiency[job.jobId]}
                onResubmit={onResubmit}
                onOpen={onOpen}
              />
            ))}
            <RoomRow as="li" height={rows.after} />
          </ul>
        </RowWindowRegion>
      )}
    </section>
  );
}

/** Props of {@link StateFilter}. */
export interface IStateFilterProps {
  /** The states of the rows (repeats are fine): each is offered once, sorted. */
  states: string[];
  /** The state shown; '' for every state. */
  value: string;
  onChange: (state: string) => void;
  testId: string;
  /** What the menu does, for a screen reader. */
  label: string;
}

/** A menu of the states the rows are in, with "every state" first. */
export function StateFilter({ states, value, onChange, testId, label }: IStateFilterProps): JSX.Element {
  return (
    <select
      className="betty-FinishedJobs-filter"
      data-testid={testId}
      aria-label={label}
      value={value}
      onChange={event => onChange(event.target.value)}
    >
      <option value="">every state</option>
      {[...new Set(states)].sort().map(each => (
        <option key={each} value={each}>
          {visibleText(each)}
        </option>
      ))}
    </select>
  );
}

interface IFinishedRowProps {
  job: IFinishedJob;
  /** Where the row lies in the list shown (from 0), and how long that list is. */
  position: number;
  total: number;
  experiment: IExperiment | undefined;
  efficiency: IJobEfficiency | undefined;
  onResubmit: (jobId: string) => Promise<void>;
  onOpen: (path: string) => void;
}

/** One finished job: every row is one height (the stylesheet's), each line of it cut with an ellipsis. */
function FinishedRow(props: IFinishedRowProps): JSX.Element {
  const { job, position, total, experiment, efficiency, onResubmit, onOpen } = props;
  return (
    <li
      className="betty-JobRow betty-FinishedJobs-row"
      data-testid="betty-finished-row"
      data-job-id={job.jobId}
      data-state={job.state}
      data-window-row=""
      aria-posinset={position + 1}
      aria-setsize={total}
    >
      <div className="betty-ExperimentRow-head">
        <span className="betty-JobRow-title">{visibleText(job.name)}</span>
        <span className={`betty-State betty-State-${job.state}`}>{visibleText(job.state)}</span>
      </div>
      <div className="betty-JobRow-sub">
        <span className="betty-JobRow-id">{job.jobId}</span>
        {job.partition && ` · ${visibleText(job.partition)}`}
        {job.exitCode && ` · exit code ${visibleText(job.exitCode)}`}
        {job.ended && ` · ended ${visibleText(formatStamp(job.ended))}`}
      </div>
      {(efficiency || experiment) && (
        // The row's third line: what the job used (the amounts in the badge's tooltip), then its links.
        <div className="betty-JobRow-links">
          <EfficiencyBadge figures={efficiency} />
          {experiment && (
            <>
              <OpenLink path={experimentNotebook(experiment)} testId="betty-job-open-notebook" onOpen={onOpen}>
                notebook
              </OpenLink>
              <ResubmitButton jobId={job.jobId} onResubmit={onResubmit} />
            </>
          )}
        </div>
      )}
    </li>
  );
}

/** A link-styled button that starts something slow (`run`), says so while it runs, and shows its refusal's
 * one line under it. */
export function ActionButton(props: {
  label: string;
  title: string;
  testId: string;
  run: () => Promise<void>;
}): JSX.Element {
  const [busy, setBusy] = React.useState(false);
  const [problem, setProblem] = React.useState<string | null>(null);
  const start = async () => {
    setBusy(true);
    setProblem(null);
    try {
      await props.run();
    } catch (error) {
      setProblem((error as Error).message ?? String(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        className="betty-Link"
        data-testid={props.testId}
        title={props.title}
        disabled={busy}
        onClick={() => void start()}
      >
        {props.label}
      </button>
      {problem && (
        <div
          className="betty-Tab-error"
          role="alert"
          data-testid={`${props.testId}-error`}
          title={visibleText(problem)}
        >
          {visibleText(problem)}
        </div>
      )}
    </>
  );
}

/** "Resubmit…": open this job's script in an approval card in the chat. */
export function ResubmitButton(props: {
  jobId: string;
  onResubmit: (jobId: string) => Promise<void>;
}): JSX.Element {
  return (
    <ActionButton
      label="Resubmit…"
      title="Open this job's script in an approval card in the chat, to edit and approve"
      testId="betty-resubmit"
      run={() => props.onResubmit(props.jobId)}
    />
  );
}
