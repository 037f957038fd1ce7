/**
 * Betty's event protocol. Its types and its runtime check are generated from
 * `betty_jupyter/schemas/events.v1.json` (`contract/`, `npm run generate`); this module adds
 * what the panel derives from them. The transcript the panel builds from events is
 * `transcript.ts`.
 */
import { BettyEvent } from './contract/events';
import { isBettyEvent } from './contract/checks';

export type {
  BettyEvent,
  IApprovalRequest,
  IApprovalResolved,
  IBudget,
  IDone,
  IErrorInfo,
  IJobUpdateInfo,
  IMessage,
  IMessageDelta,
  IPlan,
  IPreview,
  IReplanning,
  ISecondApproval,
  IToolCallInfo,
  IToolResultInfo
} from './contract/events';
export type { PersonDecision } from './models';

/** The event types (`message_delta`, `tool_call`, …). */
export type EventType = BettyEvent['type'];

/** The event of one type: `{type, session_id, seq, ts, payload}`. */
export type IEventOf<T extends EventType> = Extract<BettyEvent, { type: T }>;

/** The payload of each event type. */
export type IPayloads = { [T in EventType]: IEventOf<T>['payload'] };

/** 0 never asks, 1 asks once per session, 2 always asks. */
export type Tier = IPayloads['tool_call']['tier'];

/** Every way an approval can end. */
export type Decision = IPayloads['approval_resolved']['decision'];

/** Why a turn ended. */
export type DoneReason = IPayloads['done']['reason'];

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
 * The event in `frame` when it is one: what the events schema allows (a known `type`, the
 * envelope, and a payload with every field of its type, of the schema's types). Fields the
 * schema does not know yet are let through, so a newer server's event still shows.
 * Anything else (unknown types, a server's `{type: "server_error", message}` frame) is null.
 */
export function parseEvent(frame: unknown): BettyEvent | null {
  return isBettyEvent(frame) ? frame : null;
}

/** Whether `value` is a plain JSON object. */
export function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
