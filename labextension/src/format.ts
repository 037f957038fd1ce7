/**
 * Values as a person reads them, in one place: durations as Slurm writes them and `INFINITE`
 * for no time limit, sizes in binary units (`100 MiB`), minutes, token counts, how long ago,
 * cron schedules in words (`daily at 08:00`), a GPU memory estimate as its breakdown and the
 * first line of a tool's summary. Pure functions returning text: the components render it
 * as React text (through `safe.tsx` where the text comes from outside).
 */

/**
 * A duration in Slurm's own notation (`1:02:03`, `2-00:00:00`) from seconds (how a table's
 * `duration` column is written); '' for null, the text itself for anything else.
 */
export function formatDuration(value: unknown): string {
  if (value === null || value === undefined || value === '') {
    return '';
  }
  if (typeof value === 'number') {
    return Number.isFinite(value) ? slurmTime(value) : '';
  }
  return String(value);
}

/** A job's time limit: as {@link formatDuration}, `INFINITE` (Slurm's word) when it has none. */
export function formatTimeLimit(value: unknown): string {
  return formatDuration(value) || 'INFINITE';
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** A size in bytes in binary units: `512 B`, `100 MiB`, `1.5 GiB`; '' when it is not a size. */
export function formatBytes(bytes: unknown): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes) || bytes < 0) {
    return '';
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const whole = unit === 0 || value >= 100 || Number.isInteger(value);
  const shown = whole ? value.toFixed(0) : value.toFixed(1);
  return `${shown.replace(/\.0$/, '')} ${BYTE_UNITS[unit]}`;
}

/** Minutes as a person says them: `5 min`, `1 h 30 min`, `2 days`; '' when not a number. */
export function formatMinutes(minutes: unknown): string {
  if (typeof minutes !== 'number' || !Number.isFinite(minutes) || minutes < 0) {
    return '';
  }
  const whole = Math.round(minutes);
  const days = Math.floor(whole / 1440);
  const hours = Math.floor((whole % 1440) / 60);
  const rest = whole % 60;
  const parts = [
    days > 0 ? `${days} day${days === 1 ? '' : 's'}` : '',
    hours > 0 ? `${hours} h` : '',
    rest > 0 || whole === 0 ? `${rest} min` : ''
  ];
  return parts.filter(Boolean).join(' ');
}

/** How long something took: `40 ms`, `1.2 s`, `2 min 5 s`. */
export function formatMilliseconds(milliseconds: number): string {
  if (milliseconds < 1000) {
    return `${Math.round(milliseconds)} ms`;
  }
  if (milliseconds < 60_000) {
    return `${(milliseconds / 1000).toFixed(1).replace(/\.0$/, '')} s`;
  }
  const seconds = Math.round(milliseconds / 1000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** A count with thousands separators (`20,000`), the same in every locale. */
export function formatCount(value: number): string {
  return value.toLocaleString('en-US');
}

/** `950`, `12.3k`, `1.2M`. */
export function formatTokens(tokens: number): string {
  if (tokens < 1000) {
    return String(tokens);
  }
  return tokens < 1_000_000
    ? `${(tokens / 1000).toFixed(1)}k`
    : `${(tokens / 1_000_000).toFixed(1)}M`;
}

/** A moment (unix seconds) as `Tue 24 Nov, 08:00` in the person's locale. */
export function formatWhen(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString([], {
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    hour: '2-digit',
    minute: '2-digit'
  });
}

/** The time of day something was read, to the second, on a 24-hour clock: `14:03:09`. */
export function formatClock(date: Date): string {
  return date.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23'
  });
}

/** How long ago a moment (unix seconds) was: `just now`, `5 min ago`, `3 h ago`, else the date. */
export function formatAgo(seconds: number, now: number = Date.now() / 1000): string {
  const past = now - seconds;
  if (past < 60) {
    return 'just now';
  }
  if (past < 3600) {
    return `${Math.floor(past / 60)} min ago`;
  }
  return past < 86_400 ? `${Math.floor(past / 3600)} h ago` : formatWhen(seconds);
}

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/**
 * A five-field cron schedule in words — `daily at 08:00`, `every Monday at 09:30`,
 * `weekdays at 07:45`, `every 15 minutes`, `every hour at :05`, `every 6 hours`,
 * `monthly on day 1 at 08:00` — or null for anything less usual (the cron string says it then).
 */
export function cronWords(cron: string): string | null {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5) {
    return null;
  }
  const [minute, hour, day, month, weekday] = fields;
  if (month !== '*') {
    return null;
  }
  const m = number(minute, 59);
  const h = number(hour, 23);
  const everyDay = day === '*' && weekday === '*';
  if (everyDay) {
    if (minute === '*' && hour === '*') {
      return 'every minute';
    }
    const stepMinutes = step(minute, 59);
    if (stepMinutes !== null && hour === '*') {
      return stepMinutes === 1 ? 'every minute' : `every ${stepMinutes} minutes`;
    }
    if (m !== null && hour === '*') {
      return m === 0 ? 'every hour' : `every hour at :${pad(m)}`;
    }
    const stepHours = step(hour, 23);
    if (m !== null && stepHours !== null) {
      const at = m === 0 ? '' : ` at :${pad(m)}`;
      return stepHours === 1 ? `every hour${at}` : `every ${stepHours} hours${at}`;
    }
  }
  if (m === null || h === null) {
    return null;
  }
  const at = `at ${pad(h)}:${pad(m)}`;
  if (everyDay) {
    return `daily ${at}`;
  }
  if (weekday === '*') {
    const d = number(day, 31);
    return d !== null && d >= 1 ? `monthly on day ${d} ${at}` : null;
  }
  if (day !== '*') {
    return null;
  }
  const days = weekdays(weekday);
  return days === null ? null : `${days} ${at}`;
}

