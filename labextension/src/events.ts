/**
 * Betty's event protocol, mirroring `betty_jupyter/agent/events.schema.json` one to one,
 * and the check that a frame from the chat socket is one of its events. The transcript
 * the panel builds from them is `transcript.ts`.
 */

/** 0 never asks, 1 asks once per session, 2 always asks. */
export type Tier = 0 | 1 | 2;

/** A piece of the assistant's reply, sent as the model streams it. */
export interface IMessageDelta {
  text: string;
}

/** A whole message: the assistant's reply once complete, or what the person wrote. */
export interface IMessage {
  role: 'assistant' | 'user';
  text: string;
}

/** The steps the agent means to take, in order. */
export interface IPlan {
  steps: string[];
}

/** The agent asked for a tool with these arguments (before any approval). */
export interface IToolCallInfo {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
  tier: Tier;
}

/** The dry run a person approves: exactly what would run or be written. */
export interface IPreview {
  kind: 'command' | 'script' | 'diff' | 'text';
  title: string;
  text: string;
  details?: Record<string, unknown>;
}

/** A person must approve (or edit, or deny) a call; `preview` shows exactly what would happen. */
export interface IApprovalRequest {
  approval_id: string;
  call_id: string;
  tool: string;
  tier: Tier;
  args: Record<string, unknown>;
  preview: IPreview;
  reason: string;
  /** The delegated task or automation the call belongs to, when not the person's own conversation. */
  task?: string | null;
}

/** Every way an approval can end. */
export type Decision =
  'approved' | 'approved_for_session' | 'edited' | 'denied' | 'timed_out' | 'cancelled';

/** How a tool call was decided: a card's ending, or `auto` (no card), `proposed`, `refused`. */
export type CallDecision = Decision | 'auto' | 'proposed' | 'refused';

/** The decisions a person can send from an approval card. */
export type PersonDecision = 'approved' | 'approved_for_session' | 'edited' | 'denied';

/** How an approval ended; `args` holds the edited arguments when `decision` is `edited`. */
export interface IApprovalResolved {
  approval_id: string;
  call_id: string;
  decision: Decision;
  approver: string | null;
  args: Record<string, unknown> | null;
}

/**
 * What a call came to: how it was decided and by whom, a one-line summary; the full output is
 * in the action log at `output_ref`.
 */
export interface IToolResultInfo {
  call_id: string;
  tool: string;
  ok: boolean;
  decision: CallDecision;
  approver: string | null;
  summary: string;
  duration_ms: number;
  output_ref: string | null;
  artifacts: string[];
}

/** Something failed; `message` is one line for a person, `code` a stable name for programs. */
export interface IErrorInfo {
  message: string;
  code: string;
  retryable: boolean;
}

/** The agent changes course (after a denial, a failed tool, new facts). */
export interface IReplanning {
  reason: string;
}

/** A watched Slurm job moved from `previous` to `state`; links to its wiki page and notebook. */
export interface IJobUpdateInfo {
  job_id: string;
  cluster: string;
  state: string;
  previous: string;
  page: string | null;
  notebook: string | null;
}

/** What the session has spent of its circuit breaker's allowance. */
export interface IBudget {
  iterations: number;
  max_iterations: number;
  tokens: number;
  max_tokens: number;
}

/** Why a turn ended. */
export type DoneReason = 'finished' | 'denied' | 'breaker' | 'error' | 'stopped';

/** The turn ended: finished, stopped by a denial, the circuit breaker, an error, or a person. */
export interface IDone {
  reason: DoneReason;
}

/** The payload of each event type. */
export interface IPayloads {
  message_delta: IMessageDelta;
  message: IMessage;
  plan: IPlan;
  tool_call: IToolCallInfo;
  approval_request: IApprovalRequest;
  approval_resolved: IApprovalResolved;
  tool_result: IToolResultInfo;
  error: IErrorInfo;
  replanning: IReplanning;
  job_update: IJobUpdateInfo;
  budget: IBudget;
  done: IDone;
}

/** The twelve event types. */
export type EventType = keyof IPayloads;

/** One event of one type: `{type, session_id, seq, ts, payload}`. */
export interface IEventOf<T extends EventType> {
  type: T;
  session_id: string;
  seq: number;
  ts: number;
  payload: IPayloads[T];
}

/** Any event of Betty's agent, a union tagged by `type`. */
export type BettyEvent = { [T in EventType]: IEventOf<T> }[EventType];

/** Slurm states after which a job does no more work. */
export const FINISHED_STATES = new Set([
  'COMPLETED',
  'CANCELLED',
  'FAILED',
  'TIMEOUT',
  'OUT_OF_MEMORY',
  'NODE_FAIL',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
  'REVOKED',
  'SPECIAL_EXIT'
]);

/** Whether a Slurm state (`CANCELLED by 123` included) means the job ended. */
export function jobEnded(state: string): boolean {
  return FINISHED_STATES.has(state.trim().split(/\s+/)[0]?.replace(/\+$/, '').toUpperCase());
}

/** Decisions after which the call runs. */
export const APPROVING: readonly string[] = ['approved', 'approved_for_session', 'edited'];

/**
 * The event in `frame` when it is one: an object with a known `type`, a session, a
 * positive integer `seq` and an object payload whose fields have the schema's types.
 * Anything else (unknown types, a server's `{type: "error", message}` frame) is null.
 */
export function parseEvent(frame: unknown): BettyEvent | null {
  if (!isObject(frame)) {
    return null;
  }
  const { type, session_id, seq, payload } = frame;
  if (
    typeof type !== 'string' ||
    !(type in PAYLOAD_CHECKS) ||
    typeof session_id !== 'string' ||
    !Number.isInteger(seq) ||
    (seq as number) < 1 ||
    !isObject(payload)
  ) {
    return null;
  }
  const check = PAYLOAD_CHECKS[type as EventType];
  return check(payload) ? (frame as unknown as BettyEvent) : null;
}

// ----- payload checks: the fields the reducer reads, with their types -----------------------

type Check = (payload: Record<string, unknown>) => boolean;

const str = (value: unknown): boolean => typeof value === 'string';
const obj = (value: unknown): boolean => isObject(value);
const strOrNull = (value: unknown): boolean => value === null || value === undefined || str(value);

const PAYLOAD_CHECKS: Record<EventType, Check> = {
  message_delta: p => str(p.text),
  message: p => (p.role === 'assistant' || p.role === 'user') && str(p.text),
  plan: p => Array.isArray(p.steps),
  tool_call: p => str(p.call_id) && str(p.tool) && obj(p.args),
  approval_request: p =>
    str(p.approval_id) &&
    str(p.call_id) &&
    str(p.tool) &&
    obj(p.args) &&
    isObject(p.preview) &&
    str(p.preview.kind) &&
    str(p.preview.text),
  approval_resolved: p => str(p.approval_id) && str(p.decision) && (p.args == null || obj(p.args)),
  tool_result: p =>
    str(p.call_id) && typeof p.ok === 'boolean' && str(p.decision) && strOrNull(p.approver) && str(p.summary),
  error: p => str(p.message),
  replanning: p => str(p.reason),
  job_update: p =>
    str(p.job_id) && str(p.state) && str(p.cluster) && strOrNull(p.page) && strOrNull(p.notebook),
  budget: p => typeof p.iterations === 'number' && typeof p.tokens === 'number',
  done: p => str(p.reason)
};

// ----- helpers --------------------------------------------------------------------------------

/** Whether `value` is a plain JSON object. */
export function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
