/**
 * The approval card: what Betty wants to do (tool, tier, reason, the exact preview) and
 * the person's answer. Once decided it folds into a one-line record.
 */
import * as React from 'react';

import { EditingContext } from '../editing';
import { tierWords } from '../format';
import { APPROVING, Decision, PersonDecision } from '../events';
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
      </summary>
      <PreviewView preview={item.request.preview} />
      {decision === 'edited' && resolution?.args && <EditedArguments args={resolution.args} />}
    </details>
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
      {!(editing && !expired) && <PreviewView preview={request.preview} />}
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
            disabled={disabled}
            onClick={() => void send('approved')}
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
