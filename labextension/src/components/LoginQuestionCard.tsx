/**
 * Login question cards: a cluster's login node asks something (a second factor's
 * `Verification code: `) and the person answers it here. The card shows the login node's
 * prompt as text, never as markup: it comes from another host.
 *
 * What the person types is never held in React state; the field is wiped the moment the
 * answer is sent, and the answer is kept and logged nowhere.
 */
import * as React from 'react';

import { LoginQuestions } from '../logins';
import { useChanges } from './changes';
import { ILoginQuestion } from '../models';
import { visibleText } from '../safe';

/** Props of {@link LoginQuestionCard}. */
export interface ILoginQuestionCardProps {
  question: ILoginQuestion;
  /** Send the answer; a rejected promise shows its message on the card, to answer again. */
  onAnswer: (answer: string) => Promise<void>;
  /** Cancel the login; a rejected promise shows its message on the card. */
  onCancel: () => Promise<void>;
}

/** One question a cluster's login node asks, with a field for the answer. */
export function LoginQuestionCard(props: ILoginQuestionCardProps): JSX.Element {
  const { question, onAnswer, onCancel } = props;
  // The field is uncontrolled: what is typed lives in the input alone, never in React state
  // (nor in a `value` attribute React would mirror it to), and is wiped when sent.
  const field = React.useRef<HTMLInputElement>(null);
  const [empty, setEmpty] = React.useState(true);
  const [sending, setSending] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);

  const send = async (call: () => Promise<void>) => {
    setError(null);
    setSending(true);
    try {
      await call();
    } catch (reason) {
      setError(visibleText((reason as Error).message ?? String(reason)));
      setSending(false);
    }
  };
  const submit = () => {
    const input = field.current;
    if (sending || input === null || input.value === '') {
      return;
    }
    const answer = input.value;
    input.value = '';
    setEmpty(true);
    void send(() => onAnswer(answer));
  };

  return (
    <div
      className="betty-LoginQuestion"
      data-testid="betty-login-question"
      data-question-id={question.id}
    >
      <div className="betty-LoginQuestion-head">
        {visibleText(question.cluster)} asks to log in
      </div>
      {question.instructions && (
        <div className="betty-LoginQuestion-instructions" data-testid="betty-login-instructions">
          {visibleText(question.instructions)}
        </div>
      )}
      <label className="betty-LoginQuestion-field">
        <span className="betty-LoginQuestion-prompt" data-testid="betty-login-prompt">
          {visibleText(question.prompt)}
        </span>
        <input
          className="betty-LoginQuestion-answer"
          data-testid="betty-login-answer"
          type={question.echo ? 'text' : 'password'}
          autoComplete="one-time-code"
          autoCapitalize="off"
          autoCorrect="off"
          spellCheck={false}
          ref={field}
          disabled={sending}
          onChange={event => setEmpty(event.target.value === '')}
          onKeyDown={event => {
            if (event.key === 'Enter') {
              event.preventDefault();
              submit();
            }
          }}
        />
      </label>
      <div className="betty-LoginQuestion-buttons">
        <button
          className="betty-Button betty-Button-accept"
          data-testid="betty-login-submit"
          disabled={sending || empty}
          onClick={submit}
        >
          Log in
        </button>
        <button
          className="betty-Button"
          data-testid="betty-login-cancel"
          disabled={sending}
          onClick={() => void send(onCancel)}
        >
          Cancel
        </button>
      </div>
      {error && (
        <div className="betty-LoginQuestion-error" role="alert" data-testid="betty-login-error">
          {error}
        </div>
      )}
    </div>
  );
}

/** Props of {@link LoginQuestionsView}. */
export interface ILoginQuestionsViewProps {
  logins: LoginQuestions;
}

/** A card for each login question waiting, oldest first, and why the last answer went nowhere. */
export function LoginQuestionsView({ logins }: ILoginQuestionsViewProps): JSX.Element | null {
  useChanges(logins);
  const { questions, problem } = logins;
  if (questions.length === 0 && problem === null) {
    return null;
  }
  return (
    <div className="betty-LoginQuestions" data-testid="betty-login-questions">
      {questions.map(question => (
        <LoginQuestionCard
          key={question.id}
          question={question}
          onAnswer={answer => logins.answer(question.id, answer)}
          onCancel={() => logins.cancel(question.id)}
        />
      ))}
      {problem !== null && (
        <div className="betty-LoginQuestion-error" role="alert" data-testid="betty-login-problem">
          {visibleText(problem)}{' '}
          <button
            className="betty-Link"
            data-testid="betty-login-problem-dismiss"
            onClick={() => logins.dismissProblem()}
          >
            Dismiss
          </button>
        </div>
      )}
    </div>
  );
}
