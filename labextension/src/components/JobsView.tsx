/**
 * The Jobs tab: the person's own jobs on the cluster, refreshed while the tab is visible, in
 * one list that scrolls through all of them with only the rows in view in the page (each
 * array task counted in the summary), each with a cancel button (through an approval card in
 * the chat) and, for jobs recorded as experiments, one click to their notebook or wiki page and
 * an extend button (continuations queued behind the job, through an approval card).
 */
import * as React from 'react';

import { IPlacement } from '../api';
import { formatClock, formatCount } from '../format';
import { finishedJobs, IFinishedJob, IJobRow, jobRows, jobsByState } from '../table';
import { experimentNotebook, experimentPage, IExperiment, IExperiments, IOutcome } from '../models';
import { visibleText } from '../safe';
import { OpenLink } from './OpenLink';
import { FinishedJobs, StateFilter } from './FinishedJobs';
import { RoomRow, RowWindowRegion, useRowWindow } from './RowWindow';
import { IWhyFor, WhyBox, WhyButton } from './PendingWhy';

/**
 * A job row's height in pixels until one is measured: the stylesheet gives every row one
 * height (`--betty-job-row-height`), and the list measures the first row it shows.
 */
export const JOB_ROW_HEIGHT = 57;

/** The columns of the jobs table. */
const JOB_COLUMNS = 3;

/** Props of {@link JobsView}. */
export interface IJobsViewProps {
  cluster: string | null;
  /** Whether the tab is on screen: it refreshes only then. */
  visible: boolean;
  refreshSeconds: number;
  loadJobs: (cluster: string) => Promise<IOutcome>;
  loadExperiments: () => Promise<IExperiments>;
  /** Ask to cancel: the approval card arrives in the chat. */
  onCancel: (jobId: string) => Promise<void>;
  /** Ask to give a recorded job more time (continuations behind it): the approval card arrives in the chat. */
  onExtend?: (jobId: string) => Promise<void>;
  onOpen: (path: string) => void;
  /** The person's jobs in accounting since a week ago, finished ones included. */
  loadHistory?: (cluster: string) => Promise<IOutcome>;
  /** The efficiency of finished jobs (`GET jobs/efficiency`), shown on their rows. */
  loadEfficiency?: (cluster: string, jobIds: string[]) => Promise<IOutcome>;
  /** Resubmit a recorded job: its card opens in the chat's editor; with a placement, moved there (its diff). */
  onResubmit?: (jobId: string, placement?: IPlacement) => Promise<void>;
  /** Why a pending job waits (a pending row's "why?", answered in the box above the list). */
  loadWhy?: (cluster: string, jobId: string) => Promise<IOutcome>;
}

interface IJobsState {
  jobs: IJobRow[];
  experiments: IExperiment[];
  finished: IFinishedJob[];
  error: string | null;
  loaded: boolean;
  at: Date | null;
}

