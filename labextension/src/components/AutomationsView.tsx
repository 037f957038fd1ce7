/**
 * The Automations tab: a card per automation of the project (status, trigger, last run,
 * tokens and a sparkline of them, pause / resume / run now / kill), the approval cards its
 * running run waits on, and the transcript of each recent run.
 *
 * A run is a session of its own, so its cards never reach the chat: they are answered here,
 * over REST (`POST approvals/{id}`), found by asking `GET approvals?session=` for each
 * running run's session.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import * as React from 'react';

import { BettyAPI } from '../api';
import { Decision, IApprovalRequest, jobEnded, PersonDecision } from '../events';
import { cronWords, formatAgo, formatClock, formatTokens, formatWhen } from '../format';
import { IAutomation, IAutomationRun, IAutomationTrigger, IResolution } from '../models';
import { IApprovalItem, pendingApproval } from '../transcript';
import { ApprovalCard } from './ApprovalCard';
import { RunTranscript } from './RunTranscript';
import { Sparkline } from './Sparkline';

/** The calls the tab makes: `BettyAPI` itself, or a fake in tests. */
export type AutomationsAPI = Pick<
  BettyAPI,
  | 'automations'
  | 'automationRuns'
  | 'automationRun'
  | 'pauseAutomation'
  | 'resumeAutomation'
  | 'runAutomation'
  | 'killAutomation'
  | 'waitingApprovals'
  | 'decide'
>;

/** Props of {@link AutomationsView}. */
export interface IAutomationsViewProps {
  api: AutomationsAPI;
  /** Whether the tab is on screen: it refreshes every 10 s then. */
  visible: boolean;
  /** Whether the panel is on screen: the count of waiting cards is kept current, less often. */
  watching: boolean;
  /** How many approvals of automation runs wait for a person, after each refresh. */
  onPendingCount?: (count: number) => void;
}

/** Seconds between refreshes while the tab is on screen. */
export const REFRESH_SECONDS = 10;
/** Seconds between refreshes while only the panel is (for the tab's count of waiting cards). */
export const WATCH_SECONDS = 30;
/** Runs read per automation: the sparkline's points. */
export const RECENT_RUNS = 20;
/** Runs listed under a card. */
const RUNS_LISTED = 5;

/** An automation as its card shows it. */
interface IAutomationCard {
  automation: IAutomation;
  /** Newest first. */
  runs: IAutomationRun[];
  /** The approvals its running run waits on. */
  waiting: IWaiting[];
}

/** An approval a run waits on. */
interface IWaiting {
  runId: string;
  request: IApprovalRequest;
}

/** A card answered from this tab, kept folded under its automation while its run goes on. */
interface IAnswered {
  automationId: string;
  runId: string;
  item: IApprovalItem;
}

