/**
 * The action log as a timeline (`GET timeline`, `POST timeline/replay`, `GET timeline/bundle`;
 * `docs/server-api.md`): its shapes, its calls, and the arithmetic of the time axis and the
 * scrubber, kept apart from the view so they can be tested alone.
 */
import { ServerConnection } from '@jupyterlab/services';

import { IPreview } from './events';
import { requestAPI, requestBlob } from './request';

/** One call of the action log, with the lane it belongs to. */
export interface ITimelineCall {
  ts: number;
  session_id: string;
  call_id: string;
  tool: string;
  tier: number;
  task: string | null;
  args: Record<string, unknown>;
  preview: IPreview | null;
  decision: string;
  approver: string | null;
  ok: boolean | null;
  summary: string;
  duration_ms: number;
  lane: string;
}

/** One row of the timeline: a session's own calls, a delegated helper's, or an automation run's. */
export interface ITimelineLane {
  id: string;
  kind: 'session' | 'helper' | 'automation';
  session_id: string;
  title: string;
  /** The call that started it (a helper's `delegate_tasks` call), when known. */
  started_by: string | null;
  /** What fired an automation run. */
  trigger: string;
}

/** The answer of `GET timeline`. */
export interface ITimeline {
  calls: ITimelineCall[];
  lanes: ITimelineLane[];
  sessions: string[];
  tools: string[];
  decisions: string[];
  skipped: number;
}

/** How a replayed call's preview compares with the recorded one. */
export type ReplayStatus = 'same' | 'changed' | 'not recorded' | 'gone' | 'failed';

/** A replay status as the person reads it: `gone` is what Betty cannot preview now (a job Slurm forgot). */
export const REPLAY_WORDS: Record<ReplayStatus, string> = {
  same: 'same',
  changed: 'changed',
  'not recorded': 'not recorded',
  gone: 'no longer there to preview (a job Slurm forgot, say)',
  failed: 'failed'
};

/** One call of a replay: its preview made again (nothing ran). */
export interface IReplayLine {
  call_id: string;
  session_id: string;
  ts: number;
  tool: string;
  status: ReplayStatus;
  diff: string;
  recorded: IPreview | null;
  current: IPreview | null;
}

/** Which calls are shown: of one session, one tool, one decision ('' for any). */
export interface ITimelineFilters {
  session: string;
  tool: string;
  decision: string;
}

/** No filter: every call. */
export const NO_FILTERS: ITimelineFilters = {
  session: '',
  tool: '',
  decision: ''
};

/** The timeline routes, on the page's own Jupyter server by default. */
export class TimelineAPI {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** The calls that pass `filters`, with their lanes and the filters' choices. */
  timeline(filters: ITimelineFilters): Promise<ITimeline> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(filters)) {
      if (value) {
        query.set(name, value);
      }
    }
    const text = query.toString();
    return requestAPI<ITimeline>(
      `timeline${text ? `?${text}` : ''}`,
      { method: 'GET' },
      this.settings
    );
  }

  /** Each call that passes `filters` previewed again; nothing runs. */
  replay(filters: ITimelineFilters): Promise<{ replay: IReplayLine[] }> {
    const body = Object.fromEntries(Object.entries(filters).filter(([, value]) => value));
    return requestAPI(
      'timeline/replay',
      { method: 'POST', body: JSON.stringify(body) },
      this.settings
    );
  }

  /** The bug bundle of one session (a zip, every secret removed by the server). */
  bundle(session: string): Promise<Blob> {
    return requestBlob(`timeline/bundle?session=${encodeURIComponent(session)}`, this.settings);
  }
}

/**
 * The axis of the scrubber in whole milliseconds: from the first call to the last (one second
 * apart at least, so a lone call sits at the start). Whole numbers, so a browser's range
 * input keeps every value exactly.
 */
export function timeRange(calls: readonly ITimelineCall[]): [number, number] {
  if (calls.length === 0) {
    return [0, 1000];
  }
  const first = Math.min(...calls.map(callMs));
  const last = Math.max(...calls.map(callMs));
  return [first, Math.max(last, first + 1000)];
}

/** A call's time in whole milliseconds. */
export function callMs(call: ITimelineCall): number {
  return Math.floor(call.ts * 1000);
}

/** Where `ms` sits on the axis from `start` to `end` (milliseconds), in percent (0–100). */
export function axisPercent(ms: number, start: number, end: number): number {
  const share = (ms - start) / (end - start);
  return Math.min(100, Math.max(0, share * 100));
}

/** The calls made by `atMs` (the scrubber's position, in milliseconds): the state of the log then. */
export function callsSoFar(calls: readonly ITimelineCall[], atMs: number): ITimelineCall[] {
  return calls.filter(call => callMs(call) <= atMs);
}

/** How many replayed calls came out each way, in a fixed order, none left out. */
export function replayCounts(lines: readonly IReplayLine[]): [ReplayStatus, number][] {
  const order: ReplayStatus[] = ['same', 'changed', 'not recorded', 'gone', 'failed'];
  return order
    .map(
      status =>
        [status, lines.filter(line => line.status === status).length] as [ReplayStatus, number]
    )
    .filter(([, count]) => count > 0);
}

/** A call's result in words: ran and worked, ran and failed, or did not run. */
export function resultWords(call: ITimelineCall): string {
  return call.ok === null ? 'did not run' : call.ok ? 'ok' : 'failed';
}

/** How many calls PageUp and PageDown move the scrubber by. */
export const PAGE_OF_CALLS = 10;

/**
 * Where a key moves the scrubber from `atMs`: the arrows to the next or previous call, PageUp
 * and PageDown by {@link PAGE_OF_CALLS} calls, Home and End to the first and last; null for
 * any other key (the range input's own 1 ms steps would show nothing change).
 */
export function scrubberStep(
  calls: readonly ITimelineCall[],
  atMs: number,
  key: string
): number | null {
  const times = Array.from(new Set(calls.map(callMs))).sort((a, b) => a - b);
  if (times.length === 0) {
    return null;
  }
  const [start, end] = timeRange(calls);
  const after = times.findIndex(ms => ms > atMs);
  const next = after < 0 ? times.length : after; // the first call later than atMs
  const before = times.filter(ms => ms < atMs).length - 1; // the last call earlier than atMs
  const at = (index: number, fallback: number) =>
    index < 0 ? start : index >= times.length ? fallback : times[index];
  switch (key) {
    case 'ArrowRight':
    case 'ArrowUp':
      return at(next, end);
    case 'ArrowLeft':
    case 'ArrowDown':
      return at(before, start);
    case 'PageUp':
      return at(next + PAGE_OF_CALLS - 1, end);
    case 'PageDown':
      return at(before - PAGE_OF_CALLS + 1, start);
    case 'Home':
      return start;
    case 'End':
      return end;
    default:
      return null;
  }
}

/**
 * A session's name a person recognises: whom it worked for (an MCP client, a task) or "chat",
 * and the time of its first call; its id stays in the tooltip. `calls` are any calls seen.
 */
export function sessionName(
  sessionId: string,
  calls: readonly ITimelineCall[],
  clockOf: (seconds: number) => string
): string {
  const first = calls.find(call => call.session_id === sessionId);
  if (first === undefined) {
    return `session ${sessionId.slice(0, 8)}`;
  }
  const whose = sessionId.startsWith('automation-')
    ? 'automation run'
    : first.task
      ? `for ${first.task}`
      : 'chat';
  return `${whose} from ${clockOf(first.ts)}`;
}
