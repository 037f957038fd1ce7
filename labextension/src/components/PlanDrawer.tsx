/**
 * The plan drawer: a plan's card, every step listed with its tool, tier, the steps it needs and
 * its own preview (as a card of its own would show it). While the card waits, each step is
 * granted, denied or edited (the single card's edit form, each edit checked and previewed again
 * by the server); a step that needs a denied step is marked as not going to run. Then Execute
 * plan, Step by step, or Deny plan. Once answered, the drawer follows each step's progress.
 */
import * as React from 'react';

import { editKey, EditingContext, IEditing } from '../editing';
import { APPROVING, IApprovalRequest, IPreview, PersonDecision } from '../events';
import {
  answerStep,
  PLAN_TOOL,
  planOfCall,
  blockedBy,
  editCheck,
  grantsAsProposed,
  initialAnswers,
  IPlanProgress,
  IPlanStep,
  IStepAnswer,
  latestUpdate,
  planAnswer,
  PlanRun,
  STATUS_WORDS,
  statusTrail,
  stepPreview,
  willNotRun
} from '../plans';
import { tierWords } from '../format';
import { visibleText } from '../safe';
import { IApprovalItem, ITranscript } from '../transcript';
import { decisionRecord } from './ApprovalCard';
import { EditForm } from './EditForm';
import { PreviewView } from './Preview';

/** Props of {@link PlanDrawer}. */
export interface IPlanDrawerProps {
  progress: IPlanProgress;
  /** The plan's card; null for a plan that was never asked (refused, or proposed only). */
  item: IApprovalItem | null;
  /** Send the answer; `args` (the plan answer) only with `edited`. A rejection shows its message. */
  onDecide: (decision: PersonDecision, args?: Record<string, unknown>) => Promise<void> | void;
}

/** A plan and its card, or (without a card) the plan as Betty checked it. */
export function PlanDrawer({ progress, item, onDecide }: IPlanDrawerProps): JSX.Element {
  const { plan } = progress;
  const status = item?.status ?? 'decided';
  const open = status !== 'decided';
  const [answers, setAnswers] = React.useState<IStepAnswer[]>(() => initialAnswers(plan));
  const [editing, setEditing] = React.useState<number | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const [sending, setSending] = React.useState(false);
  const blocked = willNotRun(plan, answers);
  const disabled = status === 'expired' || sending;

  const send = async (decision: PersonDecision, args?: Record<string, unknown>) => {
    setError(null);
    setSending(true);
    try {
      await onDecide(decision, args);
    } catch (reason) {
      setError((reason as Error).message ?? String(reason));
      setSending(false);
    }
  };
  const execute = (run: PlanRun) =>
    grantsAsProposed(answers, run)
      ? void send('approved')
      : void send('edited', planAnswer(answers, run));

  return (
    <div
      className={`betty-ApprovalCard betty-ApprovalCard-${open ? status : 'decided'} betty-PlanDrawer`}
      data-testid={item ? 'betty-approval-card' : 'betty-plan'}
      data-status={status}
      data-approval-id={item?.request.approval_id}
      data-tool={item?.request.tool}
      data-plan-id={plan.plan_id}
    >
      <div className="betty-ApprovalCard-head">
        <span className="betty-PlanDrawer-title">
          <code className="betty-ApprovalCard-tool">plan</code> {visibleText(plan.goal)}
        </span>
        <span className="betty-PlanDrawer-count">{plan.calls.length} steps</span>
      </div>
      {item && !open && (
        <div
          className="betty-PlanDrawer-decision"
          data-testid="betty-approval-record"
          data-decision={item.resolution?.decision ?? 'cancelled'}
        >
          {visibleText(
            decisionRecord(
              item.resolution?.decision ?? 'cancelled',
              item.resolution?.approver ?? null
            )
          )}
        </div>
      )}
      {status === 'expired' && (
        <div className="betty-ApprovalCard-expiredNote" data-testid="betty-approval-expired">
          Expired: the connection to Betty dropped, so this plan was cancelled. Ask again if it is
          still needed.
        </div>
      )}
      <ol className="betty-PlanDrawer-steps">
        {plan.calls.map(step => (
          <PlanStepRow
            key={step.index}
            step={step}
            item={item}
            progress={progress}
            answer={answers[step.index - 1]}
            blockedBy={blocked.has(step.index) ? blockedBy(plan, answers, step.index) : null}
            open={open}
            disabled={disabled}
            editing={editing === step.index}
            onAnswer={answer => {
              setError(null);
              setAnswers(current => answerStep(current, step.index, answer));
            }}
            onEdit={on => setEditing(on ? step.index : null)}
          />
        ))}
      </ol>
      {open && (
        <div className="betty-ApprovalCard-buttons">
          <button
            className="betty-Button betty-Button-accept"
            data-testid="betty-plan-execute"
            title="Run the granted steps in order, each without another card when called as shown"
            disabled={disabled || editing !== null}
            onClick={() => execute('whole')}
          >
            Execute plan
          </button>
          <button
            className="betty-Button"
            data-testid="betty-plan-step-by-step"
            title="Run the granted steps, each still asking you with its own card as it comes"
            disabled={disabled || editing !== null}
            onClick={() => execute('step_by_step')}
          >
            Step by step
          </button>
          <button
            className="betty-Button betty-Button-reject"
            data-testid="betty-plan-deny"
            title="Run none of the steps"
            disabled={disabled}
            onClick={() => void send('denied')}
          >
            Deny plan
          </button>
        </div>
      )}
      {error && (
        <div className="betty-ApprovalCard-error" role="alert" data-testid="betty-approval-error">
          {visibleText(error)}
        </div>
      )}
    </div>
  );
}

