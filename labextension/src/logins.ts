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
import { Poll } from './poll';
import { BettyRequestError } from './request';

export { BACKOFF_MS, FAILURES_BEFORE_BACKOFF, POLL_MS } from './poll';

/** The calls the questions need: `BettyAPI` itself, or a fake in tests. */
export type LoginAPI = Pick<
  BettyAPI,
  'loginQuestions' | 'answerLoginQuestion' | 'cancelLoginQuestion'
>;

/** The login questions waiting for the person, and their answers on the way to the server. */
export class LoginQuestions {
  /** The questions waiting now, oldest first. */
  questions: readonly ILoginQuestion[] = [];
  /** Why the last answer found no login waiting (answered elsewhere, cancelled or timed out). */
  problem: string | null = null;

  private readonly _api: LoginAPI;
  private readonly _poll: Poll<ILoginQuestion[]>;
  /** Answered or cancelled here: a read that began before the answer may still list them. */
  private readonly _settled = new Set<string>();
  private readonly _seen = new Set<string>();
  private readonly _changed = new Signal<this, void>(this);
  private readonly _asked = new Signal<this, ILoginQuestion>(this);

  constructor(api: LoginAPI) {
    this._api = api;
    this._poll = new Poll(
      async () => (await api.loginQuestions()).questions,
      questions => this._show(questions)
    );
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
    return this._poll.running;
  }

  /** Read the questions now and every {@link POLL_MS} from then on; a second start does nothing. */
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
