/**
 * Sweeps, at the top of the Experiments tab: every recorded sweep (one job array, one
 * experiment), and for the one the person opens its comparison — a row per task (its point,
 * state, runtime, efficiency, the metrics it printed), each metric's curves by step and its
 * final value by parameter (SVG Betty drew, shown through `ChartImage`), and the buttons
 * that start `sweep_retry` (or a search's `sweep_round`) and `sweep_cancel` in the chat, where their cards wait
 * for approval.
 */
import * as React from 'react';

import { ISweep, ISweepComparison, ISweeps } from '../models';
import { ChartImage, visibleText } from '../safe';

/** The states of a task that is still queued or running (a sweep with one can be cancelled). */
const LIVE_STATES = [
  'PENDING',
  'RUNNING',
  'CONFIGURING',
  'COMPLETING',
  'REQUEUED',
  'SUSPENDED',
  'RESIZING'
];

/** Props of {@link SweepsView}. */
export interface ISweepsViewProps {
  /** Whether the tab is on screen: the list loads when it becomes visible. */
  visible: boolean;
  loadSweeps: () => Promise<ISweeps>;
  loadComparison: (slug: string) => Promise<ISweepComparison>;
  /** Start `tool` (`sweep_retry`, `sweep_round`, `sweep_cancel`) with `args` in the chat: its card waits there. */
  onAction: (tool: string, args: Record<string, unknown>) => Promise<void>;
}