/** The Jobs tab. */
export function JobsView(props: IJobsViewProps): JSX.Element {
  const { cluster, visible, refreshSeconds, loadJobs, loadExperiments, loadHistory } = props;
  const [state, setState] = React.useState<IJobsState>({
    jobs: [],
    experiments: [],
    finished: [],
    error: null,
    loaded: false,
    at: null
  });
  const [cancelling, setCancelling] = React.useState<Record<string, ICancelling>>({});
  const [shownState, setShownState] = React.useState('');
  const [whyFor, setWhyFor] = React.useState<IWhyFor | null>(null);
  const { loadWhy } = props;
  const askWhy =
    cluster !== null && loadWhy
      ? (job: IJobRow) =>
          setWhyFor(previous => ({
            cluster,
            jobId: job.jobId,
            name: job.name,
            asked: (previous?.asked ?? 0) + 1
          }))
      : undefined;
  const shown = React.useMemo(
    () => state.jobs.filter(job => shownState === '' || job.state === shownState),
    [state.jobs, shownState]
  );
  const rows = useRowWindow(shown.length, { rowHeight: JOB_ROW_HEIGHT, from: shownState, least: 3 });

  const refresh = React.useCallback(async () => {
    if (cluster === null) {
      return;
    }
    try {
      const [outcome, experiments, history] = await Promise.all([
        loadJobs(cluster),
        loadExperiments().catch(() => ({ experiments: [] }) as IExperiments),
        loadHistory ? loadHistory(cluster).catch(() => null) : null
      ]);
      setState({
        jobs: outcome.ok ? jobRows(outcome) : [],
        experiments: experiments.experiments,
        finished: history?.ok ? finishedJobs(history) : [],
        error: outcome.ok ? null : outcome.summary,
        loaded: true,
        at: new Date()
      });
    } catch (error) {
      setState(previous => ({ ...previous, error: (error as Error).message, loaded: true }));
    }
  }, [cluster, loadJobs, loadExperiments, loadHistory]);

  React.useEffect(() => {
    if (!visible || cluster === null) {
      return;
    }
    void refresh();
    const timer = setInterval(() => void refresh(), Math.max(2, refreshSeconds) * 1000);
    return () => clearInterval(timer);
  }, [visible, cluster, refreshSeconds, refresh]);

  const ask = async (jobId: string, action: (jobId: string) => Promise<void>) => {
    const note = (busy: boolean, text: string) =>
      setCancelling(previous => ({ ...previous, [jobId]: { busy, text } }));
    note(true, 'asking…');
    try {
      await action(jobId);
      note(false, 'approve it in the chat');
    } catch (error) {
      note(false, (error as Error).message);
    }
  };
  const cancel = (jobId: string) => ask(jobId, props.onCancel);
  const { onExtend } = props;
  const extend = onExtend ? (jobId: string) => ask(jobId, onExtend) : undefined;

  return (
    <div className="betty-Jobs" data-testid="betty-jobs">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">
          My jobs{cluster ? ` on ${cluster}` : ''}
          {state.at && <span className="betty-Tab-clock"> · {formatClock(state.at)}</span>}
        </span>
        <button
          className="betty-Button"
          data-testid="betty-jobs-refresh"
          onClick={() => void refresh()}
        >
          Refresh
        </button>
      </div>
      {state.error && (
        <div className="betty-Tab-error" role="alert" data-testid="betty-jobs-error">
          {state.error}
        </div>
      )}
      {state.loaded && !state.error && state.jobs.length === 0 && (
        <div className="betty-Tab-empty" data-testid="betty-jobs-empty">
          You have no jobs in the queue.
        </div>
      )}
      {state.jobs.length > 0 && (
        <div className="betty-Tab-toolbar">
          <JobsSummary jobs={state.jobs} />
          <StateFilter
            states={state.jobs.map(job => job.state)}
            value={shownState}
            onChange={setShownState}
            testId="betty-jobs-filter"
            label="Show queued jobs in this state"
          />
        </div>
      )}
      {state.jobs.length > 0 && shown.length === 0 && (
        <div className="betty-Tab-empty" data-testid="betty-jobs-empty">
          None of your jobs in the queue is {visibleText(shownState)}.
        </div>
      )}
      {whyFor && whyFor.cluster === cluster && loadWhy && (
        <WhyBox
          job={whyFor}
          load={jobId => loadWhy(whyFor.cluster, jobId)}
          onMove={props.onResubmit}
          onClose={() => setWhyFor(null)}
        />
      )}
      {shown.length > 0 && (
        <RowWindowRegion rows={rows} className="betty-Jobs-scroll" testId="betty-jobs-list" label="Your jobs in the queue">
          <table className="betty-Jobs-table" aria-rowcount={shown.length + 1}>
            <thead>
              <tr aria-rowindex={1}>
                <th>Job</th>
                <th>State</th>
                <th />
              </tr>
            </thead>
            <tbody ref={rows.rows}>
              <RoomRow as="tr" height={rows.before} columns={JOB_COLUMNS} />
              {shown.slice(rows.first, rows.end).map((job, i) => (
                <JobRow
                  key={job.jobId}
                  job={job}
                  position={rows.first + i}
                  experiment={experimentOf(job, cluster, state.experiments)}
                  cancelling={cancelling[job.jobId]}
                  onCancel={cancel}
                  onExtend={extend}
                  onOpen={props.onOpen}
                  onWhy={askWhy}
                  explaining={whyFor?.jobId === job.jobId}
                />
              ))}
              <RoomRow as="tr" height={rows.after} columns={JOB_COLUMNS} />
            </tbody>
          </table>
        </RowWindowRegion>
      )}
      {props.onResubmit && state.loaded && (
        <FinishedJobs
          jobs={state.finished}
          experimentOf={jobId =>
            state.experiments.find(each => each.job_id === jobId && (cluster === null || each.cluster === cluster))
          }
          onResubmit={props.onResubmit}
          onOpen={props.onOpen}
          cluster={cluster}
          loadEfficiency={props.loadEfficiency}
        />
      )}
    </div>
  );
}

