/**
 * The chat socket: URLs, resume after the last seq, backoff, and disposal.
 */
import { ServerConnection } from '@jupyterlab/services';

import { backoffDelay, chatSocketUrl, ChatSocket, IChatSocketOptions } from '../src/socket';

/** A WebSocket the test drives: `open()`, `receive()`, `drop()`. */
class FakeSocket {
  static made: FakeSocket[] = [];
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  onmessage: ((message: { data: string }) => void) | null = null;
  onerror: (() => void) | null = null;
  sent: unknown[] = [];
  closed = false;

  constructor(readonly url: string) {
    FakeSocket.made.push(this);
  }

  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }

  close(): void {
    this.closed = true;
    this.onclose?.();
  }

  open(): void {
    this.onopen?.();
  }

  receive(data: unknown): void {
    this.onmessage?.({ data: typeof data === 'string' ? data : JSON.stringify(data) });
  }

  drop(): void {
    this.onclose?.();
  }
}

function last(): FakeSocket {
  return FakeSocket.made[FakeSocket.made.length - 1];
}

function socket(options: Partial<IChatSocketOptions> = {}) {
  let seq = 0;
  const frames: unknown[] = [];
  const statuses: string[] = [];
  const chat = new ChatSocket({
    url: after => `ws://lab/betty/api/sessions/s1/ws?after=${after}`,
    lastSeq: () => seq,
    onFrame: frame => frames.push(frame),
    onStatus: status => statuses.push(status),
    WebSocket: FakeSocket as unknown as typeof WebSocket,
    initialDelayMs: 100,
    maxDelayMs: 1000,
    ...options
  });
  return { chat, frames, statuses, setSeq: (value: number) => (seq = value) };
}

beforeEach(() => {
  FakeSocket.made = [];
  jest.useFakeTimers();
  jest.spyOn(Math, 'random').mockReturnValue(0); // no jitter
});

afterEach(() => {
  jest.useRealTimers();
  jest.restoreAllMocks();
});

describe('chatSocketUrl', () => {
  const settings = (overrides: Partial<ServerConnection.ISettings>) =>
    ServerConnection.makeSettings({
      baseUrl: 'http://lab.example/user/ada/',
      wsUrl: 'ws://lab.example/user/ada/',
      token: 'secret token',
      appendToken: true,
      ...overrides
    });

  it('builds the session socket under the server URL, with after and the token', () => {
    expect(chatSocketUrl(settings({}), 'abc/1', 7)).toBe(
      'ws://lab.example/user/ada/betty/api/sessions/abc%2F1/ws?after=7&token=secret%20token'
    );
  });

  it('leaves the token out when the settings do not append it (cookies authenticate)', () => {
    expect(chatSocketUrl(settings({ appendToken: false }), 's', 0)).toBe(
      'ws://lab.example/user/ada/betty/api/sessions/s/ws?after=0'
    );
  });
});

describe('ChatSocket', () => {
  it('connects after the last seq seen and hands over each JSON frame', () => {
    const { chat, frames, statuses, setSeq } = socket();
    setSeq(4);
    chat.open();
    expect(last().url).toBe('ws://lab/betty/api/sessions/s1/ws?after=4');
    last().open();
    last().receive({ type: 'message', seq: 5 });
    last().receive('not json');
    last().receive({ type: 'error', message: 'bad message' });
    expect(frames).toEqual([
      { type: 'message', seq: 5 },
      { type: 'error', message: 'bad message' }
    ]);
    expect(statuses).toEqual(['connecting', 'open']);
    expect(chat.status).toBe('open');
  });

  it('sends only while open', () => {
    const { chat } = socket();
    chat.open();
    expect(chat.send({ type: 'stop' })).toBe(false);
    last().open();
    expect(chat.send({ type: 'ask', prompt: 'hi' })).toBe(true);
    expect(last().sent).toEqual([{ type: 'ask', prompt: 'hi' }]);
    last().drop();
    expect(chat.send({ type: 'stop' })).toBe(false);
  });

  it('reconnects by itself after a drop, resuming after the newest seq', async () => {
    const beforeReconnect = jest.fn(() => Promise.resolve());
    const { chat, statuses, setSeq } = socket({ beforeReconnect });
    chat.open();
    last().open();
    setSeq(12);
    last().drop();
    expect(statuses).toEqual(['connecting', 'open', 'reconnecting']);
    expect(FakeSocket.made).toHaveLength(1);

    await jest.advanceTimersByTimeAsync(99);
    expect(FakeSocket.made).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(beforeReconnect).toHaveBeenCalledTimes(1);
    expect(FakeSocket.made).toHaveLength(2);
    expect(last().url).toBe('ws://lab/betty/api/sessions/s1/ws?after=12');
    last().open();
    expect(chat.status).toBe('open');
  });

  it('backs off, doubling up to the limit, and starts again after a good connection', async () => {
    const { chat } = socket();
    chat.open();
    const times: number[] = [];
    for (let i = 0; i < 6; i++) {
      last().drop();
      const before = FakeSocket.made.length;
      let waited = 0;
      while (FakeSocket.made.length === before) {
        await jest.advanceTimersByTimeAsync(10);
        waited += 10;
      }
      times.push(waited);
    }
    expect(times).toEqual([100, 200, 400, 800, 1000, 1000]);
    last().open();
    last().drop();
    await jest.advanceTimersByTimeAsync(100);
    expect(FakeSocket.made).toHaveLength(8);
  });

  it('a failed resume counts as a failed try and is tried again later', async () => {
    const beforeReconnect = jest
      .fn()
      .mockRejectedValueOnce(new Error('server down'))
      .mockResolvedValue(undefined);
    const { chat } = socket({ beforeReconnect });
    chat.open();
    last().drop();
    await jest.advanceTimersByTimeAsync(100);
    expect(FakeSocket.made).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(200);
    expect(beforeReconnect).toHaveBeenCalledTimes(2);
    expect(FakeSocket.made).toHaveLength(2);
  });

  it('does not reconnect once disposed', async () => {
    const { chat, statuses } = socket();
    chat.open();
    last().open();
    const first = last();
    chat.dispose();
    expect(first.closed).toBe(true);
    await jest.advanceTimersByTimeAsync(5000);
    expect(FakeSocket.made).toHaveLength(1);
    expect(statuses[statuses.length - 1]).toBe('closed');
    chat.open();
    expect(FakeSocket.made).toHaveLength(1);
  });

  it('dispose cancels a reconnect that is waiting', async () => {
    const { chat } = socket();
    chat.open();
    last().drop();
    chat.dispose();
    await jest.advanceTimersByTimeAsync(5000);
    expect(FakeSocket.made).toHaveLength(1);
  });
});

describe('backoffDelay', () => {
  it('doubles from the first delay up to the longest, less up to a quarter of jitter', () => {
    expect([0, 1, 2, 3, 10, 100].map(n => backoffDelay(n, 500, 30000, () => 0))).toEqual([
      500, 1000, 2000, 4000, 30000, 30000
    ]);
    expect(backoffDelay(0, 1000, 30000, () => 1)).toBe(750);
  });
});
