/**
 * The chat WebSocket of one session (`/betty/api/sessions/{id}/ws?after=N`), reconnecting
 * by itself with backoff and resuming after the last `seq` the panel saw, so no event is
 * lost or shown twice.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { SocketMessage } from './models';
import { API_NAMESPACE } from './request';

/** Where the socket stands: `reconnecting` between a drop and the next open. */
export type SocketStatus = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** How a {@link ChatSocket} connects and whom it tells. */
export interface IChatSocketOptions {
  /** The URL to open, resuming after `after`. */
  url: (after: number) => string;
  /** The last `seq` the panel applied: each (re)connect resumes after it. */
  lastSeq: () => number;
  /** Each JSON frame the server sends (events, and `{type: "server_error", message}` frames). */
  onFrame: (frame: unknown) => void;
  /** Each change of status. */
  onStatus?: (status: SocketStatus) => void;
  /** Runs before each reconnect (e.g. to resume the session); a rejection counts as a failed try. */
  beforeReconnect?: () => Promise<void>;
  /** The WebSocket class (the server settings' one in JupyterLab, a fake in tests). */
  WebSocket?: typeof WebSocket;
  /** First delay after a drop, in ms (default 500). */
  initialDelayMs?: number;
  /** Longest delay between tries, in ms (default 30 s). */
  maxDelayMs?: number;
}

/**
 * The delay before reconnect try `attempt` (0-based): doubling from `initialMs` up to
 * `maxMs`, with up to a quarter of random jitter so many panels do not knock at once.
 */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random
): number {
  const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(base * (1 - 0.25 * random()));
}

/**
 * The chat socket URL of `sessionId`, built the way `@jupyterlab/services` builds its
 * kernel sockets: the server's `wsUrl`, and the token in the query when the settings ask
 * for it (the browser's cookies authenticate otherwise).
 */
export function chatSocketUrl(
  settings: ServerConnection.ISettings,
  sessionId: string,
  after: number
): string {
  const base = URLExt.join(
    settings.wsUrl,
    API_NAMESPACE,
    'sessions',
    encodeURIComponent(sessionId),
    'ws'
  );
  let url = `${base}?after=${after}`;
  if (settings.appendToken && settings.token) {
    url += `&token=${encodeURIComponent(settings.token)}`;
  }
  return url;
}

/** One session's chat socket; call {@link ChatSocket.open} once, {@link ChatSocket.dispose} at the end. */
export class ChatSocket {
  private _ws: WebSocket | null = null;
  private _status: SocketStatus = 'closed';
  private _attempt = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _disposed = false;

  constructor(private readonly _options: IChatSocketOptions) {}

  /** Where the socket stands. */
  get status(): SocketStatus {
    return this._status;
  }

  /** Whether {@link ChatSocket.dispose} was called. */
  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Connect, resuming after the panel's last `seq`. */
  open(): void {
    if (this._disposed || this._ws !== null) {
      return;
    }
    this._setStatus(this._attempt === 0 ? 'connecting' : 'reconnecting');
    const Socket = this._options.WebSocket ?? WebSocket;
    let ws: WebSocket;
    try {
      ws = new Socket(this._options.url(this._options.lastSeq()));
    } catch {
      this._setStatus('reconnecting');
      this._schedule();
      return;
    }
    this._ws = ws;
    ws.onopen = () => {
      this._attempt = 0;
      this._setStatus('open');
    };
    ws.onmessage = (message: MessageEvent) => this._receive(message.data);
    ws.onclose = () => this._dropped(ws);
    ws.onerror = () => undefined; // a close always follows, and reconnects
  }

  /** Send `message`; false (and nothing sent) when the socket is not open. */
  send(message: SocketMessage): boolean {
    if (this._ws === null || this._status !== 'open') {
      return false;
    }
    this._ws.send(JSON.stringify(message));
    return true;
  }

  /** Close for good: no reconnect follows. */
  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    const ws = this._ws;
    this._ws = null;
    if (ws !== null) {
      ws.onclose = null;
      ws.onmessage = null;
      ws.close();
    }
    this._setStatus('closed');
  }

  private _receive(data: unknown): void {
    let frame: unknown;
    try {
      frame = JSON.parse(String(data));
    } catch {
      return; // not JSON: nothing the panel can show
    }
    this._options.onFrame(frame);
  }

  private _dropped(ws: WebSocket): void {
    if (this._ws !== ws || this._disposed) {
      return;
    }
    this._ws = null;
    this._setStatus('reconnecting');
    this._schedule();
  }

  private _schedule(): void {
    const delay = backoffDelay(
      this._attempt,
      this._options.initialDelayMs ?? 500,
      this._options.maxDelayMs ?? 30_000
    );
    this._attempt += 1;
    this._timer = setTimeout(() => void this._reconnect(), delay);
  }

  private async _reconnect(): Promise<void> {
    this._timer = null;
    if (this._disposed) {
      return;
    }
    try {
      await this._options.beforeReconnect?.();
    } catch {
      if (!this._disposed) {
        this._schedule();
      }
      return;
    }
    this.open();
  }

  private _setStatus(status: SocketStatus): void {
    if (status !== this._status) {
      this._status = status;
      this._options.onStatus?.(status);
    }
  }
}