/** The experiment that recorded `job` (its array, for an array task), if any. */
export function experimentOf(
  job: IJobRow,
  cluster: string | null,
  experiments: IExperiment[]
): IExperiment | undefined {
  return experiments.find(
    each =>
      (cluster === null || each.cluster === cluster) &&
      (each.job_id === job.jobId || each.job_id === job.arrayJobId || (each.segments ?? []).includes(job.jobId))
  );
}

/** `20,010 jobs: 20,000 PENDING, 10 RUNNING`, each task of a pending array counted. */
function JobsSummary({ jobs }: { jobs: IJobRow[] }): JSX.Element {
  const byState = jobsByState(jobs);
  const total = byState.reduce((sum, [, jobs]) => sum + jobs, 0);
  const parts = byState.map(([state, jobs]) => `${formatCount(jobs)} ${visibleText(state)}`);
  return (
    <span className="betty-Tab-caption" data-testid="betty-jobs-summary" data-jobs={total}>
      {formatCount(total)} {total === 1 ? 'job' : 'jobs'}: {parts.join(', ')}
    </span>
  );
}

/** A cancel asked for from the Jobs tab, and what became of it. */
interface ICancelling {
  busy: boolean;
  text: string;
}

interface IJobRowProps {
  job: IJobRow;
  /** Where the row lies in the list shown (from 0). */
  position: number;
  experiment: IExperiment | undefined;
  cancelling: ICancelling | undefined;
  onCancel: (jobId: string) => void;
  /** Ask to give the job more time (only a job Betty recorded). */
  onExtend?: (jobId: string) => void;
  onOpen: (path: string) => void;
  /** Ask why a pending job waits (only where the server can be asked). */
  onWhy?: (job: IJobRow) => void;
  /** Whether the box above the list explains this job now. */
  explaining?: boolean;
}

/** One job of the list: every row is one height (the stylesheet's), each line of it cut with an ellipsis. */
function JobRow({
  job,
  position,
  experiment,
  cancelling,
  onCancel,
  onExtend,
  onOpen,
  onWhy,
  explaining
}: IJobRowProps): JSX.Element {
  return (
    <tr
      className="betty-JobRow"
      data-testid="betty-job-row"
      data-job-id={job.jobId}
      data-state={job.state}
      data-window-row=""
      aria-rowindex={position + 2}
    >
      <td className="betty-JobRow-name" title={visibleText(`${job.name} · ${job.partition}`)}>
        <span className="betty-JobRow-title">{visibleText(job.name)}</span>
        <div className="betty-JobRow-sub">
          <span className="betty-JobRow-id">{job.jobId}</span> · {visibleText(job.partition)}
          {job.gpus && ` · ${job.gpus} GPU`}
        </div>
        {experiment && (
          <div className="betty-JobRow-links">
            <OpenLink path={experimentNotebook(experiment)} testId="betty-job-open-notebook" onOpen={onOpen}>
              notebook
            </OpenLink>
            <OpenLink path={experimentPage(experiment)} testId="betty-job-open-page" onOpen={onOpen}>
              page
            </OpenLink>
            {onExtend && (job.state === 'RUNNING' || job.state === 'PENDING') && (
              <button
                className="betty-Link"
                data-testid="betty-job-extend"
                title="More time: continuation jobs queued behind this one, each resuming from its checkpoint (you approve it in the chat)"
                disabled={cancelling?.busy === true}
                onClick={() => onExtend(job.jobId)}
              >
                extend
              </button>
            )}
          </div>
        )}
      </td>
      <td>
        <div className="betty-JobRow-state">
          <span className={`betty-State betty-State-${job.state}`}>{job.state}</span>
          {onWhy && job.state === 'PENDING' && (
            <WhyButton jobId={job.jobId} shown={explaining === true} onAsk={() => onWhy(job)} />
          )}
        </div>
        {job.reason && <div className="betty-JobRow-sub">{visibleText(job.reason)}</div>}
        <div className="betty-JobRow-sub betty-JobRow-time">
          {job.elapsed}
          {job.timeLimit && ` of ${job.timeLimit}`}
        </div>
      </td>
      <td>
        <button
          className="betty-Button betty-Button-reject"
          data-testid="betty-job-cancel"
          title="Cancel this job (you approve it in the chat)"
          disabled={cancelling?.busy === true}
          onClick={() => onCancel(job.jobId)}
        >
          Cancel
        </button>
        {cancelling && (
          <div className="betty-JobRow-sub betty-JobRow-note" title={visibleText(cancelling.text)}>
            {visibleText(cancelling.text)}
          </div>
        )}
      </td>
    </tr>
  );
}
