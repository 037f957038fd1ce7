/**
 * Reading something from the server again and again while the panel is attached: now, then every
 * {@link POLL_MS}, less often while the server does not answer. The login questions and the
 * approvals waiting for the person are read this way.
 */

/** Milliseconds between reads. */
export const POLL_MS = 2_000;
/** Milliseconds between reads once {@link FAILURES_BEFORE_BACKOFF} reads in a row failed. */
export const BACKOFF_MS = 10_000;
/** Failed reads in a row after which a poll reads less often, until one succeeds. */
export const FAILURES_BEFORE_BACKOFF = 3;

/** Calls `read` now and every {@link POLL_MS} while started, and hands each answer to `show`. */
export class Poll<T> {
  private _running = false;
  private _generation = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _failures = 0;

  constructor(
    private readonly _read: () => Promise<T>,
    private readonly _show: (value: T) => void
  ) {}

  /** Whether it reads. */
  get running(): boolean {
    return this._running;
  }

  /** Read now and every {@link POLL_MS} from then on; a second start does nothing. */
  start(): void {
    if (this._running) {
      return;
    }
    this._running = true;
    this._failures = 0;
    void this._tick(++this._generation);
  }

  /** Stop reading; a read under way is ignored when it answers. */
  stop(): void {
    this._running = false;
    this._generation += 1;
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private async _tick(generation: number): Promise<void> {
    this._timer = null;
    let value: { read: T } | null = null;
    try {
      value = { read: await this._read() };
    } catch {
      // The server is away or restarting: read again, less often while it stays away.
    }
    if (generation !== this._generation) {
      return;
    }
    this._failures = value === null ? this._failures + 1 : 0;
    if (value !== null) {
      this._show(value.read);
    }
    const delay = this._failures >= FAILURES_BEFORE_BACKOFF ? BACKOFF_MS : POLL_MS;
    this._timer = setTimeout(() => void this._tick(generation), delay);
  }
}
