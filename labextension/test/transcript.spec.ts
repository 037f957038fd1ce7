/**
 * The event reducer: a stream of events becomes the chat transcript.
 */
import { EventType, jobEnded, parseEvent } from '../src/events';
import {
  addNote,
  emptyTranscript,
  IApprovalItem,
  IMessageItem,
  INoteItem,
  IToolItem,
  ITranscript,
  markDisconnected,
  pendingApprovals,
  reduce,
  restartStream,
  reviveApprovals
} from '../src/transcript';

const SESSION = 's-1';

/** An event as the server sends it. */
function ev(type: EventType | string, seq: number, payload: unknown, session = SESSION) {
  return { type, session_id: session, seq, ts: 1714550400 + seq, payload };
}

function run(frames: unknown[], state: ITranscript = emptyTranscript(SESSION)): ITranscript {
  return frames.reduce<ITranscript>((current, frame) => reduce(current, frame), state);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    Object.values(value).forEach(deepFreeze);
  }
  return value;
}

const PREVIEW = { kind: 'command', title: 'Cancel job 42', text: 'scancel 42', details: {} };

function request(approvalId: string, callId: string, tool = 'cluster_cancel') {
  return {
    approval_id: approvalId,
    call_id: callId,
    tool,
    tier: 2,
    args: { job_id: '42' },
    preview: PREVIEW,
    reason: 'tier 2 always asks',
    task: null,
    digest: `sha256:${'e'.repeat(64)}`
  };
}

function resolved(approvalId: string, callId: string, decision = 'approved', args = null) {
  return { approval_id: approvalId, call_id: callId, decision, approver: 'alice', args };
}

function result(callId: string, ok = true, summary = 'done', tool = 'cluster_cancel') {
  return {
    call_id: callId,
    tool,
    ok,
    decision: 'auto',
    approver: null,
    summary,
    duration_ms: 12.5,
    output_ref: null,
    artifacts: []
  };
}

/** A whole turn: prompt, streamed reply, a tool call with approval, its result, the end. */
const TURN = [
  ev('message', 1, { role: 'user', text: 'cancel job 42', model: null }),
  ev('message_delta', 2, { text: 'I will ' }),
  ev('message_delta', 3, { text: 'cancel **42**.' }),
  ev('budget', 4, { iterations: 1, max_iterations: 20, tokens: 300, max_tokens: 100000 }),
  ev('message', 5, { role: 'assistant', text: 'I will cancel **42**.', model: null }),
  ev('tool_call', 6, { call_id: 'c1', tool: 'cluster_cancel', args: { job_id: '42' }, tier: 2 }),
  ev('approval_request', 7, request('a1', 'c1')),
  ev('approval_resolved', 8, resolved('a1', 'c1')),
  ev('tool_result', 9, result('c1', true, 'job 42 cancelled')),
  ev('message_delta', 10, { text: 'Done.' }),
  ev('message', 11, { role: 'assistant', text: 'Done.', model: null }),
  ev('done', 12, { reason: 'finished' })
];

