/**
 * The questions clusters' login nodes ask while Betty logs in to them (a second factor such
 * as `Verification code: `), read from the server every 2 s while the panel is attached, so
 * a login waiting on the person shows up without them doing anything.
 *
 * An answer goes straight to the server and is kept nowhere: not here, not in a view.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { BettyAPI } from './api';
import { ILoginQuestion } from './models';
import { BettyRequestError } from './request';

/** The calls the questions need: `BettyAPI` itself, or a fake in tests. */
export type LoginAPI = Pick<
  BettyAPI,
  'loginQuestions' | 'answerLoginQuestion' | 'cancelLoginQuestion'
>;

/** Milliseconds between reads of the waiting questions. */
export const POLL_MS = 2_000;
/** Milliseconds between reads once {@link FAILURES_BEFORE_BACKOFF} reads in a row failed. */
export const BACKOFF_MS = 10_000;
/** Failed reads in a row after which the panel reads less often, until one succeeds. */
export const FAILURES_BEFORE_BACKOFF = 3;

/** The login questions waiting for the person, and their answers on the way to the server. */
export class LoginQuestions {
  /** The questions waiting now, oldest first. */
  questions: readonly ILoginQuestion[] = [];
  /** Why the last answer found no login waiting (answered elsewhere, cancelled or timed out). */
  problem: string | null = null;

  private readonly _api: LoginAPI;
  private _running = false;
  private _generation = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _failures = 0;
  /** Answered or cancelled here: a read that began before the answer may still list them. */
  private readonly _settled = new Set<string>();
  private readonly _seen = new Set<string>();
  private readonly _changed = new Signal<this, void>(this);
  private readonly _asked = new Signal<this, ILoginQuestion>(this);

  constructor(api: LoginAPI) {
    this._api = api;
  }

  /** Fires when the questions or the problem change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Fires once for each question the panel sees for the first time. */
  get asked(): ISignal<this, ILoginQuestion> {
    return this._asked;
  }

  /** Whether the questions are being read. */
  get running(): boolean {
    return this._running;
  }

  /** Read the questions now and every {@link POLL_MS} from then on; a second start does nothing. */
  start(): void {
    if (this._running) {
      return;
    }
    this._running = true;
    this._failures = 0;
    void this._read(++this._generation);
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

  /** Stop for good. */
  dispose(): void {
    this.stop();
    Signal.clearData(this);
  }

  /**
   * Hand `answer` to the login waiting on question `id`. The question goes once the server
   * took it, or when nothing waits on it any more ({@link problem} says why); any other
   * refusal rejects with its one-line message and the question stays, to be answered again.
   */
  answer(id: string, answer: string): Promise<void> {
    return this._settle(id, this._api.answerLoginQuestion(id, answer));
  }

  /** Cancel the login waiting on question `id`: it fails with one line. */
  cancel(id: string): Promise<void> {
    return this._settle(id, this._api.cancelLoginQuestion(id));
  }

  /** Forget {@link problem}. */
  dismissProblem(): void {
    if (this.problem !== null) {
      this.problem = null;
      this._changed.emit();
    }
  }

  private async _settle(id: string, call: Promise<unknown>): Promise<void> {
    try {
      await call;
      this.problem = null;
    } catch (error) {
      if (!(error instanceof BettyRequestError && error.status === 404)) {
        throw error;
      }
      this.problem = error.message;
    }
    this._settled.add(id);
    this.questions = this.questions.filter(question => question.id !== id);
    this._changed.emit();
  }

  private async _read(generation: number): Promise<void> {
    this._timer = null;
    let questions: ILoginQuestion[] | null = null;
    try {
      questions = (await this._api.loginQuestions()).questions;
    } catch {
      // The server is away or restarting: read again, less often while it stays away.
    }
    if (generation !== this._generation) {
      return;
    }
    this._failures = questions === null ? this._failures + 1 : 0;
    if (questions !== null) {
      this._show(questions);
    }
    const delay = this._failures >= FAILURES_BEFORE_BACKOFF ? BACKOFF_MS : POLL_MS;
    this._timer = setTimeout(() => void this._read(generation), delay);
  }

  private _show(listed: ILoginQuestion[]): void {
    const ids = new Set(listed.map(question => question.id));
    for (const id of [...this._settled, ...this._seen]) {
      if (!ids.has(id)) {
        this._settled.delete(id);
        this._seen.delete(id);
      }
    }
    const questions = listed.filter(question => !this._settled.has(question.id));
    const fresh = questions.filter(question => !this._seen.has(question.id));
    const same =
      questions.length === this.questions.length &&
      questions.every((question, i) => question.id === this.questions[i].id);
    if (!same) {
      this.questions = questions;
      this._changed.emit();
    }
    for (const question of fresh) {
      this._seen.add(question.id);
      this._asked.emit(question);
    }
  }
}
