/**
 * What a finished job used of what it asked for, compactly, on its Finished recently row: `CPU 34% · mem 63% ·
 * time 2%`, the amounts in the tooltip. The figures come from `GET jobs/efficiency` (`cluster_efficiency`: one
 * sacct call for the page's jobs); see docs/advisor.md.
 */
import * as React from 'react';

import { IOutcome } from '../models';
import { visibleText } from '../safe';

/** One job's figures, as `cluster_efficiency` gives them (ratios 0..1, null when accounting has no figure). */
export interface IJobEfficiency {
  jobId: string;
  cpu: number | null;
  memory: number | null;
  time: number | null;
  /** The amounts behind the ratios, one line each, for the tooltip. */
  details: string[];
}

/** Below this share of the request a figure is marked as wasteful. */
export const LOW_USE = 0.25;

/** The figures in a `cluster_efficiency` outcome, by job id ({} for any other outcome). */
export function jobEfficiencies(outcome: IOutcome | null): Record<string, IJobEfficiency> {
  const data = outcome?.ok ? outcome.data : null;
  const jobs = data?.kind === 'json' ? (data.value as { jobs?: unknown })?.jobs : null;
  const found: Record<string, IJobEfficiency> = {};
  for (const item of Array.isArray(jobs) ? jobs : []) {
    const job = item as Record<string, unknown>;
    const jobId = typeof job.job_id === 'string' ? job.job_id : '';
    if (jobId) {
      found[jobId] = {
        jobId,
        cpu: ratio(job.cpu_efficiency),
        memory: ratio(job.memory_efficiency),
        time: ratio(job.time_efficiency),
        details: details(job)
      };
    }
  }
  return found;
}

function ratio(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function size(bytes: unknown): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) {
    return '?';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value >= 10 || unit === 0 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`;
}

function details(job: Record<string, unknown>): string[] {
  const lines = [];
  if (typeof job.cpu_seconds === 'number' && typeof job.elapsed_seconds === 'number') {
    lines.push(`CPU: ${job.cpu_seconds.toFixed(1)} s busy of ${job.elapsed_seconds} s × ${String(job.cpus)} core(s)`);
  }
  if (job.memory_peak_bytes !== null && job.memory_peak_bytes !== undefined) {
    lines.push(`memory: peak ${size(job.memory_peak_bytes)} of ${size(job.memory_requested_bytes)} asked`);
  }
  if (typeof job.time_limit_seconds === 'number') {
    lines.push(`time: ${String(job.elapsed_seconds)} s of a ${job.time_limit_seconds} s limit`);
  }
  if (typeof job.gpus === 'number' && job.gpus > 0) {
    const use = typeof job.gpu_utilization === 'number' ? `${job.gpu_utilization.toFixed(0)}% busy` : 'use not gathered here';
    lines.push(`GPUs: ${job.gpus}, ${use}`);
  }
  return lines;
}

/** How many times a job's figures are asked for before its row goes without them (a job that never ran). */
export const EFFICIENCY_ASKS = 3;

/**
 * The figures of the jobs `jobIds` on `cluster`. Each refresh (`refreshed` changes) asks, in one call, for the
 * jobs whose figures are not complete yet — accounting may record a peak a moment after the end — each at most
 * {@link EFFICIENCY_ASKS} times; {} until they come, and when they cannot be read (the row shows no badge then).
 */
export function useEfficiency(
  load: ((cluster: string, jobIds: string[]) => Promise<IOutcome>) | undefined,
  cluster: string | null,
  jobIds: string[],
  refreshed: unknown
): Record<string, IJobEfficiency> {
  const [figures, setFigures] = React.useState<Record<string, IJobEfficiency>>({});
  const asked = React.useRef<Record<string, number>>({});
  const known = React.useRef(figures);
  known.current = figures;
  const key = jobIds.join(',');
  React.useEffect(() => {
    if (!load || cluster === null || key === '') {
      return;
    }
    const wanted = key
      .split(',')
      .filter(jobId => !complete(known.current[jobId]) && (asked.current[jobId] ?? 0) < EFFICIENCY_ASKS);
    if (wanted.length === 0) {
      return;
    }
    wanted.forEach(jobId => (asked.current[jobId] = (asked.current[jobId] ?? 0) + 1));
    let current = true;
    load(cluster, wanted)
      .then(outcome => current && setFigures(previous => ({ ...previous, ...jobEfficiencies(outcome) })))
      .catch(() => undefined);
    return () => {
      current = false;
    };
  }, [load, cluster, key, refreshed]);
  return figures;
}

function complete(figures: IJobEfficiency | undefined): boolean {
  return figures !== undefined && figures.cpu !== null && figures.memory !== null;
}

function percent(value: number): string {
  return `${Math.round(value * 100)}%`;
}

/** `CPU 34% · mem 63% · time 2%`, a figure under {@link LOW_USE} marked; nothing when no figure is known. */
export function EfficiencyBadge({ figures }: { figures: IJobEfficiency | undefined }): JSX.Element | null {
  if (!figures) {
    return null;
  }
  const parts = (
    [
      ['CPU', figures.cpu],
      ['mem', figures.memory],
      ['time', figures.time]
    ] as [string, number | null][]
  ).filter((part): part is [string, number] => part[1] !== null);
  if (parts.length === 0) {
    return null;
  }
  return (
    <span
      className="betty-Efficiency"
      data-testid="betty-efficiency"
      title={visibleText(figures.details.join('\n'))}
      aria-label={`used of what it asked for: ${parts.map(([name, value]) => `${name} ${percent(value)}`).join(', ')}`}
    >
      {parts.map(([name, value], index) => (
        <React.Fragment key={name}>
          {index > 0 ? ' · ' : ''}
          <span
            className={value < LOW_USE ? 'betty-Efficiency-low' : undefined}
            data-testid={`betty-efficiency-${name}`}
          >
            {name} {percent(value)}
          </span>
        </React.Fragment>
      ))}
    </span>
  );
}
