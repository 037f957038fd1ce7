/**
 * Tables from Betty's tool outcomes (`{columns: [{name, type}], rows: [[…]]}`, see
 * `docs/server-api.md`) become rows by column name, and the queue's rows become the jobs the
 * Jobs tab lists.
 */
import { jobEnded } from './events';
import { formatDuration, formatTimeLimit } from './format';
import { IOutcome, ITable } from './models';

/** One row of a table, each cell under its column's name. */
export type TableRow = Record<string, unknown>;

/** A job of the queue, in the fields the Jobs tab shows. */
export interface IJobRow {
  jobId: string;
  /** The array's job id when this row is an array task, else the job id. */
  arrayJobId: string;
  name: string;
  partition: string;
  state: string;
  reason: string;
  elapsed: string;
  /** `INFINITE` when the job has no time limit. */
  timeLimit: string;
  gpus: string;
  /** How many jobs the row is: a pending array's row (`8_[0-999%10]`) is each of its tasks. */
  tasks: number;
}

/** The rows of a table, each cell under its column's name; a row that is not a list is left out. */
export function tableRows(table: ITable): TableRow[] {
  const names = Array.isArray(table?.columns) ? table.columns.map(column => column.name) : [];
  const rows: unknown[] = Array.isArray(table?.rows) ? table.rows : [];
  return rows
    .filter((row): row is unknown[] => Array.isArray(row))
    .map(row => Object.fromEntries(names.map((name, i) => [name, row[i] ?? null])));
}

/** The rows of an outcome whose data is a table; [] for any other outcome. */
export function outcomeRows(outcome: IOutcome): TableRow[] {
  return outcome.data?.kind === 'table' ? tableRows(outcome.data.value) : [];
}

/** The queue's rows (`cluster_queue`'s frame) as jobs. */
export function jobRows(outcome: IOutcome): IJobRow[] {
  return outcomeRows(outcome).map(row => {
    const jobId = text(row.job_id);
    const gpus = Number(row.gpus ?? 0);
    const tasks = Number(row.tasks ?? 1);
    return {
      jobId,
      arrayJobId: text(row.array_job_id) || jobId,
      name: text(row.name),
      partition: text(row.partition),
      state: text(row.state),
      reason: text(row.reason),
      elapsed: formatDuration(row.elapsed),
      timeLimit: formatTimeLimit(row.time_limit),
      gpus: gpus > 0 ? `${gpus}${row.gpu_type ? ` × ${text(row.gpu_type)}` : ''}` : '',
      tasks: Number.isInteger(tasks) && tasks > 0 ? tasks : 1
    };
  });
}

/** Jobs per state, each task of a pending array counted, most first (as `job_count` counts). */
export function jobsByState(jobs: IJobRow[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const job of jobs) {
    counts.set(job.state, (counts.get(job.state) ?? 0) + job.tasks);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]);
}

/** A job that ended, as accounting (`cluster_history`) records it. */
export interface IFinishedJob {
  jobId: string;
  name: string;
  partition: string;
  /** The state's first word (`CANCELLED by 0` is `CANCELLED`). */
  state: string;
  /** `1:0` (exit code : signal); '' when accounting has none. */
  exitCode: string;
  ended: string;
}

/** The jobs that ended in a history outcome (no steps, no running job), the newest first. */
export function finishedJobs(outcome: IOutcome): IFinishedJob[] {
  return outcomeRows(outcome)
    .map(row => ({
      jobId: text(row.job_id),
      name: text(row.name),
      partition: text(row.partition),
      state: text(row.state).trim().split(/\s+/)[0] ?? '',
      exitCode: text(row.exit_code),
      ended: text(row.ended)
    }))
    .filter(job => job.jobId !== '' && !job.jobId.includes('.') && jobEnded(job.state))
    .sort((a, b) => b.ended.localeCompare(a.ended));
}

function text(value: unknown): string {
  return value === null || value === undefined ? '' : String(value);
}
