/**
 * The chat transcript: a pure reducer turns the stream of events of one session into the
 * rows the chat shows (messages, tool rows joined with their results, approval cards,
 * notes).
 *
 * The reducer never throws: a frame of an unknown type, a malformed payload or an event
 * of another session leaves the transcript as it was, so a newer server cannot break an
 * older panel.
 */
import {
  APPROVING,
  EventType,
  IApprovalRequest,
  IApprovalResolved,
  IBudget,
  IEventOf,
  IJobUpdateInfo,
  isObject,
  ISecondApproval,
  IToolResultInfo,
  parseEvent,
  Tier
} from './events';
import type { ISentContext } from './contract/events';
import { hasDrawer, Plans, withPlan, withStepUpdate } from './plans';

/** A user's or the assistant's message in the transcript. */
export interface IMessageItem {
  kind: 'message';
  key: string;
  role: 'assistant' | 'user';
  text: string;
  /** True while deltas still arrive. */
  streaming: boolean;
  /** The model that wrote an assistant message (the session's, or its planner's), once known. */
  model: string | null;
  /** Where the person worked, as the chip they sent with a message of theirs showed it. */
  context?: ISentContext | null;
}

/** A tool call, joined with its result by `call_id`. */
export interface IToolItem {
  kind: 'tool';
  key: string;
  callId: string;
  tool: string;
  args: Record<string, unknown>;
  tier: Tier | null;
  result: IToolResultInfo | null;
  /** Why the call never ran (`denied`, `timed_out`, `cancelled`, `stopped`), when it did not. */
  notRun: string | null;
}

/** Where an approval card stands. */
export type ApprovalStatus = 'pending' | 'decided' | 'expired';

/** An approval card. */
export interface IApprovalItem {
  kind: 'approval';
  key: string;
  request: IApprovalRequest;
  status: ApprovalStatus;
  resolution: IApprovalResolved | null;
  /**
   * A job above the site's limits that the person approved: whom it waits for since when, then
   * how its second approver answered.
   */
  second?: ISecondApproval;
}

/** The card of an approval that waits for an answer. */
export function pendingApproval(request: IApprovalRequest): IApprovalItem {
  return {
    kind: 'approval',
    key: request.approval_id,
    request,
    status: 'pending',
    resolution: null
  };
}

/** A short line in the transcript: a plan, an error, a change of course, an ended turn, a job. */
export interface INoteItem {
  kind: 'note';
  key: string;
  tone: 'info' | 'error' | 'plan' | 'job';
  text: string;
  /** The steps of a plan. */
  steps?: string[];
  /** The job update this note reports. */
  job?: IJobUpdateInfo;
  /** The plan this note is (`transcript.plans`), shown as its drawer. */
  planId?: string;
}

/** One row of the chat transcript. */
export type TranscriptItem = IMessageItem | IToolItem | IApprovalItem | INoteItem;

/** The chat transcript of one session, built by {@link reduce}. */
export interface ITranscript {
  sessionId: string | null;
  /** The highest `seq` applied; a reconnecting socket resumes after it. */
  lastSeq: number;
  items: TranscriptItem[];
  /** Whether the agent is answering (between a prompt and `done`). */
  busy: boolean;
  budget: IBudget | null;
  /** Key of the assistant message deltas go to, if one is streaming. */
  streamingKey: string | null;
  /** Resolutions that arrived before their request (kept until it arrives). */
  earlyResolutions: Record<string, IApprovalResolved>;
  /** Counter for local notes' keys. */
  localCount: number;
  /** The session's plans, each with its steps' progress, by `plan_id`. */
  plans: Plans;
}

/** An empty transcript for `sessionId`. */
export function emptyTranscript(sessionId: string | null = null): ITranscript {
  return {
    sessionId,
    lastSeq: 0,
    items: [],
    busy: false,
    budget: null,
    streamingKey: null,
    earlyResolutions: {},
    localCount: 0,
    plans: {}
  };
}