describe('reduce: messages', () => {
  it('appends deltas to the current assistant message while it streams', () => {
    const state = run(TURN.slice(0, 3));
    const messages = state.items as IMessageItem[];
    expect(messages.map(m => [m.role, m.text, m.streaming])).toEqual([
      ['user', 'cancel job 42', false],
      ['assistant', 'I will cancel **42**.', true]
    ]);
    expect(state.busy).toBe(true);
    expect(state.lastSeq).toBe(3);
  });

  it('completes the streamed message with the whole message instead of adding a second one', () => {
    const state = run(TURN.slice(0, 5));
    expect(state.items).toHaveLength(2);
    const reply = state.items[1] as IMessageItem;
    expect(reply).toMatchObject({
      role: 'assistant',
      text: 'I will cancel **42**.',
      streaming: false
    });
    expect(state.streamingKey).toBeNull();
    expect(state.budget).toEqual({
      iterations: 1,
      max_iterations: 20,
      tokens: 300,
      max_tokens: 100000
    });
  });

  it('starts a new assistant message for deltas after a tool row', () => {
    const state = run(TURN);
    const kinds = state.items.map(item => item.kind);
    expect(kinds).toEqual(['message', 'message', 'tool', 'approval', 'message']);
    expect((state.items[4] as IMessageItem).text).toBe('Done.');
    expect(state.busy).toBe(false);
  });

  it('a whole assistant message without deltas is its own item', () => {
    const state = run([
      ev('message', 1, { role: 'user', text: 'hi', model: null }),
      ev('message', 2, { role: 'assistant', text: 'Hello.', model: null })
    ]);
    expect(state.items.map(i => (i as IMessageItem).text)).toEqual(['hi', 'Hello.']);
    expect((state.items[1] as IMessageItem).streaming).toBe(false);
  });

  it('done ends the streaming of a reply that had no whole message', () => {
    const state = run([
      ev('message_delta', 1, { text: 'partial' }),
      ev('done', 2, { reason: 'stopped' })
    ]);
    expect(state.items[0]).toMatchObject({ kind: 'message', text: 'partial', streaming: false });
    expect(state.items[1]).toMatchObject({ kind: 'note', tone: 'info', text: 'Stopped.' });
    expect(state.busy).toBe(false);
  });

  it('keeps which model wrote each assistant message, the planner and the session model apart', () => {
    const state = run([
      ev('message', 1, { role: 'user', text: 'what runs?', model: null }),
      ev('message', 2, { role: 'assistant', text: 'Plan:\n1. cluster_queue', model: 'big-planner' }),
      ev('message_delta', 3, { text: 'One job ' }),
      ev('message', 4, { role: 'assistant', text: 'One job runs.', model: 'small-local' })
    ]);
    expect(state.items.map(item => (item as IMessageItem).model)).toEqual([null, 'big-planner', 'small-local']);
    expect(state.items[2]).toMatchObject({ text: 'One job runs.', streaming: false });
  });

  it('does not change the state it is given', () => {
    const before = deepFreeze(run(TURN.slice(0, 3)));
    const copy = JSON.parse(JSON.stringify(before));
    const after = reduce(before, TURN[3]);
    reduce(after, TURN[4]);
    expect(JSON.parse(JSON.stringify(before))).toEqual(copy);
  });
});

describe('reduce: tool rows', () => {
  it('joins a tool call and its result by call_id into one row', () => {
    const state = run(TURN);
    const tools = state.items.filter((i): i is IToolItem => i.kind === 'tool');
    expect(tools).toHaveLength(1);
    expect(tools[0]).toMatchObject({
      callId: 'c1',
      tool: 'cluster_cancel',
      args: { job_id: '42' },
      tier: 2,
      result: { ok: true, summary: 'job 42 cancelled' }
    });
  });

  it('joins parallel calls whose results arrive in another order', () => {
    const state = run([
      ev('tool_call', 1, { call_id: 'a', tool: 'cluster_queue', args: {}, tier: 1 }),
      ev('tool_call', 2, { call_id: 'b', tool: 'cluster_partitions', args: {}, tier: 1 }),
      ev('tool_result', 3, result('b', false, 'sinfo failed', 'cluster_partitions')),
      ev('tool_result', 4, result('a', true, '3 jobs', 'cluster_queue'))
    ]);
    const tools = state.items as IToolItem[];
    expect(tools.map(t => [t.callId, t.tool, t.result?.ok, t.result?.summary])).toEqual([
      ['a', 'cluster_queue', true, '3 jobs'],
      ['b', 'cluster_partitions', false, 'sinfo failed']
    ]);
  });

  it("a person's own call outside a turn does not make the agent busy", () => {
    const state = run([
      ev('tool_call', 1, { call_id: 'p1', tool: 'cluster_cancel', args: { job_id: '7' }, tier: 2 }),
      ev('approval_request', 2, request('a1', 'p1')),
      ev('approval_resolved', 3, resolved('a1', 'p1')),
      ev('tool_result', 4, result('p1'))
    ]);
    expect(state.busy).toBe(false);
    expect(run(TURN.slice(0, 6)).busy).toBe(true);
  });

  it('a result before its call still makes one row, completed when the call arrives', () => {
    const state = run([
      ev('tool_result', 1, result('c9', true, 'read', 'wiki_read')),
      ev('tool_call', 2, { call_id: 'c9', tool: 'wiki_read', args: { page: 'index.md' }, tier: 0 })
    ]);
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({
      kind: 'tool',
      tool: 'wiki_read',
      args: { page: 'index.md' },
      tier: 0,
      result: { summary: 'read' }
    });
  });
});

