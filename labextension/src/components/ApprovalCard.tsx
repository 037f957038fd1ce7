/**
 * The approval card: what Betty wants to do (tool, tier, reason, the exact preview) and
 * the person's answer. Once decided it folds into a one-line record.
 */
import * as React from 'react';

import { EditingContext } from '../editing';
import { asksEndMail, offersEndMail, withEndMail } from '../endMail';
import { tierWords } from '../format';
import { APPROVING, Decision, IPreview, ISecondApproval, PersonDecision } from '../events';
import { visibleText } from '../safe';
import { IApprovalItem } from '../transcript';
import { argumentTexts, EditForm } from './EditForm';
import { PreviewView } from './Preview';

/** Props of {@link ApprovalCard}. */
export interface IApprovalCardProps {
  item: IApprovalItem;
  /**
   * Send the person's answer; `args` only with `edited`. A rejected promise shows its
   * message on the card and lets the person answer again.
   */
  onDecide: (decision: PersonDecision, args?: Record<string, unknown>) => Promise<void> | void;
}

/** One approval card, pending, expired or decided. */
export function ApprovalCard({ item, onDecide }: IApprovalCardProps): JSX.Element {
  const { request, status } = item;
  return (
    <div
      className={`betty-ApprovalCard betty-ApprovalCard-${status}`}
      data-testid="betty-approval-card"
      data-status={status}
      data-approval-id={request.approval_id}
      data-tool={request.tool}
    >
      {status === 'decided' ? (
        <DecidedRecord item={item} />
      ) : (
        <PendingCard item={item} onDecide={onDecide} />
      )}
    </div>
  );
}

/** The one-line record of an answered approval, e.g. "approved by alice". */
export function decisionRecord(decision: Decision | string, approver: string | null): string {
  const by = approver ? ` by ${approver}` : '';
  switch (decision) {
    case 'approved':
      return `approved${by}`;
    case 'approved_for_session':
      return `approved for this session${by}`;
    case 'edited':
      return `edited and approved${by}`;
    case 'denied':
      return `denied${by}`;
    case 'timed_out':
      return 'timed out: nobody answered in time';
    case 'cancelled':
      return 'cancelled: nobody could see the card (the panel was disconnected or the turn stopped)';
    default:
      return `${decision}${by}`;
  }
}

function DecidedRecord({ item }: { item: IApprovalItem }): JSX.Element {
  const resolution = item.resolution;
  const decision = resolution?.decision ?? 'cancelled';
  const approving = APPROVING.includes(decision);
  return (
    <details className="betty-ApprovalCard-record">
      <summary data-testid="betty-approval-record" data-decision={decision}>
        <span className={`betty-ApprovalCard-mark ${approving ? 'betty-ok' : 'betty-not-ok'}`}>
          {approving ? '✓' : '✗'}
        </span>{' '}
        <code>{item.request.tool}</code> {decisionRecord(decision, resolution?.approver ?? null)}
        {item.second && <SecondApprover second={item.second} />}
      </summary>
      <PreviewView preview={item.request.preview} />
      {decision === 'edited' && resolution?.args && <EditedArguments args={resolution.args} />}
    </details>
  );
}

/**
 * Where a job above the site's limits stands once the person approved it: "waiting for a second
 * approver (hpcadmin or ops) since 14:02", then "approved by hpcadmin (second approver)", or
 * why it does not run, in one line.
 */
export function secondApproverLine(second: ISecondApproval, now: Date = new Date()): string {
  switch (second.state) {
    case 'waiting': {
      const who = second.approvers.join(' or ');
      return `waiting for a second approver (${who}) since ${clockTime(second.since, now)}`;
    }
    case 'approved':
      return `approved by ${second.approver ?? 'a second approver'} (second approver)`;
    case 'denied':
      return `not run: ${second.why || `denied by ${second.approver ?? 'the second approver'}`}`;
    default:
      return `not run: ${second.why || 'the second approver did not approve it'}`;
  }
}