/**
 * Apply one frame from the socket to the transcript and return the new transcript.
 *
 * Pure: `state` is never changed. Events already applied (`seq` at or below `lastSeq`,
 * as after a reconnect replay), events of another session, unknown types and malformed
 * payloads return `state` itself. A valid event of a type this panel shows nothing for
 * still moves `lastSeq` on.
 */
export function reduce(state: ITranscript, frame: unknown): ITranscript {
  if (!isObject(frame) || !Number.isInteger(frame.seq)) {
    return state;
  }
  const seq = frame.seq as number;
  if (seq <= state.lastSeq) {
    return state;
  }
  if (state.sessionId !== null && frame.session_id !== state.sessionId) {
    return state;
  }
  const event = parseEvent(frame);
  if (event === null) {
    return state;
  }
  const next: ITranscript = { ...state, lastSeq: seq, sessionId: event.session_id };
  return HANDLERS[event.type](next, event as never);
}

/**
 * The socket dropped: approval cards still pending are shown as expired (the server
 * cancels approvals nobody can see), and the streaming message stops streaming.
 */
export function markDisconnected(state: ITranscript): ITranscript {
  if (!state.items.some(item => item.kind === 'approval' && item.status === 'pending')) {
    return state;
  }
  const items = state.items.map(item =>
    item.kind === 'approval' && item.status === 'pending'
      ? { ...item, status: 'expired' as const }
      : item
  );
  return { ...state, items };
}

/**
 * After a reconnect: cards shown as expired whose approvals the server still holds open
 * (another tab kept the session's socket) become pending again.
 */
export function reviveApprovals(state: ITranscript, openIds: readonly string[]): ITranscript {
  const open = new Set(openIds);
  if (!state.items.some(item => isExpiredIn(item, open))) {
    return state;
  }
  const items = state.items.map(item =>
    isExpiredIn(item, open) ? { ...(item as IApprovalItem), status: 'pending' as const } : item
  );
  return { ...state, items };
}

/**
 * The server's stream restarted below what this panel saw (the Jupyter server was
 * restarted and the session resumed): keep the transcript, resume after `serverSeq`.
 * The turn that was under way is gone: its calls without a result never finished.
 */
export function restartStream(state: ITranscript, serverSeq: number): ITranscript {
  if (serverSeq >= state.lastSeq) {
    return state;
  }
  const interrupted = markNotRun(
    finishStreaming(markDisconnected(state)),
    () => true,
    'interrupted'
  );
  return { ...interrupted, lastSeq: serverSeq, busy: false };
}

/** A local note (not from the event stream), such as an error frame from the server. */
export function addNote(
  state: ITranscript,
  text: string,
  tone: INoteItem['tone'] = 'error'
): ITranscript {
  const key = `local-${state.localCount + 1}`;
  return {
    ...state,
    localCount: state.localCount + 1,
    items: [...state.items, { kind: 'note', key, tone, text }]
  };
}

/** The approval cards that still wait for a person. */
export function pendingApprovals(state: ITranscript): IApprovalItem[] {
  return state.items.filter(
    (item): item is IApprovalItem => item.kind === 'approval' && item.status === 'pending'
  );
}

// ----- handlers, one per event type ---------------------------------------------------------

type Handler<T extends EventType> = (state: ITranscript, event: IEventOf<T>) => ITranscript;