describe('reduce: calls that never ran', () => {
  const call = (seq: number, id: string) =>
    ev('tool_call', seq, { call_id: id, tool: 'cluster_cancel', args: { job_id: '42' }, tier: 2 });

  it.each(['denied', 'timed_out', 'cancelled'])('a call %s says so on its row', decision => {
    const state = run([
      call(1, 'c1'),
      call(2, 'c2'),
      ev('approval_request', 3, request('a1', 'c1')),
      ev('approval_resolved', 4, resolved('a1', 'c1', decision))
    ]);
    const rows = state.items.filter((i): i is IToolItem => i.kind === 'tool');
    expect(rows.map(r => [r.callId, r.notRun])).toEqual([
      ['c1', decision],
      ['c2', null]
    ]);
  });

  it('an approved call waits for its result', () => {
    const state = run([
      call(1, 'c1'),
      ev('approval_request', 2, request('a1', 'c1')),
      ev('approval_resolved', 3, resolved('a1', 'c1'))
    ]);
    expect((state.items[0] as IToolItem).notRun).toBeNull();
  });

  it('a stopped turn ends the rows still waiting, and leaves finished ones', () => {
    const state = run([
      call(1, 'c1'),
      call(2, 'c2'),
      ev('tool_result', 3, result('c1')),
      ev('done', 4, { reason: 'stopped' })
    ]);
    const rows = state.items.filter((i): i is IToolItem => i.kind === 'tool');
    expect(rows.map(r => [r.callId, r.result?.ok ?? null, r.notRun])).toEqual([
      ['c1', true, null],
      ['c2', null, 'stopped']
    ]);
    const finished = run([call(1, 'c1'), ev('done', 2, { reason: 'finished' })]);
    expect((finished.items[0] as IToolItem).notRun).toBeNull();
  });
});

describe('reduce: approvals', () => {
  it('an approval request is a pending card; its resolution decides it', () => {
    const pending = run(TURN.slice(0, 7));
    const card = pending.items.find((i): i is IApprovalItem => i.kind === 'approval')!;
    expect(card.status).toBe('pending');
    expect(card.request.preview.text).toBe('scancel 42');
    expect(pendingApprovals(pending)).toHaveLength(1);

    const decided = reduce(pending, TURN[7]);
    const after = decided.items.find((i): i is IApprovalItem => i.kind === 'approval')!;
    expect(after.status).toBe('decided');
    expect(after.resolution).toMatchObject({ decision: 'approved', approver: 'alice' });
    expect(pendingApprovals(decided)).toHaveLength(0);
  });

  it('keeps the edited arguments of an edited approval', () => {
    const state = run([
      ev('approval_request', 1, request('a1', 'c1')),
      ev('approval_resolved', 2, resolved('a1', 'c1', 'edited', { job_id: '43' } as never))
    ]);
    expect((state.items[0] as IApprovalItem).resolution).toMatchObject({
      decision: 'edited',
      args: { job_id: '43' }
    });
  });

  it('a resolution that arrives before its request decides the card when it comes', () => {
    const state = run([
      ev('approval_resolved', 1, resolved('a1', 'c1', 'denied')),
      ev('approval_request', 2, request('a1', 'c1'))
    ]);
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ status: 'decided', resolution: { decision: 'denied' } });
    expect(state.earlyResolutions).toEqual({});
  });

  it('a dropped socket expires pending cards, and decided ones stay decided', () => {
    const state = run([
      ev('approval_request', 1, request('a1', 'c1')),
      ev('approval_request', 2, request('a2', 'c2')),
      ev('approval_resolved', 3, resolved('a2', 'c2'))
    ]);
    const dropped = markDisconnected(state);
    expect((dropped.items as IApprovalItem[]).map(c => c.status)).toEqual(['expired', 'decided']);
    expect(markDisconnected(dropped)).toBe(dropped);
  });

  it('after a reconnect, cards the server still holds open are pending again', () => {
    const dropped = markDisconnected(
      run([
        ev('approval_request', 1, request('a1', 'c1')),
        ev('approval_request', 2, request('a2', 'c2'))
      ])
    );
    const revived = reviveApprovals(dropped, ['a2']);
    expect((revived.items as IApprovalItem[]).map(c => c.status)).toEqual(['expired', 'pending']);
  });

  it('the server cancelling an expired card turns it into a decided record', () => {
    const dropped = markDisconnected(run([ev('approval_request', 1, request('a1', 'c1'))]));
    const state = reduce(
      dropped,
      ev('approval_resolved', 2, { ...resolved('a1', 'c1', 'cancelled'), approver: null })
    );
    expect(state.items[0]).toMatchObject({
      status: 'decided',
      resolution: { decision: 'cancelled' }
    });
  });
});

