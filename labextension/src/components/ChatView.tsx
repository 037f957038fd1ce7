/**
 * The chat: the transcript (messages, tool rows, approval cards, notes) and the prompt box
 * with its Send and Stop buttons.
 */
import * as React from 'react';

import { IContextBulletin, IModelSetup } from '../contract/serverApi';
import { PersonDecision } from '../events';
import { formatMilliseconds, summaryParts } from '../format';
import { revealCard } from '../reveal';
import { Markdown, ServerLink, visibleText } from '../safe';
import { IMessageItem, INoteItem, IToolItem, ITranscript, TranscriptItem } from '../transcript';
import { NotebookContext } from '../notebookContext';
import { ApprovalCard } from './ApprovalCard';
import { PlanDrawer, planOfCard, PlanNote } from './PlanDrawer';
import { ContextChip, SentChip, useBulletin } from './ContextChip';
import { IRunNotebookHooks, RunOnCluster } from './RunNotebookForm';

/** Props of {@link ChatView}. */
export interface IChatViewProps {
  transcript: ITranscript;
  /** Whether the session has a chat model (null: not known yet). */
  hasModel: boolean | null;
  /** The chat model's name as its answers carry it (null: none, or not known yet). */
  modelName?: string | null;
  /** How to configure a model, when the server has none: shown in place of the welcome, and Send is off. */
  modelSetup?: IModelSetup | null;
  /** The Jupyter server's base URL, for the link to Betty's page about models. */
  baseUrl?: string;
  /** Where the person works now: shown as a chip, sent with the message unless removed. */
  context?: NotebookContext | null;
  onSend: (prompt: string, context: IContextBulletin | null) => Promise<void> | void;
  onStop: () => void;
  /** Answer card `approvalId`; `digest` names the card the person saw (another card's answer is refused). */
  onDecide: (
    approvalId: string,
    decision: PersonDecision,
    args?: Record<string, unknown>,
    digest?: string
  ) => Promise<void> | void;
  /** Open a workspace file (an experiment's notebook or page). */
  onOpen: (path: string) => void;
  /** "Run on cluster…" for the open notebook (absent: not offered). */
  runNotebook?: IRunNotebookHooks;
}

/** The chat tab. */
export function ChatView(props: IChatViewProps): JSX.Element {
  const { transcript } = props;
  const list = React.useRef<HTMLDivElement>(null);
  const last = transcript.items[transcript.items.length - 1];
  const lastText = last?.kind === 'message' ? last.text.length : 0;

  React.useEffect(() => {
    const node = list.current;
    if (node) {
      node.scrollTop = node.scrollHeight;
    }
  }, [transcript.items.length, lastText]);

  // A card that arrives is brought to the person: its buttons in view, Approve focused.
  const pending = pendingIds(transcript);
  const seen = React.useRef(new Set<string>());
  React.useEffect(() => {
    // Only a card that just arrived: once one is answered, focus does not jump to another.
    const arrived = pending.filter(id => !seen.current.has(id)).pop();
    pending.forEach(id => seen.current.add(id));
    const node = list.current;
    const card = Array.from(
      node?.querySelectorAll<HTMLElement>('[data-testid="betty-approval-card"]') ?? []
    ).find(each => each.dataset.approvalId === arrived);
    if (node && card) {
      const panel = node.closest<HTMLElement>('.betty-App') ?? node.closest<HTMLElement>('.betty-Chat');
      return revealCard(node, card, panel ?? node); // it stops keeping the card in view when the cards change
    }
    return undefined;
  }, [pending.join(' ')]); // the ids, not the list: a new list of the same cards changes nothing

  return (
    <div className="betty-Chat" data-testid="betty-chat">
      <div className="betty-Chat-transcript" ref={list} data-testid="betty-transcript">
        {props.hasModel === false ? (
          <NoModel setup={props.modelSetup ?? null} baseUrl={props.baseUrl ?? ''} />
        ) : (
          transcript.items.length === 0 && <ChatWelcome modelName={props.modelName ?? null} />
        )}
        {transcript.items.map(item => (
          <TranscriptRow key={item.key} item={item} {...props} />
        ))}
        {transcript.busy && (
          <div className="betty-Chat-working" data-testid="betty-working">
            Betty is working…
          </div>
        )}
      </div>
      {props.runNotebook && (
        <RunOnCluster context={props.context ?? null} hooks={props.runNotebook} />
      )}
      <Composer
        busy={transcript.busy}
        noModel={props.hasModel === false}
        context={props.context ?? null}
        onSend={props.onSend}
        onStop={props.onStop}
      />
    </div>
  );
}

/** The approval ids of the cards waiting for an answer, oldest first. */
function pendingIds(transcript: ITranscript): string[] {
  return transcript.items.flatMap(item =>
    item.kind === 'approval' && item.status === 'pending' ? [item.request.approval_id] : []
  );
}

/** The name the offline demo model's answers carry starts so (betty_jupyter/agent/demo_model.py). */
const DEMO_MODEL = 'betty-demo';

