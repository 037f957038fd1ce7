/**
 * The panel's model over a fake REST API and a fake socket: sessions, resume, expiry and
 * revival of cards, toasts of jobs that ended, and the person's actions.
 */
import { ServerConnection } from '@jupyterlab/services';

import { BettyAPI } from '../src/api';
import { IJobUpdateInfo } from '../src/events';
import { IApprovalItem, IMessageItem } from '../src/transcript';
import { BettyModel, keptChats } from '../src/model';
import { BettyRequestError } from '../src/request';
import { ISession, ISessionRequest, SocketMessage } from '../src/models';
import { IChatSocketOptions, SocketStatus } from '../src/socket';

/** Stands in for ChatSocket: the test plays the server. */
class FakeChat {
  sent: SocketMessage[] = [];
  status: SocketStatus = 'closed';
  disposed = false;
  opened = 0;

  constructor(readonly options: IChatSocketOptions) {}

  open(): void {
    this.opened += 1;
    this.setStatus('connecting');
  }

  send(message: SocketMessage): boolean {
    if (this.status !== 'open') {
      return false;
    }
    this.sent.push(message);
    return true;
  }

  dispose(): void {
    this.disposed = true;
  }

  setStatus(status: SocketStatus): void {
    this.status = status;
    this.options.onStatus?.(status);
  }

  frame(type: string, seq: number, payload: unknown, session = 's1'): void {
    this.options.onFrame({ type, session_id: session, seq, ts: seq, payload });
  }
}

function session(overrides: Partial<ISession> = {}): ISession {
  return {
    session_id: 's1',
    cluster: 'dev',
    mode: 'confirm',
    busy: false,
    last_seq: 0,
    has_model: true,
    model: 'scripted',
    model_setup: null,
    allowed_modes: ['off', 'propose', 'confirm', 'auto'],
    site_policy: null,
    user: null,
    ...overrides
  };
}

function fakeApi() {
  const api = {
    settings: ServerConnection.makeSettings({
      baseUrl: 'http://lab/',
      wsUrl: 'ws://lab/',
      token: '',
      appendToken: false
    }),
    clusters: jest.fn().mockResolvedValue({
      clusters: [
        { name: 'dev', transport: 'ssh', host: 'betty-dev', default: true },
        { name: 'big', transport: 'ssh', host: 'big-login', default: false }
      ]
    }),
    openSession: jest.fn((request: ISessionRequest) =>
      Promise.resolve(
        session({
          session_id: request.session_id ?? `s-${request.cluster}`,
          cluster: request.cluster ?? 'dev',
          mode: request.mode ?? 'confirm'
        })
      )
    ),
    setMode: jest.fn((id: string, mode: string) =>
      Promise.resolve(session({ session_id: id, mode } as never))
    ),
    ask: jest.fn().mockResolvedValue({ after: 0 }),
    stop: jest.fn().mockResolvedValue({ stopped: true }),
    approvals: jest.fn().mockResolvedValue({ approvals: [] }),
    decide: jest.fn().mockResolvedValue({}),
    cancelJob: jest.fn((jobId: string, sessionId: string) =>
      Promise.resolve({ call_id: 'c-cancel', session_id: sessionId })
    ),
    myJobs: jest.fn(),
    experiments: jest.fn()
  };
  return api;
}

async function started(saved: { session_id: string; cluster: string } | null = null) {
  const api = fakeApi();
  const sockets: FakeChat[] = [];
  const model = new BettyModel({
    api: api as unknown as BettyAPI,
    settings: { defaultMode: 'propose' },
    socket: options => {
      const chat = new FakeChat(options);
      sockets.push(chat);
      return chat as never;
    }
  });
  await model.start(saved);
  const chat = () => sockets[sockets.length - 1];
  return { api, model, sockets, chat };
}

const REQUEST = {
  approval_id: 'a1',
  call_id: 'c1',
  tool: 'cluster_cancel',
  tier: 2,
  args: { job_id: '42' },
  preview: { kind: 'command', title: 'Cancel 42', text: 'scancel 42', details: {} },
  reason: 'tier 2 always asks',
  task: null,
  digest: `sha256:${'f'.repeat(64)}`
};