describe('reduce: reconnect replay and order', () => {
  it('ignores events replayed after a reconnect (repeated seq)', () => {
    const once = run(TURN.slice(0, 8));
    const replayed = run([...TURN.slice(3, 8), ...TURN.slice(0, 8)], once);
    expect(replayed).toBe(once);
    const resumed = run(TURN.slice(5), once);
    expect(resumed).toEqual(run(TURN));
  });

  it('a repeated delta is not appended twice', () => {
    const state = run([TURN[1], TURN[2], TURN[2], TURN[1]]);
    expect((state.items[0] as IMessageItem).text).toBe('I will cancel **42**.');
  });

  it('an older event arriving late is dropped; a gap forward is accepted', () => {
    const state = run([
      ev('message', 5, { role: 'user', text: 'five', model: null }),
      ev('message', 3, { role: 'user', text: 'three', model: null }),
      ev('message', 9, { role: 'user', text: 'nine', model: null })
    ]);
    expect(state.items.map(i => (i as IMessageItem).text)).toEqual(['five', 'nine']);
    expect(state.lastSeq).toBe(9);
  });

  it('a restarted server stream resumes below the last seq seen and keeps the transcript', () => {
    const seen = run(TURN.slice(0, 7));
    const restarted = restartStream(seen, 0);
    expect(restarted.lastSeq).toBe(0);
    expect(restarted.items).toHaveLength(seen.items.length);
    expect((restarted.items.find(i => i.kind === 'approval') as IApprovalItem).status).toBe(
      'expired'
    );
    expect((restarted.items.find(i => i.kind === 'tool') as IToolItem).notRun).toBe('interrupted');
    expect(restarted.busy).toBe(false);
    expect(reduce(restarted, ev('message', 1, { role: 'user', text: 'again', model: null })).items).toHaveLength(
      seen.items.length + 1
    );
    expect(restartStream(seen, 7)).toBe(seen);
  });
});

describe('reduce: odd frames', () => {
  const BAD: [string, unknown][] = [
    ['null', null],
    ['a string', 'message'],
    ['an array', [1, 2]],
    ['no seq', { type: 'message', session_id: SESSION, payload: { role: 'user', text: 'x', model: null } }],
    ['a server error frame', { type: 'server_error', message: 'bad message' }],
    ['an error frame without seq', { type: 'error', message: 'bad message' }],
    ['seq 0', ev('message', 0, { role: 'user', text: 'x', model: null })],
    ['a fractional seq', ev('message', 1.5, { role: 'user', text: 'x', model: null })],
    ['an unknown type', ev('telemetry', 1, { anything: true })],
    ['a missing payload', { type: 'message', session_id: SESSION, seq: 1, ts: 1 }],
    ['a payload of the wrong shape', ev('message', 1, { role: 'robot', text: 'x' })],
    ['a delta without text', ev('message_delta', 1, { content: 'x' })],
    ['a tool call without args', ev('tool_call', 1, { call_id: 'c', tool: 't', tier: 0 })],
    [
      'an approval without preview',
      ev('approval_request', 1, { ...request('a', 'c'), preview: null })
    ],
    [
      'a job update with a numeric id',
      ev('job_update', 1, { job_id: 42, cluster: 'c', state: 'RUNNING' })
    ],
    ['another session', ev('message', 1, { role: 'user', text: 'x', model: null }, 'other')]
  ];

  it.each(BAD)('%s leaves the transcript as it was', (_name, frame) => {
    const state = emptyTranscript(SESSION);
    expect(() => reduce(state, frame)).not.toThrow();
    expect(reduce(state, frame)).toBe(state);
  });

  it('keeps working after odd frames', () => {
    const state = run([
      ev('telemetry', 1, {}),
      null,
      ev('message_delta', 2, { text: 'still ' }),
      { type: 'server_error', message: 'bad message' },
      ev('message_delta', 3, { text: 'here' })
    ]);
    expect((state.items[0] as IMessageItem).text).toBe('still here');
  });

  it('parseEvent gives the typed event or null', () => {
    expect(parseEvent(TURN[0])?.type).toBe('message');
    expect(parseEvent(ev('nope', 1, {}))).toBeNull();
  });

  it('parseEvent checks every field the schema names, and lets through fields it does not know yet', () => {
    expect(parseEvent(ev('tool_result', 1, result('c1')))?.type).toBe('tool_result');
    const { artifacts, ...withoutArtifacts } = result('c1');
    expect(artifacts).toEqual([]);
    expect(parseEvent(ev('tool_result', 1, withoutArtifacts))).toBeNull();
    expect(parseEvent(ev('tool_result', 1, { ...result('c1'), duration_ms: -1 }))).toBeNull();
    const newer = ev('tool_result', 1, { ...result('c1'), decision: 'auto' });
    expect(parseEvent(newer)?.payload).toMatchObject({ call_id: 'c1', decision: 'auto' });
  });

  it('an empty transcript takes the session of its first event', () => {
    const state = reduce(emptyTranscript(), ev('message', 1, { role: 'user', text: 'hi', model: null }, 'new'));
    expect(state.sessionId).toBe('new');
  });
});