const HANDLERS: { [T in EventType]: Handler<T> } = {
  message_delta: (state, event) => {
    const key = state.streamingKey;
    const index = key === null ? -1 : indexOf(state, key);
    if (index < 0) {
      const item: IMessageItem = {
        kind: 'message',
        key: `msg-${event.seq}`,
        role: 'assistant',
        text: event.payload.text,
        streaming: true,
        model: null
      };
      return { ...state, busy: true, streamingKey: item.key, items: [...state.items, item] };
    }
    const current = state.items[index] as IMessageItem;
    return replaceAt({ ...state, busy: true }, index, {
      ...current,
      text: current.text + event.payload.text
    });
  },

  message: (state, event) => {
    const { role, text } = event.payload;
    const index = state.streamingKey === null ? -1 : indexOf(state, state.streamingKey);
    if (role === 'assistant' && index >= 0) {
      const current = state.items[index] as IMessageItem;
      return replaceAt({ ...state, streamingKey: null }, index, {
        ...current,
        text,
        streaming: false,
        model: event.payload.model ?? null
      });
    }
    const item: IMessageItem = {
      kind: 'message',
      key: `msg-${event.seq}`,
      role,
      text,
      streaming: false,
      model: event.payload.model ?? null,
      context: event.payload.context ?? null
    };
    const base = finishStreaming(state);
    return { ...base, busy: role === 'user' ? true : base.busy, items: [...base.items, item] };
  },

  plan: (state, event) => {
    const plan = event.payload;
    const drawer = hasDrawer(plan);
    const base = drawer ? { ...state, plans: withPlan(state.plans ?? {}, plan) } : state;
    return appendNote(base, event.seq, {
      tone: 'plan',
      text: 'Plan',
      steps: plan.steps.filter(step => typeof step === 'string'),
      ...(drawer ? { planId: plan.plan_id } : {})
    });
  },

  plan_step: (state, event) => {
    const step = event.payload;
    if (state.plans?.[step.plan_id]) {
      // The plan's drawer shows its progress.
      return { ...state, plans: withStepUpdate(state.plans, step) };
    }
    const summary = step.summary ? `: ${step.summary}` : '';
    return appendNote(state, event.seq, {
      tone: step.status === 'failed' ? 'error' : 'plan',
      text: `Plan step ${step.index} (${step.tool}) ${step.status.replace('_', ' ')}${summary}`
    });
  },

  tool_call: (state, event) => {
    const { call_id, tool, args } = event.payload;
    const tier = [0, 1, 2].includes(event.payload.tier) ? event.payload.tier : null;
    const key = `tool-${call_id}`;
    const index = indexOf(state, key);
    if (index >= 0) {
      // The result came first (or the call was repeated): keep the result, fill the call.
      const current = state.items[index] as IToolItem;
      return replaceAt(state, index, { ...current, tool, args, tier });
    }
    const item: IToolItem = {
      kind: 'tool',
      key,
      callId: call_id,
      tool,
      args,
      tier,
      result: null,
      notRun: null
    };
    // Not busy by itself: a person's own call (a Cancel in the Jobs tab) runs outside any turn.
    const base = finishStreaming(state);
    return { ...base, items: [...base.items, item] };
  },

  tool_result: (state, event) => {
    const result = event.payload;
    const key = `tool-${result.call_id}`;
    const index = indexOf(state, key);
    if (index >= 0) {
      return replaceAt(state, index, { ...(state.items[index] as IToolItem), result });
    }
    const item: IToolItem = {
      kind: 'tool',
      key,
      callId: result.call_id,
      tool: result.tool,
      args: {},
      tier: null,
      result,
      notRun: null
    };
    return { ...state, items: [...state.items, item] };
  },

  approval_request: (state, event) => {
    const request = event.payload;
    const key = `approval-${request.approval_id}`;
    if (indexOf(state, key) >= 0) {
      return state;
    }
    const early = state.earlyResolutions[request.approval_id];
    const item: IApprovalItem = {
      kind: 'approval',
      key,
      request,
      status: early ? 'decided' : 'pending',
      resolution: early ?? null
    };
    const earlyResolutions = { ...state.earlyResolutions };
    delete earlyResolutions[request.approval_id];
    const base = finishStreaming(state);
    return { ...base, earlyResolutions, items: [...base.items, item] };
  },

  approval_resolved: (state, event) => {
    const resolution = event.payload;
    const index = indexOf(state, `approval-${resolution.approval_id}`);
    if (index < 0) {
      return {
        ...state,
        earlyResolutions: { ...state.earlyResolutions, [resolution.approval_id]: resolution }
      };
    }
    const current = state.items[index] as IApprovalItem;
    const decided = replaceAt(state, index, { ...current, status: 'decided', resolution });
    // A call that is not approved emits no result: its row says why it did not run.
    return APPROVING.includes(resolution.decision)
      ? decided
      : markNotRun(decided, row => row.callId === resolution.call_id, resolution.decision);
  },

  second_approval: (state, event) => {
    const index = indexOf(state, `approval-${event.payload.approval_id}`);
    if (index < 0) {
      return state;
    }
    return replaceAt(state, index, {
      ...(state.items[index] as IApprovalItem),
      second: event.payload
    });
  },

  error: (state, event) =>
    appendNote(state, event.seq, { tone: 'error', text: event.payload.message }),

  replanning: (state, event) =>
    appendNote(state, event.seq, {
      tone: 'info',
      text: `Changing course: ${event.payload.reason}`
    }),

  job_update: (state, event) => {
    const job = event.payload;
    return appendNote(state, event.seq, {
      tone: 'job',
      text: `Job ${job.job_id} on ${job.cluster}: ${job.previous} → ${job.state}`,
      job
    });
  },

  budget: (state, event) => ({ ...state, budget: event.payload }),

  done: (state, event) => {
    const reason = event.payload.reason;
    const ended = { ...finishStreaming(state), busy: false };
    const finished = reason === 'finished' ? ended : markNotRun(ended, () => true, reason);
    return reason === 'finished'
      ? finished
      : appendNote(finished, event.seq, { tone: 'info', text: DONE_TEXT[reason] ?? 'Stopped.' });
  }
};

