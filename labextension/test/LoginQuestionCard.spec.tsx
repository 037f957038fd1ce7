/**
 * Login question cards over a fake server (the REST helper answers from the questions it holds,
 * so each button is checked against the endpoint it calls): the prompt shown as text, the
 * field, answering, cancelling, a question nobody waits on any more, and the reading of the
 * questions every 2 s while the panel is attached.
 */
import * as React from 'react';
import { act } from 'react';

import { BettyAPI } from '../src/api';
import { LoginQuestionCard, LoginQuestionsView } from '../src/components/LoginQuestionCard';
import { BACKOFF_MS, FAILURES_BEFORE_BACKOFF, LoginQuestions, POLL_MS } from '../src/logins';
import { ILoginQuestion } from '../src/models';
import { BettyRequestError, requestAPI } from '../src/request';
import { expectReadsWhileAttached } from './attached';
import { allByTestId, byTestId, click, render, settle, type, useFakeClock } from './render';

jest.mock('../src/request', () => ({
  ...jest.requireActual('../src/request'),
  requestAPI: jest.fn()
}));
// The panel's other tabs import JupyterLab's dialogs, which these tests never open.
jest.mock('@jupyterlab/apputils', () => ({ showDialog: jest.fn(), Dialog: {} }));

const CODE = '914 271';
const HOSTILE = '(root@127.0.0.1) <img src=x onerror="window.__pwned=1"> Verification code: ';

function question(id: string, overrides: Partial<ILoginQuestion> = {}): ILoginQuestion {
  return {
    id,
    cluster: 'betty-mfa',
    prompt: '(root@127.0.0.1) Verification code: ',
    echo: false,
    instructions: '',
    asked_at: 1_700_000_000,
    ...overrides
  };
}

/** Betty's login-question routes as the panel sees them: the questions waiting, the calls made. */
class FakeServer {
  calls: string[] = [];
  bodies: unknown[] = [];
  waiting: ILoginQuestion[] = [question('login_a')];
  /** When set, `GET login-questions` fails with it. */
  down: Error | null = null;
  /** When set, the next answer waits for the test to call it. */
  held: Promise<void> | null = null;
  /** When set, the next answer is refused with it. */
  refusal: Error | null = null;