function ChatWelcome({ modelName }: { modelName: string | null }): JSX.Element {
  return (
    <div className="betty-Chat-welcome">
      <p>
        Ask Betty about your cluster: the queue, why a job waits, how much GPU memory a model needs,
        or to draft and submit a batch script. Anything that changes the cluster waits for your
        approval here.
      </p>
      {modelName?.startsWith(DEMO_MODEL) && (
        <p className="betty-Chat-demoModel" data-testid="betty-demo-model">
          Betty&apos;s <strong>offline demo model</strong> answers here: a few rules, not a language
          model. Try &ldquo;what partitions does this cluster have?&rdquo;, &ldquo;submit a test
          job&rdquo;, &ldquo;why did my job fail?&rdquo; or &ldquo;how much GPU memory does
          Llama-3.1-8B need for lora?&rdquo;. A real model answers anything: docs/llm.md says how.
        </p>
      )}
    </div>
  );
}

/** The chat without a model: what to set, in which file, the restart, and Betty's page about it. */
function NoModel({ setup, baseUrl }: { setup: IModelSetup | null; baseUrl: string }): JSX.Element {
  return (
    <div className="betty-Chat-welcome betty-Chat-noModel" data-testid="betty-no-model" role="status">
      <p>
        <strong>No chat model is configured on this server</strong>, so Betty cannot answer prompts
        yet. The Jobs, Cluster, Experiments and GPU tabs work without one.
      </p>
      {setup && (
        <>
          <p>To chat, write a setting like this one into</p>
          <code className="betty-Chat-noModel-file" data-testid="betty-no-model-file">
            {visibleText(setup.config_file)}
          </code>
          <pre className="betty-Preview-code" data-testid="betty-no-model-setting">
            {visibleText(setup.setting)}
          </pre>
          <p>
            {setup.restart && 'then restart JupyterLab: it reads the setting when it starts. '}
            To try Betty without a key, set <code>&quot;model&quot;: &quot;betty-demo&quot;</code>
            {' '}(its offline demo model) instead.{' '}
            <ServerLink baseUrl={baseUrl} path={setup.docs_url} testId="betty-no-model-docs">
              {visibleText(setup.docs)}
            </ServerLink>{' '}
            says which servers work and how.
          </p>
        </>
      )}
    </div>
  );
}

type RowProps = IChatViewProps & { item: TranscriptItem };

function TranscriptRow({ item, transcript, onDecide, onOpen }: RowProps): JSX.Element | null {
  switch (item.kind) {
    case 'message':
      return <MessageRow item={item} />;
    case 'tool':
      return <ToolRow item={item} />;
    case 'approval': {
      const plan = planOfCard(transcript, item);
      if (plan) {
        return (
          <PlanDrawer
            progress={plan}
            item={item}
            onDecide={(decision, args) =>
              onDecide(item.request.approval_id, decision, args, item.request.digest)
            }
          />
        );
      }
      return (
        <ApprovalCard
          item={item}
          onDecide={(decision, args) =>
              onDecide(item.request.approval_id, decision, args, item.request.digest)
            }
        />
      );
    }
    case 'note':
      return item.planId ? (
        <PlanNote transcript={transcript} planId={item.planId} />
      ) : (
        <NoteRow item={item} onOpen={onOpen} />
      );
  }
}

function MessageRow({ item }: { item: IMessageItem }): JSX.Element {
  return (
    <>
      <div
        className={`betty-Message betty-Message-${item.role}`}
        data-testid={`betty-message-${item.role}`}
        data-streaming={item.streaming ? 'true' : 'false'}
      >
        {item.role === 'assistant' ? (
          <Markdown text={item.text} streaming={item.streaming} />
        ) : (
          <div className="betty-Message-text">{item.text}</div>
        )}
      </div>
      {item.role === 'user' && item.context ? <SentChip bulletin={item.context} /> : null}
      {item.role === 'assistant' && item.model ? (
        <div className="betty-Message-model" data-testid="betty-message-model" title="the model that wrote this">
          {item.model}
        </div>
      ) : null}
    </>
  );
}

/**
 * A tool call as one compact row — its mark, the tool, its arguments in short and the first line
 * of its summary — that unfolds to its arguments one per line and the rest of its summary (a
 * table, say) as it is, scrolling sideways inside the row when wider than the panel.
 */