interface IPlanStepRowProps {
  step: IPlanStep;
  item: IApprovalItem | null;
  progress: IPlanProgress;
  answer: IStepAnswer;
  /** The step it needs that will not run, when this step will not run because of it. */
  blockedBy: number | null;
  open: boolean;
  disabled: boolean;
  editing: boolean;
  onAnswer: (answer: IStepAnswer) => void;
  onEdit: (on: boolean) => void;
}

/** One step: its head, its preview (or its edit form), its answer or its progress. */
function PlanStepRow(props: IPlanStepRowProps): JSX.Element {
  const { step, item, progress, answer, open, disabled, editing, onAnswer, onEdit } = props;
  const latest = latestUpdate(progress, step.index);
  const notGranted =
    item?.status === 'decided' && !APPROVING.includes(item.resolution?.decision ?? 'cancelled');
  const state = open
    ? openState(answer, props.blockedBy)
    : (latest?.status ?? (notGranted ? 'not_run' : step.status));
  const preview = answer.preview ?? step.preview;
  return (
    <li
      className={`betty-PlanDrawer-step betty-PlanDrawer-step-${state}`}
      data-testid="betty-plan-step"
      data-index={step.index}
      data-tool={step.tool}
      data-state={state}
    >
      <div className="betty-PlanDrawer-stepHead">
        <span className="betty-PlanDrawer-number">{step.index}.</span>
        <code className="betty-ApprovalCard-tool">{visibleText(step.tool)}</code>
        <span className={`betty-Tier betty-Tier-${step.tier}`}>{tierWords(step.tier)}</span>
        {step.depends_on.length > 0 && (
          <span className="betty-PlanDrawer-needs" data-testid="betty-plan-needs">
            needs step {step.depends_on.join(', ')}
          </span>
        )}
        <span className="betty-PlanDrawer-state" data-testid="betty-plan-state">
          {stateWords(state, props.blockedBy)}
        </span>
      </div>
      {step.reason && !open && !latest && (
        <div className="betty-PlanDrawer-why">{visibleText(step.reason)}</div>
      )}
      {editing && item ? (
        <StepEditForm
          item={item}
          progress={progress}
          step={step}
          args={answer.args ?? step.args}
          disabled={disabled}
          onApprove={(args, checked) => {
            onAnswer({
              decision: 'edited',
              args,
              preview: checked ?? undefined
            });
            onEdit(false);
          }}
          onCancel={() => onEdit(false)}
        />
      ) : (
        preview && <StepPreview preview={preview} folded={!open} />
      )}
      {!open && <StepProgress progress={progress} index={step.index} />}
      {open && !editing && (
        <div className="betty-ApprovalCard-buttons betty-PlanDrawer-stepButtons">
          <button
            className="betty-Button"
            data-testid="betty-plan-grant"
            aria-pressed={answer.decision !== 'denied'}
            title="Let this step run as shown"
            disabled={disabled}
            onClick={() =>
              onAnswer(answer.decision === 'edited' ? answer : { decision: 'approved' })
            }
          >
            Grant
          </button>
          <button
            className="betty-Button"
            data-testid="betty-plan-step-deny"
            aria-pressed={answer.decision === 'denied'}
            title="This step does not run, nor any step that needs it"
            disabled={disabled}
            onClick={() => onAnswer({ decision: 'denied' })}
          >
            Deny
          </button>
          <button
            className="betty-Button"
            data-testid="betty-plan-edit"
            title="Change this step's arguments; they are checked and previewed again"
            disabled={disabled}
            onClick={() => onEdit(true)}
          >
            Edit arguments
          </button>
        </div>
      )}
    </li>
  );
}

