/**
 * The questions clusters' login nodes ask while Betty logs in to them (a second factor such
 * as `Verification code: `), read from the server every 2 s while the panel is attached, so
 * a login waiting on the person shows up without them doing anything.
 *
 * An answer goes straight to the server and is kept nowhere: not here, not in a view.
 */
import { BettyAPI } from './api';
import { ILoginQuestion } from './models';
import { WaitingList } from './poll';

export { BACKOFF_MS, FAILURES_BEFORE_BACKOFF, POLL_MS } from './poll';

/** The calls the questions need: `BettyAPI` itself, or a fake in tests. */
export type LoginAPI = Pick<
  BettyAPI,
  'loginQuestions' | 'answerLoginQuestion' | 'cancelLoginQuestion'
>;

/** The login questions waiting for the person, and their answers on the way to the server. */
export class LoginQuestions extends WaitingList<ILoginQuestion> {
  private readonly _api: LoginAPI;

  constructor(api: LoginAPI) {
    super(async () => (await api.loginQuestions()).questions, question => question.id, [404]);
    this._api = api;
  }

  /** The questions waiting now, oldest first. */
  get questions(): readonly ILoginQuestion[] {
    return this.items;
  }

  /**
   * Hand `answer` to the login waiting on question `id`. The question goes once the server
   * took it, or when nothing waits on it any more ({@link problem} says why); any other
   * refusal rejects with its one-line message and the question stays, to be answered again.
   */
  answer(id: string, answer: string): Promise<void> {
    return this.settle(id, this._api.answerLoginQuestion(id, answer));
  }

  /** Cancel the login waiting on question `id`: it fails with one line. */
  cancel(id: string): Promise<void> {
    return this.settle(id, this._api.cancelLoginQuestion(id));
  }
}