/** The Automations tab. */
export function AutomationsView(props: IAutomationsViewProps): JSX.Element {
  const { api, visible, watching, onPendingCount } = props;
  const [cards, setCards] = React.useState<IAutomationCard[] | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const [at, setAt] = React.useState<Date | null>(null);
  // Counts refreshes: an open transcript of a run under way reads it again on each.
  const [tick, setTick] = React.useState(0);
  const [answered, setAnswered] = React.useState<IAnswered[]>([]);

  const refresh = React.useCallback(async () => {
    try {
      const loaded = await loadCards(api);
      setCards(loaded);
      // An answered card is kept folded only while its run goes on.
      setAnswered(previous =>
        previous.filter(each => loaded.some(card => isRunning(card, each.runId)))
      );
      setError(null);
      setAt(new Date());
      setTick(count => count + 1);
    } catch (reason) {
      setError(oneLine(reason));
    }
  }, [api]);

  React.useEffect(() => {
    const seconds = visible ? REFRESH_SECONDS : watching ? WATCH_SECONDS : 0;
    if (seconds === 0) {
      return;
    }
    void refresh();
    const timer = setInterval(() => void refresh(), seconds * 1000);
    return () => clearInterval(timer);
  }, [visible, watching, refresh]);

  const pending = cards?.reduce((count, card) => count + card.waiting.length, 0) ?? 0;
  React.useEffect(() => {
    onPendingCount?.(pending);
  }, [pending, onPendingCount]);

  /** Do `action`, then show what it changed; a refusal stays on screen until the next refresh. */
  const act = async (action: () => Promise<unknown>) => {
    let failure: string | null = null;
    try {
      await action();
    } catch (reason) {
      failure = oneLine(reason);
    }
    await refresh();
    if (failure !== null) {
      setError(failure);
    }
  };
  const kill = async (automation: IAutomation) => {
    if (await confirmKill(automation)) {
      await act(() => api.killAutomation(automation.id));
    }
  };
  const decide = async (
    automationId: string,
    { runId, request }: IWaiting,
    decision: PersonDecision,
    args?: Record<string, unknown>
  ) => {
    const resolution = await api.decide(request.approval_id, decision, args, request.digest);
    setAnswered(previous => [
      ...previous,
      { automationId, runId, item: decidedItem(request, resolution) }
    ]);
    void refresh();
  };

  return (
    <div className="betty-Automations" data-testid="betty-automations">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">
          Automations of this project
          {at && <span className="betty-Tab-clock"> · {formatClock(at)}</span>}
        </span>
        <button
          className="betty-Button"
          data-testid="betty-automations-refresh"
          onClick={() => void refresh()}
        >
          Refresh
        </button>
      </div>
      {error && (
        <div
          className="betty-Tab-error betty-Automations-error"
          role="alert"
          title={error}
          data-testid="betty-automations-error"
        >
          {error}
        </div>
      )}
      {pending > 0 && (
        <div className="betty-Automations-pending" data-testid="betty-automations-pending">
          {pending === 1
            ? 'One action of an automation waits for your approval below.'
            : `${pending} actions of automations wait for your approval below.`}
        </div>
      )}
      {cards?.length === 0 && <NoAutomations />}
      <ul className="betty-Automations-list">
        {cards?.map(card => (
          <AutomationCard
            key={card.automation.id}
            card={card}
            api={api}
            tick={tick}
            answered={answered.filter(each => each.automationId === card.automation.id)}
            onPause={() => act(() => api.pauseAutomation(card.automation.id))}
            onResume={() => act(() => api.resumeAutomation(card.automation.id))}
            onRun={() => act(() => api.runAutomation(card.automation.id))}
            onKill={() => kill(card.automation)}
            onDecide={(waiting, decision, args) =>
              decide(card.automation.id, waiting, decision, args)
            }
          />
        ))}
      </ul>
    </div>
  );
}

function NoAutomations(): JSX.Element {
  return (
    <div className="betty-Tab-empty" data-testid="betty-automations-empty">
      No automation is defined in this project. An automation runs Betty by itself when a job
      ends, on a schedule, from a webhook or when you press Run now, for example to triage failed
      jobs. Define one with <code>POST /betty/api/automations</code>:{' '}
      <code>docs/automations.md</code> in Betty's documentation shows how, with examples.
    </div>
  );
}

/** Every automation with its recent runs and the approvals its running run waits on. */
/**
 * Each automation with its recent runs and the cards they wait on. A card is found by what waits
 * (every approval open now, matched to a run by its session), never by the run's status: a run
 * that ended may leave a card for a person (the babysitter's resubmission).
 */
async function loadCards(api: AutomationsAPI): Promise<IAutomationCard[]> {
  const [{ automations }, { approvals }] = await Promise.all([
    api.automations(),
    api.waitingApprovals()
  ]);
  return Promise.all(
    automations.map(async automation => {
      const { runs } = await api.automationRuns(automation.id, RECENT_RUNS);
      const waiting = runs.flatMap(run =>
        approvals
          .filter(request => request.session_id === run.session_id)
          .map(request => ({ runId: run.id, request }))
      );
      return { automation, runs, waiting };
    })
  );
}

async function confirmKill(automation: IAutomation): Promise<boolean> {
  const result = await showDialog({
    title: `Kill ${automation.name}?`,
    body:
      'Its queued runs end now and its running run stops within the step it is in: a tool ' +
      'that is executing finishes first, nothing after it runs, an open approval is cancelled.',
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Kill' })]
  });
  return result.button.accept;
}