/** Tool rows that `matches` and still wait for a result end as not run, for `why`. */
function markNotRun(
  state: ITranscript,
  matches: (row: IToolItem) => boolean,
  why: string
): ITranscript {
  const waiting = (item: TranscriptItem): item is IToolItem =>
    item.kind === 'tool' && item.result === null && item.notRun === null && matches(item);
  if (!state.items.some(waiting)) {
    return state;
  }
  return {
    ...state,
    items: state.items.map(item => (waiting(item) ? { ...item, notRun: why } : item))
  };
}

const DONE_TEXT: Record<string, string> = {
  denied: 'Stopped: an action was denied.',
  breaker: 'Stopped: the session reached its limit of model turns or tokens.',
  error: 'Stopped by an error.',
  stopped: 'Stopped.'
};

// ----- helpers --------------------------------------------------------------------------------

function isExpiredIn(item: TranscriptItem, open: Set<string>): boolean {
  return (
    item.kind === 'approval' && item.status === 'expired' && open.has(item.request.approval_id)
  );
}

function indexOf(state: ITranscript, key: string): number {
  return state.items.findIndex(item => item.key === key);
}

function replaceAt(state: ITranscript, index: number, item: TranscriptItem): ITranscript {
  const items = state.items.slice();
  items[index] = item;
  return { ...state, items };
}

/** The streaming message (if any) ends: something else comes after it. */
function finishStreaming(state: ITranscript): ITranscript {
  const index = state.streamingKey === null ? -1 : indexOf(state, state.streamingKey);
  if (index < 0) {
    return state.streamingKey === null ? state : { ...state, streamingKey: null };
  }
  const current = state.items[index] as IMessageItem;
  return replaceAt({ ...state, streamingKey: null }, index, { ...current, streaming: false });
}

function appendNote(
  state: ITranscript,
  seq: number,
  note: Omit<INoteItem, 'kind' | 'key'>
): ITranscript {
  const base = finishStreaming(state);
  return { ...base, items: [...base.items, { kind: 'note', key: `note-${seq}`, ...note }] };
}