/** `14:02` for a time today, else `Nov 29 14:02`; `since` in unix seconds. */
function clockTime(since: number, now: Date): string {
  const at = new Date(since * 1000);
  const time = at.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit'
  });
  return at.toDateString() === now.toDateString()
    ? time
    : `${at.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

function SecondApprover({ second }: { second: ISecondApproval }): JSX.Element {
  const tone =
    second.state === 'waiting'
      ? 'betty-waiting'
      : second.state === 'approved'
        ? 'betty-ok'
        : 'betty-not-ok';
  return (
    <span
      className={`betty-ApprovalCard-second ${tone}`}
      data-testid="betty-second-approver"
      data-state={second.state}
      role={second.state === 'waiting' ? 'status' : undefined}
    >
      {' · '}
      {visibleText(secondApproverLine(second))}
    </span>
  );
}

/** The arguments a person approved with edits, each under its name, its lines as lines. */
function EditedArguments({ args }: { args: Record<string, unknown> }): JSX.Element {
  return (
    <div className="betty-ApprovalCard-edited" data-testid="betty-edited-args">
      {Object.entries(argumentTexts(args)).map(([name, text]) => (
        <div key={name}>
          <div className="betty-ApprovalCard-argumentName">{visibleText(name)}</div>
          <pre className="betty-Preview-code">{visibleText(text)}</pre>
        </div>
      ))}
    </div>
  );
}

/**
 * When and where a submission would start ("starts ~in 12 min on gpu (a100); ~3 h on gpu (h100)"),
 * asked once the card is shown: nothing while it is asked or when it cannot be had, and the
 * buttons never wait for it.
 */
function StartEstimate({ approvalId }: { approvalId: string }): JSX.Element | null {
  const edits = React.useContext(EditingContext);
  const [line, setLine] = React.useState('');
  React.useEffect(() => {
    let shown = true;
    edits?.startEstimate?.(approvalId).then(
      text => shown && setLine(text),
      () => undefined
    );
    return () => {
      shown = false;
    };
  }, [edits, approvalId]);
  if (!line) {
    return null;
  }
  return (
    <div className="betty-ApprovalCard-start" data-testid="betty-approval-start">
      {visibleText(line)}
    </div>
  );
}

/** The end-mail choice of a card: what it asks now, and the edit (checked again) when the person changed it. */
interface IEndMailChoice {
  offered: boolean;
  on: boolean;
  /** The edited arguments once the server previewed them; null while unchanged (or not yet checked). */
  args: Record<string, unknown> | null;
  preview: IPreview | null;
  /** The server's one line when it refused the change. */
  problem: string | null;
  /** Whether Approve waits: the change is being checked, or was refused. */
  holds: boolean;
  choose: (on: boolean) => void;
}

function useEndMailChoice(item: IApprovalItem): IEndMailChoice {
  const { request } = item;
  const edits = React.useContext(EditingContext);
  const asked = asksEndMail(request.args);
  const [on, setOn] = React.useState(asked);
  const [checked, setChecked] = React.useState<{
    on: boolean;
    args: Record<string, unknown>;
    preview: IPreview | null;
    problem: string | null;
  } | null>(null);
  const choose = (wanted: boolean) => {
    setOn(wanted);
    if (wanted === asked || edits === null) {
      setChecked(null);
      return;
    }
    const args = withEndMail(request.args, wanted);
    setChecked({ on: wanted, args, preview: null, problem: null });
    edits.repreview(request.approval_id, args).then(
      preview => setChecked(now => (now?.on === wanted ? { ...now, preview } : now)),
      (reason: Error) =>
        setChecked(now =>
          now?.on === wanted ? { ...now, problem: reason.message ?? String(reason) } : now
        )
    );
  };
  const current = checked?.on === on ? checked : null;
  return {
    offered: edits !== null && offersEndMail(request),
    on,
    args: current?.preview ? current.args : null,
    preview: current?.preview ?? null,
    problem: current?.problem ?? null,
    holds: current !== null && current.preview === null,
    choose
  };
}

/** "E-mail me when it ends": Slurm's end mail, to the address it has for the login; a change is checked again. */
function EndMailChoice({
  mail,
  disabled
}: {
  mail: IEndMailChoice;
  disabled: boolean;
}): JSX.Element {
  return (
    <div className="betty-ApprovalCard-endMail">
      <label title="Slurm mails the address it has for your login when the job ends (#SBATCH --mail-type=END)">
        <input
          type="checkbox"
          data-testid="betty-end-mail"
          checked={mail.on}
          disabled={disabled}
          onChange={event => mail.choose(event.target.checked)}
        />{' '}
        e-mail me when it ends
      </label>
      {mail.problem !== null && (
        <div className="betty-ApprovalCard-error" role="alert" data-testid="betty-end-mail-problem">
          {visibleText(mail.problem)}
        </div>
      )}
    </div>
  );
}

function PendingCard({ item, onDecide }: IApprovalCardProps): JSX.Element {
  const { request, status } = item;
  const edits = React.useContext(EditingContext);
  const [editing, setEditing] = React.useState(() => edits?.opensEditing(request) ?? false);
  const [error, setError] = React.useState<string | null>(null);
  const [sending, setSending] = React.useState(false);
  const editButton = React.useRef<HTMLButtonElement>(null);
  const [backToEdit, setBackToEdit] = React.useState(false);
  React.useEffect(() => {
    // A form closed (Cancel, Esc) gives focus back to the Edit button it was opened from.
    if (!editing && backToEdit) {
      editButton.current?.focus();
      setBackToEdit(false);
    }
  }, [editing, backToEdit]);
  const expired = status === 'expired';
  const mail = useEndMailChoice(item);
  const disabled = expired || sending;

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

  return (
    <>
      <div className="betty-ApprovalCard-head">
        <code className="betty-ApprovalCard-tool">{request.tool}</code>
        <span className={`betty-Tier betty-Tier-${request.tier}`} data-testid="betty-approval-tier">
          {tierWords(request.tier)}
        </span>
      </div>
      <div className="betty-ApprovalCard-reason">{visibleText(request.reason)}</div>
      {!(editing && !expired) && <PreviewView preview={mail.preview ?? request.preview} />}
      {!expired && !editing && mail.offered && <EndMailChoice mail={mail} disabled={disabled} />}
      {!expired && request.tool === 'cluster_submit' && (
        <StartEstimate approvalId={request.approval_id} />
      )}
      {expired && (
        <div className="betty-ApprovalCard-expiredNote" data-testid="betty-approval-expired">
          Expired: the connection to Betty dropped, so this request was cancelled. Ask again if it
          is still needed.
        </div>
      )}
      {editing && !expired ? (
        <EditForm
          request={request}
          disabled={disabled}
          onApprove={args => void send('edited', args)}
          onCancel={() => {
            setEditing(false);
            setError(null);
            setBackToEdit(true);
          }}
        />
      ) : (
        <div className="betty-ApprovalCard-buttons">
          <button
            className="betty-Button betty-Button-accept"
            data-testid="betty-approve"
            disabled={disabled || mail.holds}
            onClick={() => void (mail.args ? send('edited', mail.args) : send('approved'))}
          >
            Approve
          </button>
          {request.tier < 2 && (
            <button
              className="betty-Button"
              data-testid="betty-approve-session"
              title={`Run ${request.tool} without asking again in this session`}
              disabled={disabled}
              onClick={() => void send('approved_for_session')}
            >
              Approve for session
            </button>
          )}
          <button
            className="betty-Button betty-Button-reject"
            data-testid="betty-deny"
            disabled={disabled}
            onClick={() => void send('denied')}
          >
            Deny
          </button>
          {edits !== null && (
            <button
              className="betty-Button"
              data-testid="betty-edit"
              ref={editButton}
              title="Change the request; it is checked and previewed again before you can approve it"
              disabled={disabled}
              onClick={() => {
                setError(null);
                setEditing(true);
              }}
            >
              Edit
            </button>
          )}
        </div>
      )}
      {error && (
        <div className="betty-ApprovalCard-error" role="alert" data-testid="betty-approval-error">
          {error}
        </div>
      )}
    </>
  );
}