interface IAutomationCardProps {
  card: IAutomationCard;
  api: AutomationsAPI;
  tick: number;
  answered: IAnswered[];
  onPause: () => Promise<void>;
  onResume: () => Promise<void>;
  onRun: () => Promise<void>;
  onKill: () => Promise<void>;
  onDecide: (
    waiting: IWaiting,
    decision: PersonDecision,
    args?: Record<string, unknown>
  ) => Promise<void>;
}

function AutomationCard(props: IAutomationCardProps): JSX.Element {
  const { card, answered } = props;
  const { automation, runs, waiting } = card;
  const [busy, setBusy] = React.useState(false);
  const [openRun, setOpenRun] = React.useState<string | null>(null);
  const held = automation.status === 'paused' || automation.status === 'error-suspended';
  const enable = automation.status === 'paused' && neverRan(runs);
  const underWay = automation.status === 'active' || runs.some(isUnderWay);
  const press = (action: () => Promise<void>) => async () => {
    setBusy(true);
    try {
      await action();
    } finally {
      setBusy(false);
    }
  };
  return (
    <li
      className={`betty-AutomationCard betty-AutomationCard-${automation.status}`}
      data-testid="betty-automation-card"
      data-id={automation.id}
      data-status={automation.status}
    >
      <div className="betty-AutomationCard-head">
        <span className="betty-AutomationCard-name">{automation.name}</span>
        <span
          className={`betty-AutomationStatus betty-AutomationStatus-${automation.status}`}
          data-testid="betty-automation-status"
        >
          {automation.status}
        </span>
      </div>
      <div className="betty-JobRow-sub" data-testid="betty-automation-trigger">
        {triggerWords(automation.trigger)}
        {automation.next_due !== null && ` · next ${formatWhen(automation.next_due)}`}
      </div>
      {automation.status === 'error-suspended' && (
        <div className="betty-AutomationCard-suspended">
          Suspended after {automation.failures} failed runs in a row: resume it to let it run again.
        </div>
      )}
      <div className="betty-AutomationCard-last">
        <span data-testid="betty-automation-last-run">{lastRunWords(runs[0])}</span>
        {runs.length > 0 && <TokensLine runs={runs} />}
      </div>
      <div className="betty-AutomationCard-buttons">
        {held ? (
          <button
            className="betty-Button betty-Button-accept"
            data-testid="betty-automation-resume"
            disabled={busy}
            title={
              enable
                ? 'Turn it on: its schedule and job triggers start firing'
                : 'Let it work again, from where it waited'
            }
            onClick={press(props.onResume)}
          >
            {enable ? 'Enable' : 'Resume'}
          </button>
        ) : (
          <button
            className="betty-Button"
            data-testid="betty-automation-pause"
            title="Stop its triggers; a running run waits before its next tool call"
            disabled={busy}
            onClick={press(props.onPause)}
          >
            Pause
          </button>
        )}
        <button
          className="betty-Button"
          data-testid="betty-automation-run-now"
          title={
            automation.status === 'error-suspended' ? 'Resume it first' : 'Queue a run now'
          }
          disabled={busy || automation.status === 'error-suspended'}
          onClick={press(props.onRun)}
        >
          Run now
        </button>
        {underWay && (
          <button
            className="betty-Button betty-Button-reject"
            data-testid="betty-automation-kill"
            title="End its queued runs and stop the running one within its step"
            disabled={busy}
            onClick={press(props.onKill)}
          >
            Kill
          </button>
        )}
      </div>
      {(waiting.length > 0 || answered.length > 0) && (
        <div className="betty-AutomationCard-approvals" data-testid="betty-automation-approvals">
          {waiting.map(each => (
            <ApprovalCard
              key={each.request.approval_id}
              item={pendingApproval(each.request)}
              onDecide={(decision, args) => props.onDecide(each, decision, args)}
            />
          ))}
          {answered.map(each => (
            <ApprovalCard key={each.item.key} item={each.item} onDecide={() => undefined} />
          ))}
        </div>
      )}
      {runs.length > 0 && (
        <ul className="betty-AutomationRuns">
          {runs.slice(0, RUNS_LISTED).map(run => (
            <RunRow
              key={run.id}
              run={run}
              open={openRun === run.id}
              api={props.api}
              tick={props.tick}
              onToggle={() => setOpenRun(openRun === run.id ? null : run.id)}
            />
          ))}
        </ul>
      )}
    </li>
  );
}

