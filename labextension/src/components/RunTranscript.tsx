/**
 * The transcript of an automation's run, read-only: its session's events (every attempt)
 * built by the chat's reducer and shown with the chat's rows. Its approval cards are
 * answered on the automation's card, not here.
 */
import * as React from 'react';

import { BettyAPI } from '../api';
import { IAutomationRun, IAutomationRunTranscript, IRunEvent } from '../models';
import { Markdown } from '../safe';
import {
  addNote,
  emptyTranscript,
  ITranscript,
  reduce,
  restartStream,
  TranscriptItem
} from '../transcript';
import { ApprovalCard } from './ApprovalCard';
import { ToolRow } from './ChatView';

/** Props of {@link RunTranscript}. */
export interface IRunTranscriptProps {
  run: IAutomationRun;
  api: Pick<BettyAPI, 'automationRun'>;
  /** The transcript is read again each time this changes (while the run is under way). */
  follow: number;
}

/** The transcript of one run, read when it opens and again on each change of `follow`. */
export function RunTranscript({ run, api, follow }: IRunTranscriptProps): JSX.Element {
  const [answer, setAnswer] = React.useState<IAutomationRunTranscript | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  React.useEffect(() => {
    let current = true;
    api.automationRun(run.automation, run.id).then(
      read => {
        if (current) {
          setAnswer(read);
          setError(null);
        }
      },
      reason => {
        if (current) {
          setError((reason as Error).message ?? String(reason));
        }
      }
    );
    return () => {
      current = false;
    };
  }, [api, run.automation, run.id, follow]);
  const transcript = React.useMemo(() => answer && runTranscript(answer.events), [answer]);
  return (
    <div className="betty-AutomationTranscript" data-testid="betty-automation-transcript">
      {error && (
        <div className="betty-Tab-error" role="alert">
          {error}
        </div>
      )}
      {answer === null && error === null && <div className="betty-Note">Reading the run…</div>}
      {answer && answer.status !== 'done' && answer.result && (
        <div className="betty-Note betty-Note-error">{answer.result}</div>
      )}
      {transcript?.items.length === 0 && (
        <div className="betty-Note">Nothing is recorded for this run yet.</div>
      )}
      {transcript?.items.map(item => <RunItem key={item.key} item={item} />)}
    </div>
  );
}

/** One row of a run's transcript, read-only: its cards are answered above, not here. */
function RunItem({ item }: { item: TranscriptItem }): JSX.Element {
  switch (item.kind) {
    case 'message':
      return item.role === 'user' ? (
        <details className="betty-Message betty-Message-user">
          <summary>What the run was asked</summary>
          <div className="betty-Message-text">{item.text}</div>
        </details>
      ) : (
        <div className="betty-Message betty-Message-assistant">
          <Markdown text={item.text} />
        </div>
      );
    case 'tool':
      return <ToolRow item={item} />;
    case 'approval':
      return item.status === 'decided' ? (
        <ApprovalCard item={item} onDecide={() => undefined} />
      ) : (
        <div className="betty-Note">
          <code>{item.request.tool}</code>{' '}
          {item.status === 'pending'
            ? 'waits for a person (its card is above)'
            : 'was not answered before this attempt ended'}
        </div>
      );
    case 'note':
      return (
        <div className={`betty-Note betty-Note-${item.tone}`}>
          {item.text}
          {item.steps && (
            <ol className="betty-Note-steps">
              {item.steps.map((step, index) => (
                <li key={index}>{step}</li>
              ))}
            </ol>
          )}
        </div>
      );
  }
}

/**
 * A run's transcript built by the chat's reducer. `seq` starts again with each attempt, so
 * events are numbered through the whole run; where a new attempt begins, what the one before
 * left under way never finished.
 */
export function runTranscript(events: readonly IRunEvent[]): ITranscript {
  let transcript = emptyTranscript();
  let attempt: number | null = null;
  events.forEach((event, index) => {
    if (attempt !== null && event.attempt !== attempt) {
      transcript = addNote(
        restartStream(transcript, transcript.lastSeq - 1),
        `The server running it stopped; another resumed it (attempt ${event.attempt}).`,
        'info'
      );
    }
    attempt = event.attempt;
    transcript = reduce(transcript, { ...event, seq: index + 1 });
  });
  return transcript;
}