/** `every Monday`, `weekdays`, `weekends`, `every Monday and Thursday`; null when unusual. */
function weekdays(field: string): string | null {
  if (field === '1-5') {
    return 'weekdays';
  }
  const numbers = field.split(',').map(each => number(each, 7));
  if (numbers.some(each => each === null)) {
    return null;
  }
  const days = [...new Set(numbers.map(each => (each as number) % 7))].sort((a, b) => a - b);
  if (days.length === 2 && days[0] === 0 && days[1] === 6) {
    return 'weekends';
  }
  const names = days.map(each => WEEKDAYS[each]);
  return names.length === 1
    ? `every ${names[0]}`
    : `every ${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

function number(field: string, max: number): number | null {
  if (!/^\d{1,2}$/.test(field)) {
    return null;
  }
  const value = Number(field);
  return value <= max ? value : null;
}

/** N of `*\/N` (an every-N step from the field's start); null otherwise. */
function step(field: string, max: number): number | null {
  const found = /^\*\/(\d{1,2})$/.exec(field);
  if (!found) {
    return null;
  }
  const value = Number(found[1]);
  return value >= 1 && value <= max ? value : null;
}

/**
 * What a recorded job asked for (an experiment's `resources`), in words:
 * `5 min · 100 MiB · 1 × a100 · 2 nodes`; '' when it asked for nothing Betty read.
 */
export function resourceWords(resources: Record<string, unknown>): string {
  const parts = [
    formatMinutes(resources.time_minutes),
    formatBytes(resources.memory_bytes),
    typeof resources.gpus === 'string' ? resources.gpus : '',
    count(resources.nodes, 'node'),
    count(resources.ntasks, 'task'),
    count(resources.cpus_per_task, 'CPU', ' per task')
  ];
  return parts.filter(Boolean).join(' · ');
}

/** A moment as written in the ledger (`2026-11-22T10:03:00`) to the minute: `2026-11-22 10:03`. */
export function formatStamp(stamp: string): string {
  const found = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)/.exec(stamp);
  return found ? `${found[1]} ${found[2]}` : stamp;
}

function count(value: unknown, noun: string, after = ''): string {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
  return Number.isInteger(n) && n > 0 ? `${n} ${noun}${n === 1 ? '' : 's'}${after}` : '';
}

/** One part of a GPU memory estimate: `activations`, `51.0 GiB`. */
export interface IEstimatePart {
  name: string;
  size: string;
}

/** A GPU memory estimate (the `gpu_estimate` tool's result) as a person reads it. */
export interface IEstimateWords {
  /** `73.1 GiB per GPU at the start of the backward pass`. */
  peak: string;
  /** `Llama-3.1-8B · lora · bf16-mixed · 1 GPU`. */
  about: string;
  /** Its parts, largest first, those under 0.05 GiB left out. */
  parts: IEstimatePart[];
  notes: string[];
}

/**
 * A GPU memory estimate as its breakdown; null when `value` has no numeric `peak_gib` (then it
 * is not an estimate). The estimate may come from the model: only its known fields are read,
 * every text is returned as text, for the caller to render through `visibleText`.
 */
export function estimateWords(value: unknown): IEstimateWords | null {
  if (!isRecord(value) || !isNumber(value.peak_gib)) {
    return null;
  }
  const moment = typeof value.peak_moment === 'string' ? ` at the ${value.peak_moment}` : '';
  const gpus = isNumber(value.gpus) ? `${value.gpus} GPU${value.gpus === 1 ? '' : 's'}` : '';
  const about = [value.model, value.method, value.precision]
    .filter((each): each is string => typeof each === 'string' && each !== '')
    .concat(gpus ? [gpus] : [])
    .join(' · ');
  const breakdown = isRecord(value.breakdown) ? Object.entries(value.breakdown) : [];
  const parts = breakdown
    .filter((entry): entry is [string, number] => isNumber(entry[1]) && entry[1] >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([name, gib]) => ({ name: name.replace(/_/g, ' '), size: `${gib.toFixed(1)} GiB` }));
  const notes = Array.isArray(value.notes)
    ? value.notes.filter((note): note is string => typeof note === 'string')
    : [];
  return { peak: `${value.peak_gib.toFixed(1)} GiB per GPU${moment}`, about, parts, notes };
}

/**
 * A tool's summary split into its headline (the first line, shown on the tool's row) and the
 * rest (a table, say, shown as it is when the row unfolds).
 */
export function summaryParts(summary: string): { headline: string; rest: string } {
  const end = summary.indexOf('\n');
  return end < 0
    ? { headline: summary, rest: '' }
    : { headline: summary.slice(0, end), rest: summary.slice(end + 1).replace(/\s+$/, '') };
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** What a tier means for the person, as every card says it: "tier 2 · always asks". */
export function tierWords(tier: number): string {
  const words = ['never asks', 'asks once per session', 'always asks'][tier];
  return words ? `tier ${tier} · ${words}` : `tier ${tier}`;
}