/** The sweeps recorded in the project, and the comparison of the one opened. */
export function SweepsView({
  visible,
  loadSweeps,
  loadComparison,
  onAction
}: ISweepsViewProps): JSX.Element | null {
  const [sweeps, setSweeps] = React.useState<ISweep[]>([]);
  const [opened, setOpened] = React.useState<string | null>(null);
  const [error, setError] = React.useState<string | null>(null);

  React.useEffect(() => {
    if (!visible) {
      return;
    }
    loadSweeps().then(
      answer => {
        setSweeps([...answer.sweeps].reverse());
        setError(null);
      },
      reason => setError((reason as Error).message)
    );
  }, [visible, loadSweeps]);

  if (sweeps.length === 0 && error === null) {
    return null;
  }
  return (
    <section className="betty-Sweeps" data-testid="betty-sweeps">
      <div className="betty-Tab-caption">Sweeps</div>
      {error && (
        <div className="betty-Tab-error" role="alert">
          {error}
        </div>
      )}
      <ul className="betty-Experiments-list">
        {sweeps.map(sweep => (
          <li
            key={sweep.experiment.slug}
            className="betty-ExperimentRow"
            data-testid="betty-sweep-row"
            data-slug={sweep.experiment.slug}
          >
            <div className="betty-ExperimentRow-head">
              <span className="betty-ExperimentRow-slug">{sweep.experiment.slug}</span>
              <span className={`betty-State betty-State-${sweep.experiment.state}`}>
                {sweep.experiment.state}
              </span>
            </div>
            <div className="betty-JobRow-sub">
              job array {sweep.experiment.job_id} · {sweep.tasks} tasks ·{' '}
              {visibleText(sweep.grid.join(' '))}
            </div>
            <button
              className="betty-Button"
              data-testid="betty-sweep-compare"
              aria-expanded={opened === sweep.experiment.slug}
              onClick={() =>
                setOpened(opened === sweep.experiment.slug ? null : sweep.experiment.slug)
              }
            >
              {opened === sweep.experiment.slug ? 'Hide comparison' : 'Compare tasks'}
            </button>
            {opened === sweep.experiment.slug && (
              <SweepComparisonView
                slug={sweep.experiment.slug}
                load={loadComparison}
                onAction={onAction}
              />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Props of {@link SweepComparisonView}. */
export interface ISweepComparisonViewProps {
  slug: string;
  load: (slug: string) => Promise<ISweepComparison>;
  onAction: (tool: string, args: Record<string, unknown>) => Promise<void>;
}

/** One sweep's comparison: its buttons, its table, its pictures. */
export function SweepComparisonView({
  slug,
  load,
  onAction
}: ISweepComparisonViewProps): JSX.Element {
  const [comparison, setComparison] = React.useState<ISweepComparison | null>(null);
  const [error, setError] = React.useState<string | null>(null);

  const refresh = React.useCallback(() => {
    setError(null);
    load(slug).then(setComparison, reason => setError((reason as Error).message));
  }, [slug, load]);
  React.useEffect(refresh, [refresh]);

  const act = (tool: string, args: Record<string, unknown>) =>
    onAction(tool, args).catch(reason => setError((reason as Error).message));
  const failed = comparison?.failed ?? [];
  const live = (comparison?.states ?? []).some(state => LIVE_STATES.includes(state));
  const searching = (comparison?.search_header.length ?? 0) > 0;
  return (
    <div className="betty-SweepComparison" data-testid="betty-sweep-comparison">
      <div className="betty-JobRow-links">
        <button className="betty-Button" data-testid="betty-sweep-refresh" onClick={refresh}>
          Refresh
        </button>
        {searching ? (
          <button
            className="betty-Button"
            data-testid="betty-sweep-next-round"
            title="The search's next round: the points it proposes and the tasks it stops (a card to approve)"
            onClick={() => void act('sweep_round', { experiment: slug })}
          >
            Next round
          </button>
        ) : (
          <button
            className="betty-Button"
            data-testid="betty-sweep-retry"
            disabled={failed.length === 0}
            title={
              failed.length
                ? `${retryWords(failed)} (a card to approve)`
                : 'No task failed'
            }
            onClick={() => void act('sweep_retry', { experiment: slug, tasks: failed })}
          >
            {retryWords(failed)}
          </button>
        )}
        <button
          className="betty-Button"
          data-testid="betty-sweep-cancel"
          disabled={!live}
          title={
            live
              ? 'Cancel every task still queued or running (a card to approve)'
              : 'No task is queued or running'
          }
          onClick={() => void act('sweep_cancel', { experiment: slug })}
        >
          Cancel sweep
        </button>
      </div>
      {error && (
        <div className="betty-Tab-error" role="alert">
          {error}
        </div>
      )}
      {comparison === null && error === null && (
        <div className="betty-Tab-empty">Reading every task…</div>
      )}
      {comparison && !comparison.ok && (
        <div className="betty-Tab-error" role="alert" data-testid="betty-sweep-error">
          {visibleText(comparison.summary)}
        </div>
      )}
      {comparison?.ok && <ComparisonTable comparison={comparison} />}
      {comparison?.ok && comparison.search_header.length > 0 && <SearchTable comparison={comparison} />}
      {comparison?.ok &&
        comparison.charts.map(chart => (
          <ChartImage
            key={`${chart.metric} ${chart.parameter ?? ''}`}
            svg={chart.svg}
            alt={
              chart.parameter === null
                ? `${chart.metric} by step`
                : `final ${chart.metric} by ${chart.parameter}`
            }
            testId={
              chart.parameter === null ? 'betty-sweep-chart-steps' : 'betty-sweep-chart-final'
            }
          />
        ))}
    </div>
  );
}

/** A table's header row, each name as text. */
function HeaderRow({ names }: { names: string[] }): JSX.Element {
  return (
    <tr>
      {names.map((name, column) => (
        <th key={column}>{visibleText(name)}</th>
      ))}
    </tr>
  );
}

/** A row's cells, each as text (its whole text as its tooltip too). */
function TextCells({ row }: { row: string[] }): JSX.Element {
  return (
    <>
      {row.map((cell, column) => (
        <td key={column} title={visibleText(cell)}>
          {visibleText(cell)}
        </td>
      ))}
    </>
  );
}

/** The comparison's table: a row per task, every cell text (a failed task's row marked). */
function ComparisonTable({ comparison }: { comparison: ISweepComparison }): JSX.Element {
  return (
    <div className="betty-SweepTable-scroll">
      <table className="betty-SweepTable" data-testid="betty-sweep-table">
        <thead>
          <HeaderRow names={comparison.header} />
        </thead>
        <tbody>
          {comparison.rows.map((row, index) => (
            <tr
              key={index}
              data-testid="betty-sweep-task"
              data-state={comparison.states[index]}
              className={comparison.failed.includes(index) ? 'betty-SweepTable-failed' : undefined}
            >
              <TextCells row={row} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A search's table: each task's objective, the best so far, and why a task stopped or failed. */
function SearchTable({ comparison }: { comparison: ISweepComparison }): JSX.Element {
  return (
    <div className="betty-SweepTable-scroll" data-testid="betty-sweep-search">
      <b>Search</b>
      <table className="betty-SweepTable">
        <thead>
          <HeaderRow names={comparison.search_header} />
        </thead>
        <tbody>
          {comparison.search_rows.map((row, index) => (
            <tr key={index} data-testid="betty-sweep-trial">
              <TextCells row={row} />
            </tr>
          ))}
        </tbody>
      </table>
      {comparison.search_note && <div>{visibleText(comparison.search_note)}</div>}
    </div>
  );
}

/** The retry button's words, naming the failed tasks by their index: "Resubmit failed task 3". */
export function retryWords(failed: number[]): string {
  if (failed.length === 0) {
    return 'Resubmit failed tasks';
  }
  const tasks = failed.length === 1 ? 'task' : 'tasks';
  return `Resubmit failed ${tasks} ${failed.slice(0, -1).join(', ')}${failed.length > 1 ? ' and ' : ''}${failed[failed.length - 1]}`;
}
