/**
 * "Waiting for you": every approval card that waits for the person in a session other than the
 * panel's own chat — an MCP client's (Claude Code, jupyter-ai), an automation's run, another
 * chat's — each under the name of whom it is for, with the same preview and buttons as in the
 * chat. Answers go to `POST approvals/{id}`.
 */
import * as React from 'react';

import { revealCard } from '../reveal';
import { pendingApproval } from '../transcript';
import { visibleText } from '../safe';
import { othersThan, WaitingApprovals, whose } from '../waiting';
import { ApprovalCard } from './ApprovalCard';
import { useChanges } from './changes';

/** Props of {@link WaitingApprovalsView}. */
export interface IWaitingApprovalsViewProps {
  waiting: WaitingApprovals;
  /** The panel's own chat session: its cards are in the chat, not here. */
  chatSession: string | null;
}

/** The cards waiting for the person in other sessions, oldest first; nothing when none waits. */
export function WaitingApprovalsView(props: IWaitingApprovalsViewProps): JSX.Element | null {
  const { waiting, chatSession } = props;
  useChanges(waiting);
  const approvals = othersThan(waiting.approvals, chatSession);
  const problem = waiting.problem;
  // The newest card is brought into view in the list, its buttons showing (it takes no focus:
  // it comes unasked, from another session).
  const list = React.useRef<HTMLDivElement>(null);
  const ids = approvals.map(approval => approval.approval_id);
  const seen = React.useRef(new Set<string>());
  React.useEffect(() => {
    // Only a card that just arrived: once one is answered, focus does not jump to another.
    const newest = ids.filter(id => !seen.current.has(id)).pop();
    ids.forEach(id => seen.current.add(id));
    const node = list.current;
    const card = Array.from(
      node?.querySelectorAll<HTMLElement>('[data-testid="betty-approval-card"]') ?? []
    ).find(each => each.dataset.approvalId === newest);
    if (node && card) {
      return revealCard(node, card); // it stops keeping the card in view when the cards change
    }
    return undefined;
  }, [ids.join(' ')]); // the ids, not the list: a new list of the same cards changes nothing
  if (approvals.length === 0 && problem === null) {
    return null;
  }
  return (
    <section className="betty-Waiting" data-testid="betty-waiting" aria-label="Waiting for you">
      <div className="betty-Waiting-head">
        Waiting for you
        {approvals.length > 0 && (
          <span className="betty-Tab-badge" data-testid="betty-waiting-count">
            {approvals.length}
          </span>
        )}
      </div>
      <div className="betty-Waiting-list" ref={list}>
        {approvals.map(approval => (
          <div
            key={approval.approval_id}
            className="betty-Waiting-item"
            data-testid="betty-waiting-item"
            data-approval-id={approval.approval_id}
            data-session-id={approval.session_id}
          >
            <div className="betty-Waiting-for" data-testid="betty-waiting-for">
              for {visibleText(whose(approval))}
            </div>
            <ApprovalCard
              item={pendingApproval(approval)}
              onDecide={(decision, args) =>
                waiting.decide(approval.approval_id, decision, args, approval.digest)
              }
            />
          </div>
        ))}
      </div>
      {problem !== null && (
        <div className="betty-Waiting-problem" role="alert" data-testid="betty-waiting-problem">
          {visibleText(problem)}{' '}
          <button
            className="betty-Link"
            data-testid="betty-waiting-problem-dismiss"
            onClick={() => waiting.dismissProblem()}
          >
            Dismiss
          </button>
        </div>
      )}
    </section>
  );
}