describe('reduce: notes', () => {
  it('plans, errors, changes of course and job updates become notes', () => {
    const job = {
      job_id: '42',
      cluster: 'dev',
      state: 'COMPLETED',
      previous: 'RUNNING',
      page: 'wiki/experiments/2024-05-01-train.md',
      notebook: 'notebooks/experiments/2024-05-01-train.ipynb'
    };
    const state = run([
      ev('plan', 1, { steps: ['read the queue', 'cancel'], plan_id: 'p', call_id: 'c', goal: 'g', calls: [] }),
      ev('error', 2, { message: 'the model timed out', code: 'model', retryable: true }),
      ev('replanning', 3, { reason: 'the job had ended' }),
      ev('job_update', 4, job),
      ev('done', 5, { reason: 'breaker' }),
      ev('plan_step', 6, {
        plan_id: 'p',
        index: 2,
        tool: 'cluster_cancel',
        status: 'not_run',
        call_id: null,
        args: null,
        summary: '<b>step 1 failed</b>'
      })
    ]);
    const notes = state.items as INoteItem[];
    expect(notes.map(n => n.tone)).toEqual(['plan', 'error', 'info', 'job', 'info', 'plan']);
    expect(notes[5].text).toBe('Plan step 2 (cluster_cancel) not run: <b>step 1 failed</b>');
    expect(notes[0].steps).toEqual(['read the queue', 'cancel']);
    expect(notes[1].text).toBe('the model timed out');
    expect(notes[2].text).toContain('the job had ended');
    expect(notes[3].job).toEqual(job);
    expect(notes[3].text).toBe('Job 42 on dev: RUNNING → COMPLETED');
    expect(notes[4].text).toMatch(/limit/);
  });

  it('a local note has its own key and does not move lastSeq', () => {
    const state = addNote(addNote(run(TURN.slice(0, 2)), 'one'), 'two');
    const keys = state.items.map(i => i.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(state.lastSeq).toBe(2);
  });

  it.each([
    ['COMPLETED', true],
    ['CANCELLED by 1000', true],
    ['OUT_OF_MEMORY', true],
    ['FAILED', true],
    ['RUNNING', false],
    ['PENDING', false],
    ['COMPLETING', false]
  ])('jobEnded(%s) is %s', (state, ended) => {
    expect(jobEnded(state)).toBe(ended);
  });
});

describe('transcript: a second approver', () => {
  it('puts where an approved card stands with its second approver on that card, and ignores one of no card', () => {
    let state = emptyTranscript('s1');
    const frame = (seq: number, type: string, payload: Record<string, unknown>) => ({
      type,
      session_id: 's1',
      seq,
      ts: 1,
      payload
    });
    state = reduce(
      state,
      frame(1, 'approval_request', {
        approval_id: 'a1',
        call_id: 'c1',
        tool: 'cluster_submit',
        tier: 2,
        args: {},
        preview: { kind: 'script', title: 't', text: '#!/bin/bash\n', details: {} },
        reason: 'r',
        task: null,
        digest: ''
      })
    );
    const second = {
      approval_id: 'a1',
      call_id: 'c1',
      state: 'waiting',
      approvers: ['hpcadmin'],
      since: 5,
      approver: null,
      why: ''
    };
    state = reduce(state, frame(2, 'second_approval', second));
    const card = state.items.find(item => item.kind === 'approval') as IApprovalItem;
    expect(card.second).toEqual(second);
    const elsewhere = reduce(state, frame(3, 'second_approval', { ...second, approval_id: 'zz' }));
    expect(elsewhere.items).toBe(state.items);
    expect(elsewhere.lastSeq).toBe(3);
  });
});