export function ToolRow({ item }: { item: IToolItem }): JSX.Element {
  const state =
    item.result !== null
      ? item.result.ok
        ? 'ok'
        : 'failed'
      : item.notRun !== null
        ? 'not-run'
        : 'running';
  const mark = { running: '…', ok: '✓', failed: '✗', 'not-run': '–' }[state];
  const summary = item.result ? summaryParts(item.result.summary) : null;
  return (
    <details
      className={`betty-ToolRow betty-ToolRow-${state}`}
      data-testid="betty-tool-row"
      data-call-id={item.callId}
      data-state={state}
    >
      <summary>
        <span className="betty-ToolRow-mark">{mark}</span> <code>{item.tool}</code>{' '}
        <span className="betty-ToolRow-args">{visibleText(compactArgs(item.args, 48))}</span>
        {summary && (
          <span className="betty-ToolRow-summary"> — {visibleText(summary.headline)}</span>
        )}
        {item.notRun && (
          <span className="betty-ToolRow-summary">
            {' '}
            — not run: {item.notRun.replace(/_/g, ' ')}
          </span>
        )}
      </summary>
      <ToolArgs args={item.args} />
      {item.result && summary && (
        <div className="betty-ToolRow-result">
          {summary.rest && (
            <pre className="betty-Preview-code betty-ToolRow-table" data-testid="betty-tool-table">
              {visibleText(summary.rest)}
            </pre>
          )}
          {item.result.artifacts?.length > 0 && (
            <div className="betty-ToolRow-artifacts">wrote: {item.result.artifacts.join(', ')}</div>
          )}
          <div className="betty-ToolRow-duration">
            took {formatMilliseconds(item.result.duration_ms ?? 0)}
          </div>
        </div>
      )}
    </details>
  );
}

/** A call's arguments, one per line: `job id  42`; a script keeps its lines. */
function ToolArgs({ args }: { args: Record<string, unknown> }): JSX.Element | null {
  const entries = Object.entries(args).filter(([, value]) => value !== null && value !== undefined);
  if (entries.length === 0) {
    return null;
  }
  return (
    <dl className="betty-ToolRow-argList">
      {entries.map(([name, value]) => (
        <React.Fragment key={name}>
          <dt>{visibleText(name.replace(/_/g, ' '))}</dt>
          <dd>
            {visibleText(typeof value === 'string' ? value : JSON.stringify(value))}
          </dd>
        </React.Fragment>
      ))}
    </dl>
  );
}

/** Arguments in one short line, those left unset out: `job_id=123, stream=out`. */
export function compactArgs(args: Record<string, unknown>, limit = 80): string {
  const text = Object.entries(args)
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([name, value]) => `${name}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(', ')
    .replace(/\s+/g, ' ');
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function NoteRow({ item, onOpen }: { item: INoteItem; onOpen: (path: string) => void }) {
  return (
    <div className={`betty-Note betty-Note-${item.tone}`} data-testid={`betty-note-${item.tone}`}>
      <span>{item.text}</span>
      {item.steps && (
        <ol className="betty-Note-steps">
          {item.steps.map((step, i) => (
            <li key={i}>{step}</li>
          ))}
        </ol>
      )}
      {item.job?.notebook && (
        <button className="betty-Link" onClick={() => onOpen(item.job!.notebook!)}>
          notebook
        </button>
      )}
      {item.job?.page && (
        <button className="betty-Link" onClick={() => onOpen(item.job!.page!)}>
          page
        </button>
      )}
    </div>
  );
}

interface IComposerProps {
  busy: boolean;
  /** No model on the server: nothing can be sent (what to set is shown above). */
  noModel: boolean;
  context: NotebookContext | null;
  onSend: (prompt: string, context: IContextBulletin | null) => Promise<void> | void;
  onStop: () => void;
}

function Composer({ busy, noModel, context, onSend, onStop }: IComposerProps): JSX.Element {
  const [prompt, setPrompt] = React.useState('');
  const [error, setError] = React.useState<string | null>(null);
  const bulletin = useBulletin(context);
  const [removed, setRemoved] = React.useState(false);
  const shown = removed ? null : bulletin; // what the chip shows is exactly what is sent
  const send = async () => {
    const text = prompt.trim();
    if (!text || noModel) {
      return;
    }
    setError(null);
    try {
      await onSend(text, shown);
      setPrompt('');
      setRemoved(false);
    } catch (reason) {
      setError((reason as Error).message ?? String(reason));
    }
  };
  return (
    <div className="betty-Composer">
      {shown && <ContextChip bulletin={shown} onRemove={() => setRemoved(true)} />}
      <textarea
        className="betty-Composer-input"
        data-testid="betty-prompt"
        placeholder={
          noModel
            ? 'Betty needs a chat model to answer: see above'
            : 'Ask Betty… (Enter sends, Shift+Enter for a new line)'
        }
        disabled={noModel}
        value={prompt}
        rows={3}
        onChange={event => setPrompt(event.target.value)}
        onKeyDown={event => {
          if (event.key === 'Enter' && !event.shiftKey) {
            event.preventDefault();
            void send();
          }
        }}
      />
      <div className="betty-Composer-buttons">
        <button
          className="betty-Button betty-Button-accept"
          data-testid="betty-send"
          disabled={busy || noModel || prompt.trim() === ''}
          title={noModel ? 'No chat model is configured on this server' : undefined}
          onClick={() => void send()}
        >
          Send
        </button>
        <button
          className="betty-Button betty-Button-reject"
          data-testid="betty-stop"
          disabled={!busy}
          onClick={onStop}
        >
          Stop
        </button>
      </div>
      {error && (
        <div className="betty-Composer-error" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}