describe('BettyModel', () => {
  it('starts a session on the default cluster in the default mode and connects', async () => {
    const { api, model, chat } = await started();
    expect(api.openSession).toHaveBeenCalledWith({ cluster: 'dev', mode: 'propose' });
    expect(model.cluster).toBe('dev');
    expect(model.session?.session_id).toBe('s-dev');
    expect(chat().opened).toBe(1);
    expect(chat().options.url(0)).toBe('ws://lab/betty/api/sessions/s-dev/ws?after=0');
  });

  it('starts in the mode the server picks, saying why, when the site refuses the mode of the panel', async () => {
    const api = fakeApi();
    const refusal =
      'your site does not allow auto mode; it allows off, propose, confirm (modes in /etc/betty/policy.json)';
    api.openSession.mockRejectedValueOnce(new BettyRequestError(refusal, 403));
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: o => new FakeChat(o) as never,
      settings: { defaultMode: 'auto' }
    });
    await model.start();
    expect(api.openSession.mock.calls.map(call => call[0])).toEqual([
      { cluster: 'dev', mode: 'auto' },
      { cluster: 'dev' }
    ]);
    expect(model.session?.session_id).toBe('s-dev');
    expect(model.error).toBe(`${refusal}. This chat starts in confirm mode.`);
  });

  it('resumes the session kept from the last visit, or starts a new one when it is gone', async () => {
    const resumed = await started({ session_id: 'kept', cluster: 'big' });
    expect(resumed.api.openSession).toHaveBeenCalledWith({ cluster: 'big', session_id: 'kept' });
    expect(resumed.model.session?.session_id).toBe('kept');

    const api = fakeApi();
    api.openSession.mockRejectedValueOnce(new Error('session works on another cluster'));
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: o => new FakeChat(o) as never
    });
    await model.start({ session_id: 'kept', cluster: 'dev' });
    expect(api.openSession).toHaveBeenLastCalledWith({ cluster: 'dev', mode: 'confirm' });
    expect(model.session?.session_id).toBe('s-dev');
  });

  it('says so when the server extension does not answer', async () => {
    const api = fakeApi();
    api.clusters.mockRejectedValue(new Error('404 Not Found'));
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: o => new FakeChat(o) as never
    });
    await model.start();
    expect(model.error).toMatch(/did not answer: 404 Not Found/);
    await expect(model.ask('hi')).rejects.toThrow(/did not answer/);
  });

  it('builds the transcript from the socket and resumes after the last seq', async () => {
    const { model, chat } = await started();
    chat().setStatus('open');
    chat().frame('message', 1, { role: 'user', text: 'hi', model: null }, 's-dev');
    chat().frame('message_delta', 2, { text: 'Hel' }, 's-dev');
    chat().frame('message_delta', 3, { text: 'lo' }, 's-dev');
    expect((model.transcript.items[1] as IMessageItem).text).toBe('Hello');
    expect(chat().options.lastSeq()).toBe(3);
  });

  it('expires pending cards when the socket drops and revives those still open after reconnecting', async () => {
    const { api, model, chat } = await started();
    chat().setStatus('open');
    chat().frame('approval_request', 1, REQUEST, 's-dev');
    chat().frame('approval_request', 2, { ...REQUEST, approval_id: 'a2', call_id: 'c2' }, 's-dev');
    chat().setStatus('reconnecting');
    const statuses = () => (model.transcript.items as IApprovalItem[]).map(c => c.status);
    expect(statuses()).toEqual(['expired', 'expired']);

    api.approvals.mockResolvedValue({ approvals: [{ ...REQUEST, approval_id: 'a2' }] });
    await chat().options.beforeReconnect!();
    expect(api.openSession).toHaveBeenLastCalledWith({ session_id: 's-dev', cluster: 'dev' });
    chat().setStatus('open');
    await Promise.resolve();
    await Promise.resolve();
    expect(api.approvals).toHaveBeenCalledWith('s-dev');
    expect(statuses()).toEqual(['expired', 'pending']);
  });

  it('resumes from the server when its stream restarted below what the panel saw', async () => {
    const { api, model, chat } = await started();
    chat().frame('message', 1, { role: 'user', text: 'one', model: null }, 's-dev');
    chat().frame('message', 2, { role: 'user', text: 'two', model: null }, 's-dev');
    api.openSession.mockResolvedValueOnce(session({ session_id: 's-dev', last_seq: 0 }));
    await chat().options.beforeReconnect!();
    expect(chat().options.lastSeq()).toBe(0);
    expect(model.transcript.items).toHaveLength(2);
  });

  it('toasts a job that ended, not one replayed from before the panel opened', async () => {
    const api = fakeApi();
    api.openSession.mockResolvedValue(session({ session_id: 's1', last_seq: 2 }));
    let chat: FakeChat | null = null;
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: options => (chat = new FakeChat(options)) as never
    });
    const ended: IJobUpdateInfo[] = [];
    model.jobEnded.connect((_, job) => ended.push(job));
    await model.start();
    const update = (job_id: string, state: string) => ({
      job_id,
      cluster: 'dev',
      state,
      previous: 'RUNNING',
      page: null,
      notebook: null
    });
    chat!.frame('job_update', 1, update('10', 'COMPLETED'));
    chat!.frame('job_update', 3, update('11', 'RUNNING'));
    chat!.frame('job_update', 4, update('12', 'FAILED'));
    chat!.frame('job_update', 4, update('12', 'FAILED')); // replayed
    expect(ended.map(job => job.job_id)).toEqual(['12']);
  });

  it('reads out a job that ended, with how long it ran, only when the setting is on', async () => {
    const api = fakeApi();
    api.openSession.mockResolvedValue(session({ session_id: 's1', last_seq: 0 }));
    let chat: FakeChat | null = null;
    const spoken: string[] = [];
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: options => (chat = new FakeChat(options)) as never,
      readOut: {
        speech: { speak: utterance => spoken.push(utterance.text), cancel: () => undefined },
        utterance: text => ({ text }) as SpeechSynthesisUtterance,
        hidden: () => false
      }
    });
    await model.start();
    const update = (job_id: string, state: string) => ({
      job_id,
      cluster: 'dev',
      state,
      previous: 'PENDING',
      page: null,
      notebook: null
    });
    chat!.frame('job_update', 1, update('4312', 'RUNNING'));
    chat!.frame('job_update', 2, update('4313', 'COMPLETED'));
    expect(spoken).toEqual([]); // off by default
    model.updateSettings({ readOut: true });
    chat!.frame('job_update', 7201, update('4312', 'OUT_OF_MEMORY'));
    expect(spoken).toEqual(['job 4312 finished: out of memory after 2 hours']);
  });

  it('asks over the socket when it is open, over REST when it is not', async () => {
    const { api, model, chat } = await started();
    model.setTab('jobs');
    await model.ask('first');
    expect(api.ask).toHaveBeenCalledWith('s-dev', 'first', null);
    expect(model.tab).toBe('chat');
    chat().setStatus('open');
    await model.ask('second');
    expect(chat().sent).toEqual([{ type: 'ask', prompt: 'second' }]);
    expect(api.ask).toHaveBeenCalledTimes(1);
    model.stop();
    expect(chat().sent[1]).toEqual({ type: 'stop' });
  });

  it('answers a card on the socket and resolves once the server confirms it', async () => {
    const { api, model, chat } = await started();
    chat().setStatus('open');
    chat().frame('approval_request', 1, REQUEST, 's-dev');
    let done = false;
    const answer = model.decide('a1', 'edited', { job_id: '43' }).then(() => (done = true));
    expect(chat().sent).toEqual([
      { type: 'approval', approval_id: 'a1', decision: 'edited', args: { job_id: '43' } }
    ]);
    await Promise.resolve();
    expect(done).toBe(false);
    chat().frame(
      'approval_resolved',
      2,
      {
        approval_id: 'a1',
        call_id: 'c1',
        decision: 'edited',
        approver: 'ada (side panel)',
        args: { job_id: '43' }
      },
      's-dev'
    );
    await answer;
    expect(done).toBe(true);
    expect(api.decide).not.toHaveBeenCalled();
  });

  it("a refusal frame rejects the waiting answer with the server's words", async () => {
    const { model, chat } = await started();
    chat().setStatus('open');
    const answer = model.decide('a1', 'approved', undefined, `sha256:${'d'.repeat(64)}`);
    expect(chat().sent[0]).toEqual({
      type: 'approval',
      approval_id: 'a1',
      decision: 'approved',
      digest: `sha256:${'d'.repeat(64)}`
    });
    chat().options.onFrame({ type: 'server_error', message: 'approval a1 was already answered' });
    await expect(answer).rejects.toThrow('approval a1 was already answered');
    expect(model.transcript.items).toHaveLength(0);
  });

  it('a drop rejects a waiting answer; with the socket down, answers go over REST', async () => {
    const { api, model, chat } = await started();
    chat().setStatus('open');
    const answer = model.decide('a1', 'denied');
    chat().setStatus('reconnecting');
    await expect(answer).rejects.toThrow(/connection dropped/);
    await model.decide('a2', 'approved');
    expect(api.decide).toHaveBeenCalledWith('a2', 'approved', undefined, undefined);
  });

  it('cancels a job in the chat session and shows the chat, where its card arrives', async () => {
    const { api, model } = await started();
    model.setTab('jobs');
    await model.cancelJob('42');
    expect(api.cancelJob).toHaveBeenCalledWith('42', 's-dev', 'dev');
    expect(model.tab).toBe('chat');
  });

  it('switching the cluster closes the old socket and starts a new session there', async () => {
    const { api, model, sockets } = await started();
    await model.switchCluster('big');
    expect(sockets[0].disposed).toBe(true);
    expect(api.openSession).toHaveBeenLastCalledWith({ cluster: 'big', mode: 'propose' });
    expect(model.session?.session_id).toBe('s-big');
    expect(model.transcript.sessionId).toBe('s-big');
    // a late frame of the old session does not reach the new transcript
    sockets[0].frame('message', 1, { role: 'user', text: 'old', model: null }, 's-dev');
    expect(model.transcript.items).toHaveLength(0);
  });

  it('keeps each chat: switching the cluster away and back reopens the chat left there, its transcript replayed', async () => {
    const { api, model, sockets } = await started();
    const kept: unknown[] = [];
    model.chatsChanged.connect((_, chats) => kept.push(chats));
    await model.ask('what partitions are there?\nand more');
    await model.switchCluster('big');
    expect(model.session?.session_id).toBe('s-big');
    await model.switchCluster('dev');
    expect(api.openSession).toHaveBeenLastCalledWith({ cluster: 'dev', session_id: 's-dev' });
    expect(model.session?.session_id).toBe('s-dev');
    const socket = sockets[sockets.length - 1];
    expect(socket.options.lastSeq()).toBe(0); // the socket asks for every event of the chat again
    socket.frame('message', 1, { role: 'user', text: 'what partitions are there?', model: null }, 's-dev');
    expect(model.transcript.items).toHaveLength(1);
    expect(model.chats.map(chat => [chat.session_id, chat.cluster, chat.title])).toEqual([
      ['s-big', 'big', ''],
      ['s-dev', 'dev', 'what partitions are there?']
    ]);
    expect(kept[kept.length - 1]).toEqual(model.chats);
  });

  it('reopens an earlier chat of the list, and lists the chats kept from an earlier visit', async () => {
    const api = fakeApi();
    const model = new BettyModel({
      api: api as unknown as BettyAPI,
      socket: options => new FakeChat(options) as never
    });
    const earlier = [
      { session_id: 's-old', cluster: 'dev', title: 'size this model', started: 1 },
      { bad: true }
    ];
    await model.start(null, keptChats(earlier));
    expect(model.chats.map(chat => chat.session_id)).toEqual(['s-dev', 's-old']);
    await model.openChat('s-old');
    expect(api.openSession).toHaveBeenLastCalledWith({ cluster: 'dev', session_id: 's-old' });
    expect(model.session?.session_id).toBe('s-old');
    expect(model.transcript.sessionId).toBe('s-old');
  });

  it('switches the mode through the API, and keeps the mode when that fails', async () => {
    const { api, model } = await started();
    await model.setMode('auto');
    expect(api.setMode).toHaveBeenCalledWith('s-dev', 'auto');
    expect(model.session?.mode).toBe('auto');
    api.setMode.mockRejectedValueOnce(new Error('unknown mode'));
    await model.setMode('off');
    expect(model.session?.mode).toBe('auto');
    expect(model.error).toMatch(/stays auto: unknown mode/);
  });

  it('shows an error frame of the server as a note', async () => {
    const { model, chat } = await started();
    chat().options.onFrame({ type: 'server_error', message: 'unknown message type' });
    expect(model.transcript.items[0]).toMatchObject({ kind: 'note', text: 'unknown message type' });
  });

  it("an error event is the agent's, never taken for a server error frame", async () => {
    const { model, chat } = await started();
    chat().options.onFrame({ type: 'error', message: 'looks like a refusal' });
    expect(model.transcript.items).toEqual([]);
    chat().frame('error', 1, { message: 'the model timed out', code: 'model_timeout', retryable: true }, 's-dev');
    expect(model.transcript.items[0]).toMatchObject({ kind: 'note', text: 'the model timed out' });
  });
});