interface IRunRowProps {
  run: IAutomationRun;
  open: boolean;
  api: AutomationsAPI;
  tick: number;
  onToggle: () => void;
}

function RunRow({ run, open, api, tick, onToggle }: IRunRowProps): JSX.Element {
  return (
    <li>
      <button
        className="betty-AutomationRun"
        data-testid="betty-automation-run"
        data-run-id={run.id}
        data-status={run.status}
        aria-expanded={open}
        title={run.result || undefined}
        onClick={onToggle}
      >
        <span className="betty-AutomationRun-mark">{open ? '▾' : '▸'}</span>
        <span className={`betty-RunStatus betty-RunStatus-${run.status}`}>{run.status}</span>
        {run.code && <span className="betty-AutomationRun-code">{run.code}</span>}
        <span className="betty-JobRow-sub">
          {run.trigger} · {formatAgo(runTime(run))} · {formatTokens(run.tokens)} tokens
        </span>
      </button>
      {open && <RunTranscript run={run} api={api} follow={isUnderWay(run) ? tick : 0} />}
    </li>
  );
}

/** Tokens of the recent runs (newest first), oldest on the left. */
function TokensLine({ runs }: { runs: IAutomationRun[] }): JSX.Element {
  const tokens = runs.map(run => run.tokens).reverse();
  return (
    <Sparkline
      values={tokens}
      label={`tokens of the last ${runs.length} runs, at most ${formatTokens(Math.max(...tokens))}`}
      testId="betty-automation-sparkline"
    />
  );
}

/**
 * An automation's trigger in words: `when a job ends FAILED, OUT_OF_MEMORY`,
 * `daily at 08:00 (cron 0 8 * * *)`, `webhook`, `manual`.
 */
export function triggerWords(trigger: IAutomationTrigger): string {
  switch (trigger.kind) {
    case 'job': {
      const states = trigger.states ?? [];
      const where = trigger.cluster ? ` on ${trigger.cluster}` : '';
      if (states.length === 0) {
        return `when a job${where} changes state`;
      }
      const verb = states.every(jobEnded) ? 'ends' : 'becomes';
      return `when a job${where} ${verb} ${states.join(', ')}`;
    }
    case 'schedule': {
      const cron = `cron ${trigger.cron ?? ''}`.trim();
      const words = cronWords(trigger.cron ?? '');
      return words ? `${words} (${cron})` : cron;
    }
    case 'webhook':
      return 'webhook';
    default:
      return 'manual';
  }
}

/** The newest run in one line: `last run done · 5 min ago · 12.3k tokens`. */
export function lastRunWords(run: IAutomationRun | undefined): string {
  if (run === undefined) {
    return 'never run';
  }
  const code = run.code ? ` (${run.code})` : '';
  const waits = run.paused_before ? ` · waits before ${run.paused_before}` : '';
  const used = `${formatTokens(run.tokens)} tokens`;
  return `last run ${run.status}${code} · ${formatAgo(runTime(run))} · ${used}${waits}`;
}

function runTime(run: IAutomationRun): number {
  return run.ended ?? run.started ?? run.created;
}

/** No run of it ever started: a paused automation like that was never on, so it is enabled, not resumed. */
function neverRan(runs: IAutomationRun[]): boolean {
  return runs.every(run => run.started === null);
}

function isUnderWay(run: IAutomationRun): boolean {
  return run.status === 'running' || run.status === 'queued';
}

function isRunning(card: IAutomationCard, runId: string): boolean {
  return card.runs.some(run => run.id === runId && run.status === 'running');
}

function decidedItem(request: IApprovalRequest, resolution: IResolution): IApprovalItem {
  return {
    kind: 'approval',
    key: `answered-${request.approval_id}`,
    request,
    status: 'decided',
    resolution: {
      approval_id: request.approval_id,
      call_id: request.call_id,
      decision: resolution.decision as Decision,
      approver: resolution.approver,
      args: resolution.args
    }
  };
}

function oneLine(reason: unknown): string {
  const text = reason instanceof Error ? reason.message : String(reason);
  return text.replace(/\s+/g, ' ').trim();
}