  answer = async (endpoint: string, init: RequestInit = {}): Promise<unknown> => {
    const method = init.method ?? 'GET';
    this.calls.push(`${method} ${endpoint}`);
    this.bodies.push(typeof init.body === 'string' ? JSON.parse(init.body) : undefined);
    if (method === 'GET' && endpoint === 'login-questions') {
      if (this.down !== null) {
        throw this.down;
      }
      return { questions: [...this.waiting] };
    }
    const id = decodeURIComponent(endpoint.replace(/^login-questions\//, ''));
    if (this.held !== null) {
      await this.held;
    }
    const refusal = this.refusal;
    if (refusal !== null) {
      this.refusal = null;
      throw refusal;
    }
    if (!this.waiting.some(each => each.id === id)) {
      throw new BettyRequestError(
        `no login is waiting on '${id}'; it was answered, cancelled or timed out`,
        404
      );
    }
    this.waiting = this.waiting.filter(each => each.id !== id);
    return method === 'POST' ? { answered: true } : { cancelled: true };
  };

  count(key: string): number {
    return this.calls.filter(call => call === key).length;
  }

  bodyOf(key: string): unknown {
    return this.bodies[this.calls.lastIndexOf(key)];
  }
}

let server: FakeServer;
let logins: LoginQuestions;

useFakeClock();
beforeEach(() => {
  server = new FakeServer();
  (requestAPI as jest.Mock).mockImplementation(server.answer);
  logins = new LoginQuestions(new BettyAPI());
});
afterEach(() => logins.dispose());

/** The cards, once the first read of the questions came back. */
async function shown() {
  const rendered = render(<LoginQuestionsView logins={logins} />);
  logins.start();
  await settle();
  return rendered;
}

function enter(element: HTMLElement): Promise<void> {
  return act(async () => {
    element.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  });
}

describe('LoginQuestionCard: what it shows', () => {
  it('names the cluster and shows the prompt exactly, as text', () => {
    const { container } = render(
      <LoginQuestionCard
        question={question('login_a', { prompt: HOSTILE })}
        onAnswer={jest.fn()}
        onCancel={jest.fn()}
      />
    );
    const card = byTestId(container, 'betty-login-question');
    expect(card.dataset.questionId).toBe('login_a');
    expect(card.querySelector('.betty-LoginQuestion-head')!.textContent).toBe(
      'betty-mfa asks to log in'
    );
    expect(byTestId(container, 'betty-login-prompt').textContent).toBe(HOSTILE);
    expect(card.querySelector('img')).toBeNull();
    expect(allByTestId(container, 'betty-login-instructions')).toHaveLength(0);
    expect((window as { __pwned?: number }).__pwned).toBeUndefined();
  });

  it('writes out control characters in the prompt, the cluster and the instructions', () => {
    const { container } = render(
      <LoginQuestionCard
        question={question('login_a', {
          cluster: 'evil\u202e',
          prompt: 'Code\x1b[2J: ',
          instructions: 'Open your <b>app</b>\nthen type the code'
        })}
        onAnswer={jest.fn()}
        onCancel={jest.fn()}
      />
    );
    expect(byTestId(container, 'betty-login-prompt').textContent).toBe('Code\\x1b[2J: ');
    expect(container.querySelector('.betty-LoginQuestion-head')!.textContent).toBe(
      'evil\\u202e asks to log in'
    );
    const instructions = byTestId(container, 'betty-login-instructions');
    expect(instructions.textContent).toBe('Open your <b>app</b>\nthen type the code');
    expect(instructions.querySelector('b')).toBeNull();
  });

  it.each([
    [false, 'password'],
    [true, 'text']
  ])('echo %s asks in a %s field meant for a one-time code', (echo, kind) => {
    const { container } = render(
      <LoginQuestionCard
        question={question('login_a', { echo })}
        onAnswer={jest.fn()}
        onCancel={jest.fn()}
      />
    );
    const input = byTestId<HTMLInputElement>(container, 'betty-login-answer');
    expect(input.type).toBe(kind);
    expect(input.getAttribute('autocomplete')).toBe('one-time-code');
    expect(byTestId(container, 'betty-login-submit').textContent).toBe('Log in');
    expect(byTestId(container, 'betty-login-cancel').textContent).toBe('Cancel');
  });

  it('sends nothing while the field is empty', async () => {
    const onAnswer = jest.fn();
    const { container } = render(
      <LoginQuestionCard question={question('login_a')} onAnswer={onAnswer} onCancel={jest.fn()} />
    );
    const submit = byTestId<HTMLButtonElement>(container, 'betty-login-submit');
    expect(submit.disabled).toBe(true);
    await enter(byTestId(container, 'betty-login-answer'));
    expect(onAnswer).not.toHaveBeenCalled();
  });
});

describe('LoginQuestionsView: answering', () => {
  it('shows a card per waiting question, oldest first, and nothing when none waits', async () => {
    server.waiting = [question('login_a'), question('login_b', { cluster: 'big' })];
    const { container } = await shown();
    const cards = allByTestId(container, 'betty-login-question');
    expect(cards.map(card => card.dataset.questionId)).toEqual(['login_a', 'login_b']);
    server.waiting = [];
    await settle(POLL_MS);
    expect(container.innerHTML).toBe('');
  });

  it('Log in sends the answer once, wipes the field at once and drops the card', async () => {
    const log = ['log', 'info', 'warn', 'error', 'debug'].map(name =>
      jest.spyOn(console, name as 'log')
    );
    let release = () => undefined as void;
    server.held = new Promise<void>(resolve => (release = resolve));
    const { container } = await shown();
    const input = byTestId<HTMLInputElement>(container, 'betty-login-answer');
    type(input, CODE);
    // No value attribute mirrors what is typed: the page's HTML never holds it.
    expect(container.innerHTML).not.toContain(CODE);
    await click(byTestId(container, 'betty-login-submit'));
    // While the server still takes it, the field is already empty and nothing can be sent twice.
    expect(input.value).toBe('');
    expect(input.disabled).toBe(true);
    expect(byTestId<HTMLButtonElement>(container, 'betty-login-submit').disabled).toBe(true);
    await click(byTestId(container, 'betty-login-submit'));
    expect(server.count('POST login-questions/login_a')).toBe(1);
    expect(server.bodyOf('POST login-questions/login_a')).toEqual({ answer: CODE });
    await act(async () => release());
    await settle();
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
    expect(container.innerHTML).not.toContain(CODE);
    for (const spy of log) {
      expect(JSON.stringify(spy.mock.calls)).not.toContain(CODE);
      spy.mockRestore();
    }
  });

  it('Enter in the field sends the answer', async () => {
    const { container } = await shown();
    const input = byTestId<HTMLInputElement>(container, 'betty-login-answer');
    type(input, CODE);
    await enter(input);
    expect(server.bodyOf('POST login-questions/login_a')).toEqual({ answer: CODE });
    expect(input.value).toBe('');
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
  });

  it('an answered question that an earlier read still lists does not come back', async () => {
    const { container } = await shown();
    const stale = [...server.waiting];
    type(byTestId(container, 'betty-login-answer'), CODE);
    await click(byTestId(container, 'betty-login-submit'));
    server.waiting = stale;
    await settle(POLL_MS);
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
  });

  it('Cancel calls DELETE and drops the card', async () => {
    const { container } = await shown();
    await click(byTestId(container, 'betty-login-cancel'));
    expect(server.calls).toContain('DELETE login-questions/login_a');
    expect(server.count('POST login-questions/login_a')).toBe(0);
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
    expect(allByTestId(container, 'betty-login-problem')).toHaveLength(0);
  });

  it('a question nobody waits on any more shows the one-line 404 and goes', async () => {
    const { container } = await shown();
    server.waiting = []; // timed out in the server since the last read
    type(byTestId(container, 'betty-login-answer'), CODE);
    await click(byTestId(container, 'betty-login-submit'));
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
    const problem = byTestId(container, 'betty-login-problem');
    expect(problem.getAttribute('role')).toBe('alert');
    expect(problem.textContent).toContain(
      "no login is waiting on 'login_a'; it was answered, cancelled or timed out"
    );
    expect(problem.textContent).not.toContain(CODE);
    await click(byTestId(container, 'betty-login-problem-dismiss'));
    expect(allByTestId(container, 'betty-login-problem')).toHaveLength(0);
  });

  it('any other refusal stays on the card, which can be answered again', async () => {
    server.refusal = new BettyRequestError(
      'answer: String should have at most 4096 characters',
      400
    );
    const { container } = await shown();
    type(byTestId(container, 'betty-login-answer'), 'x'.repeat(5000));
    await click(byTestId(container, 'betty-login-submit'));
    expect(byTestId(container, 'betty-login-error').textContent).toBe(
      'answer: String should have at most 4096 characters'
    );
    const input = byTestId<HTMLInputElement>(container, 'betty-login-answer');
    expect(input.value).toBe('');
    expect(input.disabled).toBe(false);
    type(input, CODE);
    await click(byTestId(container, 'betty-login-submit'));
    expect(server.bodyOf('POST login-questions/login_a')).toEqual({ answer: CODE });
    expect(allByTestId(container, 'betty-login-question')).toHaveLength(0);
  });
});

describe('LoginQuestions: reading the questions', () => {
  const reads = () => server.count('GET login-questions');

  it('reads at once and every 2 s, and stops when told', async () => {
    logins.start();
    logins.start(); // once is enough
    await settle();
    expect(reads()).toBe(1);
    await settle(POLL_MS * 3);
    expect(reads()).toBe(4);
    logins.stop();
    await settle(POLL_MS * 5);
    expect(reads()).toBe(4);
  });

  it('reads every 10 s after failed reads in a row, every 2 s once one succeeds', async () => {
    server.down = new Error('Failed to fetch');
    logins.start();
    await settle(POLL_MS * (FAILURES_BEFORE_BACKOFF - 1));
    expect(reads()).toBe(FAILURES_BEFORE_BACKOFF);
    await settle(POLL_MS * 4);
    expect(reads()).toBe(FAILURES_BEFORE_BACKOFF); // backed off: nothing for 10 s
    await settle(BACKOFF_MS - POLL_MS * 4);
    expect(reads()).toBe(FAILURES_BEFORE_BACKOFF + 1);
    server.down = null;
    await settle(BACKOFF_MS);
    expect(logins.questions.map(each => each.id)).toEqual(['login_a']);
    const before = reads();
    await settle(POLL_MS);
    expect(reads()).toBe(before + 1);
  });

  it('tells of each question once, when first seen', async () => {
    const asked: string[] = [];
    logins.asked.connect((_, each) => asked.push(each.id));
    logins.start();
    await settle(POLL_MS * 2);
    server.waiting = [...server.waiting, question('login_b')];
    await settle(POLL_MS * 2);
    expect(asked).toEqual(['login_a', 'login_b']);
  });

  it('the panel reads while attached and stops when disposed', async () => {
    await expectReadsWhileAttached(reads, model => model.logins.running);
  });
});
