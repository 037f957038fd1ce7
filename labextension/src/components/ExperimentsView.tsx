/**
 * The Experiments tab: every experiment recorded in the workspace, with its job's state
 * and one click to its notebook or wiki page. An ended notebook run's executed notebook is
 * brought back with "Fetch result" (`notebook_collect`, asked in the chat like any call).
 */
import * as React from 'react';

import { experimentNotebook, experimentPage, IExperiment, IExperiments, IPipelineGraph } from '../models';
import { formatStamp, resourceWords } from '../format';
import { visibleText } from '../safe';
import { OpenLink } from './OpenLink';
import { ActionButton, ResubmitButton } from './FinishedJobs';
import { PipelineGraphLoader } from './PipelineGraph';

/** Props of {@link ExperimentsView}. */
export interface IExperimentsViewProps {
  /** Whether the tab is on screen: it loads when it becomes visible. */
  visible: boolean;
  loadExperiments: () => Promise<IExperiments>;
  onOpen: (path: string) => void;
  /** Resubmit an experiment's job: its card opens in the chat's editor. */
  onResubmit?: (jobId: string) => Promise<void>;
  /** Bring an ended notebook run's executed notebook back into the project (through the chat's approval). */
  onFetchResult?: (slug: string) => Promise<void>;
  /** A pipeline's steps and edges: a pipeline's row shows them as a graph. */
  loadPipeline?: (slug: string) => Promise<IPipelineGraph>;
}

/** The Experiments tab. */
export function ExperimentsView({
  visible,
  loadExperiments,
  onOpen,
  onResubmit,
  onFetchResult,
  loadPipeline
}: IExperimentsViewProps): JSX.Element {
  const [experiments, setExperiments] = React.useState<IExperiment[] | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const [version, setVersion] = React.useState(0);

  const refresh = React.useCallback(async () => {
    try {
      const answer = await loadExperiments();
      setExperiments(newestFirst(answer.experiments));
      setVersion(read => read + 1);
      setError(null);
    } catch (reason) {
      setError((reason as Error).message);
    }
  }, [loadExperiments]);

  React.useEffect(() => {
    if (visible) {
      void refresh();
    }
  }, [visible, refresh]);

  return (
    <div className="betty-Experiments" data-testid="betty-experiments">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">Experiments in this project</span>
        <button
          className="betty-Button"
          data-testid="betty-experiments-refresh"
          onClick={() => void refresh()}
        >
          Refresh
        </button>
      </div>
      {error && (
        <div className="betty-Tab-error" role="alert">
          {error}
        </div>
      )}
      {experiments?.length === 0 && (
        <div className="betty-Tab-empty" data-testid="betty-experiments-empty">
          No experiment is recorded yet: every job Betty submits becomes one.
        </div>
      )}
      <ul className="betty-Experiments-list">
        {experiments?.map(experiment => (
          <li
            key={experiment.slug}
            className="betty-ExperimentRow"
            data-testid="betty-experiment-row"
            data-slug={experiment.slug}
            data-state={experiment.state}
          >
            <div className="betty-ExperimentRow-head">
              <span className="betty-ExperimentRow-slug">{experiment.slug}</span>
              <span className={`betty-State betty-State-${experiment.state}`}>
                {experiment.state}
              </span>
            </div>
            {experiment.goal && (
              <div className="betty-ExperimentRow-goal">{visibleText(experiment.goal)}</div>
            )}
            <div className="betty-JobRow-sub">
              job {experiment.job_id} on {visibleText(experiment.cluster)}
              {experiment.partition ? ` · ${visibleText(experiment.partition)}` : ''} · submitted{' '}
              {formatStamp(experiment.submitted)}
            </div>
            {loadPipeline && isPipeline(experiment) && (
              <PipelineGraphLoader slug={experiment.slug} version={version} loadPipeline={loadPipeline} />
            )}
            {resourceWords(experiment.resources ?? {}) && (
              <div className="betty-JobRow-sub" data-testid="betty-experiment-resources">
                asked for {visibleText(resourceWords(experiment.resources ?? {}))}
              </div>
            )}
            <div className="betty-JobRow-links">
              <OpenLink
                path={experimentNotebook(experiment)}
                testId="betty-experiment-open-notebook"
                onOpen={onOpen}
              >
                notebook
              </OpenLink>
              <OpenLink path={experimentPage(experiment)} testId="betty-experiment-open-page" onOpen={onOpen}>
                page
              </OpenLink>
              {onResubmit && <ResubmitButton jobId={experiment.job_id} onResubmit={onResubmit} />}
              {onFetchResult && experiment.finished && isNotebookRun(experiment) && (
                <FetchResultButton slug={experiment.slug} onFetch={onFetchResult} />
              )}
            </div>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Whether `experiment` is a notebook run (`notebook_submit`): its job runs in a notebook run's directory. */
export function isNotebookRun(experiment: IExperiment): boolean {
  return /^#SBATCH --chdir=\S*\/runs\/notebook-/m.test(experiment.script);
}

/** Whether `experiment` is a pipeline of steps (`cluster_pipeline`): its script is every step's under its header line. */
export function isPipeline(experiment: IExperiment): boolean {
  return (experiment.segments?.length ?? 0) > 0 && /^# ==== step \S+/.test(experiment.script);
}

/** "Fetch result": ask for the executed notebook in the chat; a refusal shows its one line. */
function FetchResultButton(props: { slug: string; onFetch: (slug: string) => Promise<void> }): JSX.Element {
  return (
    <ActionButton
      label="Fetch result"
      title="Copy the executed notebook from the cluster into the project (asked in the chat first)"
      testId="betty-fetch-result"
      run={() => props.onFetch(props.slug)}
    />
  );
}

/** Experiments newest first: by submission time, then by slug (which starts with the date). */
export function newestFirst(experiments: IExperiment[]): IExperiment[] {
  return [...experiments].sort(
    (a, b) => b.submitted.localeCompare(a.submitted) || b.slug.localeCompare(a.slug)
  );
}