/** A step's preview: shown whole while the card waits, folded to its title once answered. */
function StepPreview({ preview, folded }: { preview: IPreview; folded: boolean }): JSX.Element {
  if (!folded) {
    return <PreviewView preview={preview} />;
  }
  return (
    <details className="betty-PlanDrawer-folded">
      <summary>{visibleText(preview.title || 'preview')}</summary>
      <PreviewView preview={preview} />
    </details>
  );
}

/** A step's state while the card waits: as answered so far. */
function openState(answer: IStepAnswer, blockedBy: number | null): string {
  if (answer.decision === 'denied') {
    return 'denied';
  }
  return blockedBy !== null ? 'will_not_run' : answer.decision;
}

function stateWords(state: string, blockedBy: number | null): string {
  if (state === 'will_not_run') {
    return `will not run: needs step ${blockedBy}, which will not run`;
  }
  return STATUS_WORDS[state as keyof typeof STATUS_WORDS] ?? state;
}

/** The step's progress since the answer: its statuses in order, and the latest line (why it failed). */
function StepProgress({ progress, index }: { progress: IPlanProgress; index: number }) {
  const trail = statusTrail(progress, index);
  const latest = latestUpdate(progress, index);
  if (!latest) {
    return null;
  }
  return (
    <div className="betty-PlanDrawer-progress" data-testid="betty-plan-progress">
      <span className="betty-PlanDrawer-trail">
        {trail.map(status => STATUS_WORDS[status] ?? status).join(' → ')}
      </span>
      {latest.summary && (
        <div
          className={`betty-PlanDrawer-summary betty-PlanDrawer-summary-${latest.status}`}
          data-testid="betty-plan-summary"
        >
          {visibleText(latest.summary)}
        </div>
      )}
    </div>
  );
}

interface IStepEditFormProps {
  item: IApprovalItem;
  progress: IPlanProgress;
  step: IPlanStep;
  args: Record<string, unknown>;
  disabled: boolean;
  onApprove: (args: Record<string, unknown>, preview: IPreview | null) => void;
  onCancel: () => void;
}

/**
 * A step's edit: the single card's edit form, its check sent as the plan's answer with this step
 * edited, and its preview the step's own from the server's answer.
 */
function StepEditForm(props: IStepEditFormProps): JSX.Element {
  const { item, progress, step, args, disabled, onApprove, onCancel } = props;
  const outer = React.useContext(EditingContext);
  const checked = React.useRef(new Map<string, IPreview>());
  const editing = React.useMemo<IEditing | null>(
    () =>
      outer && {
        ...outer,
        opensEditing: () => false,
        startEstimate: undefined,
        repreview: async (approvalId, edited) => {
          const whole = await outer.repreview(
            approvalId,
            editCheck(progress.plan, step.index, edited)
          );
          const preview = stepPreview(whole, step.index);
          checked.current.set(editKey(edited), preview);
          return preview;
        }
      },
    [outer, progress.plan, step.index]
  );
  const request: IApprovalRequest = {
    ...item.request,
    tool: step.tool,
    tier: step.tier,
    args,
    preview: step.preview ?? { kind: 'text', title: '', text: '', details: {} }
  };
  return (
    <EditingContext.Provider value={editing}>
      <EditForm
        request={request}
        disabled={disabled}
        onApprove={edited => onApprove(edited, checked.current.get(editKey(edited)) ?? null)}
        onCancel={onCancel}
      />
    </EditingContext.Provider>
  );
}

/** The plan of a plan card, when the transcript has it (the card is then shown as its drawer). */
export function planOfCard(transcript: ITranscript, item: IApprovalItem): IPlanProgress | null {
  return item.request.tool === PLAN_TOOL
    ? planOfCall(transcript.plans ?? {}, item.request.call_id)
    : null;
}

/**
 * The note of a plan: nothing where the plan has a card (its drawer shows it there), else the
 * plan as Betty checked it (refused, or proposed only).
 */
export function PlanNote({ transcript, planId }: { transcript: ITranscript; planId: string }) {
  const progress = transcript.plans?.[planId];
  if (!progress) {
    return null;
  }
  const asked = transcript.items.some(
    each => each.kind === 'approval' && each.request.call_id === progress.plan.call_id
  );
  return asked ? null : <PlanDrawer progress={progress} item={null} onDecide={() => undefined} />;
}
