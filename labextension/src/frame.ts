/**
 * Tables from Betty's tool outcomes: a pandas `orient="table"` JSON string becomes rows,
 * and the queue's rows become the jobs the Jobs tab lists.
 */
import { IOutcome } from './models';

/** One row of a frame, as pandas wrote it. */
export type FrameRow = Record<string, unknown>;

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
  timeLimit: string;
  gpus: string;
}

/** The rows of a pandas `orient="table"` JSON string; [] when it is not one. */
export function frameRows(json: string): FrameRow[] {
  let table: unknown;
  try {
    table = JSON.parse(json);
  } catch {
    return [];
  }
  const data = (table as { data?: unknown } | null)?.data;
  return Array.isArray(data)
    ? data.filter((row): row is FrameRow => typeof row === 'object' && row !== null)
    : [];
}

/** The rows of an outcome whose data is a frame; [] for any other outcome. */
export function outcomeRows(outcome: IOutcome): FrameRow[] {
  return outcome.data?.kind === 'frame' ? frameRows(String(outcome.data.value)) : [];
}

/** The queue's rows (`cluster_queue`'s frame) as jobs. */
export function jobRows(outcome: IOutcome): IJobRow[] {
  return outcomeRows(outcome).map(row => {
    const jobId = text(row.job_id);
    const gpus = Number(row.gpus ?? 0);
    return {
      jobId,
      arrayJobId: text(row.array_job_id) || jobId,
      name: text(row.name),
      partition: text(row.partition),
      state: text(row.state),
      reason: text(row.reason),
      elapsed: formatDuration(row.elapsed),
      timeLimit: formatDuration(row.time_limit),
      gpus: gpus > 0 ? `${gpus}${row.gpu_type ? ` × ${text(row.gpu_type)}` : ''}` : ''
    };
  });
}

const ISO_DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/**
 * A duration in Slurm's own notation (`1:02:03`, `2-00:00:00`): from seconds (how
 * `betty_jupyter.agent.wire` writes a timedelta column) or an ISO 8601 duration (pandas'
 * own `P0DT1H2M3S`); '' for null, the text itself when it is neither.
 */
export function formatDuration(value: unknown): string {
  if (value === null || value === undefined || value === '') {
    return '';
  }
  if (typeof value === 'number') {
    return Number.isFinite(value) ? slurmTime(value) : '';
  }
  const match = ISO_DURATION.exec(String(value));
  if (!match) {
    return String(value);
  }
  const [days, hours, minutes, seconds] = [1, 2, 3, 4].map(i => Number(match[i] ?? 0));
  return slurmTime(((days * 24 + hours) * 60 + minutes) * 60 + seconds);
}

function slurmTime(totalSeconds: number): string {
  const whole = Math.max(0, Math.floor(totalSeconds));
  const days = Math.floor(whole / 86400);
  const hours = Math.floor((whole % 86400) / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const seconds = whole % 60;
  return days > 0
    ? `${days}-${pad(hours)}:${pad(minutes)}:${pad(seconds)}`
    : `${hours}:${pad(minutes)}:${pad(seconds)}`;
}

function pad(value: number): string {
  return String(value).padStart(2, '0');
}

function text(value: unknown): string {
  return value === null || value === undefined ? '' : String(value);
}
