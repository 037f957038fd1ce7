/**
 * Reading something from the server again and again while the panel is attached: now, then every
 * {@link POLL_MS}, less often while the server does not answer. The login questions and the
 * approvals waiting for the person are read this way.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { BettyRequestError } from './request';

/** Milliseconds between reads. */
export const POLL_MS = 2_000;
/** Milliseconds between reads once {@link FAILURES_BEFORE_BACKOFF} reads in a row failed. */
export const BACKOFF_MS = 10_000;
/** Failed reads in a row after which a poll reads less often, until one succeeds. */
export const FAILURES_BEFORE_BACKOFF = 3;

/**
 * How a {@link Poll} paces itself when it follows something that changes now and then (the cluster): the
 * job watcher's rule. After a change the next read comes {@link fastest} ms later; each read that finds
 * nothing new doubles the wait, up to {@link slowest}; a failed read multiplies it by four, up to four
 * times {@link slowest}.
 */
export interface IPace<T> {
  fastest: number;
  slowest: number;
  /** Whether two answers show the same thing (then the next read waits longer). */
  same: (previous: T, next: T) => boolean;
  /** Whether an answer says the source did not answer (paced as a failed read). */
  failed?: (value: T) => boolean;
}

/** The wait before the next read, by the job watcher's rule ({@link IPace}). */
export function nextWait(
  current: number,
  outcome: 'changed' | 'same' | 'failed',
  pace: { fastest: number; slowest: number }
): number {
  if (outcome === 'failed') {
    return Math.min(pace.slowest * 4, current * 4);
  }
  return outcome === 'changed' ? pace.fastest : Math.min(pace.slowest, current * 2);
}

/**
 * Calls `read` now and every {@link POLL_MS} while started (or at the {@link IPace} given), and hands
 * each answer to `show`.
 */
export class Poll<T> {
  private _running = false;
  private _generation = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _failures = 0;
  private _wait = 0;
  private _last: { read: T } | null = null;

  constructor(
    private readonly _read: () => Promise<T>,
    private readonly _show: (value: T) => void,
    private readonly _pace: IPace<T> | null = null
  ) {}

  /** Milliseconds until the next read (what the pace decided after the last one). */
  get wait(): number {
    return this._wait;
  }

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
    this._wait = this._pace?.fastest ?? POLL_MS;
    this._last = null;
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
    this._wait = this._delay(value);
    this._timer = setTimeout(() => void this._tick(generation), this._wait);
  }

  private _delay(value: { read: T } | null): number {
    if (this._pace === null) {
      return this._failures >= FAILURES_BEFORE_BACKOFF ? BACKOFF_MS : POLL_MS;
    }
    const previous = this._last;
    if (value !== null) {
      this._last = value;
    }
    const outcome =
      value === null || this._pace.failed?.(value.read)
        ? 'failed'
        : previous !== null && this._pace.same(previous.read, value.read)
          ? 'same'
          : 'changed';
    return nextWait(this._wait, outcome, this._pace);
  }
}

/**
 * Things that wait on the person, read with a {@link Poll}: which wait now (oldest first), each
 * announced once on {@link asked} when the panel first sees it, and what became of an answer sent
 * from here. An answered one goes at once, even if a read that began before the answer still
 * lists it.
 */
export class WaitingList<T> {
  /** What waits now, oldest first. */
  items: readonly T[] = [];
  /** Why the last answer found nothing waiting on it (answered elsewhere, timed out, cancelled). */
  problem: string | null = null;

  private readonly _poll: Poll<T[]>;
  private readonly _settled = new Set<string>();
  private readonly _seen = new Set<string>();
  private readonly _changed = new Signal<this, void>(this);
  private readonly _asked = new Signal<this, T>(this);

  /**
   * @param read - what waits now, from the server
   * @param idOf - an item's id
   * @param gone - the HTTP statuses that mean nothing waits on an answer any more
   */
  constructor(
    read: () => Promise<T[]>,
    private readonly _idOf: (item: T) => string,
    private readonly _gone: readonly number[]
  ) {
    this._poll = new Poll(read, items => this._show(items));
  }

  /** Fires when the items or the problem change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Fires once for each item the panel sees for the first time. */
  get asked(): ISignal<this, T> {
    return this._asked;
  }

  /** Whether the items are being read. */
  get running(): boolean {
    return this._poll.running;
  }

  /** Read now and every {@link POLL_MS} from then on; a second start does nothing. */
  start(): void {
    this._poll.start();
  }

  /** Stop reading; a read under way is ignored when it answers. */
  stop(): void {
    this._poll.stop();
  }

  /** Stop for good. */
  dispose(): void {
    this.stop();
    Signal.clearData(this);
  }

  /** Forget {@link problem}. */
  dismissProblem(): void {
    if (this.problem !== null) {
      this.problem = null;
      this._changed.emit();
    }
  }

  /**
   * Wait for `answer`, an answer to item `id` on its way to the server. The item goes once the
   * server took it, or when nothing waits on it any more ({@link problem} says why); any other
   * refusal rejects with its one-line message and the item stays, to be answered again.
   */
  protected async settle(id: string, answer: Promise<unknown>): Promise<void> {
    try {
      await answer;
      this.problem = null;
    } catch (error) {
      if (!(error instanceof BettyRequestError && this._gone.includes(error.status))) {
        throw error;
      }
      this.problem = error.message;
    }
    this._settled.add(id);
    this.items = this.items.filter(item => this._idOf(item) !== id);
    this._changed.emit();
  }

  private _show(listed: T[]): void {
    const ids = new Set(listed.map(this._idOf));
    for (const id of [...this._settled, ...this._seen]) {
      if (!ids.has(id)) {
        this._settled.delete(id);
        this._seen.delete(id);
      }
    }
    const items = listed.filter(item => !this._settled.has(this._idOf(item)));
    const fresh = items.filter(item => !this._seen.has(this._idOf(item)));
    const same =
      items.length === this.items.length &&
      items.every((item, i) => this._idOf(item) === this._idOf(this.items[i]));
    if (!same) {
      this.items = items;
      this._changed.emit();
    }
    for (const item of fresh) {
      this._seen.add(this._idOf(item));
      this._asked.emit(item);
    }
  }
}
