/**
 * The approval cards waiting for the person in every session of the server — MCP clients',
 * automations', other chats' — read from the server every 2 s while the panel is attached, so
 * a card that another agent raised shows up without the person doing anything. The panel's
 * own chat shows its cards in the chat; {@link othersThan} leaves those out.
 */
import { BettyAPI } from './api';
import { PersonDecision } from './events';
import { IWaitingApproval } from './models';
import { WaitingList } from './poll';

/** The calls the waiting cards need: `BettyAPI` itself, or a fake in tests. */
export type WaitingAPI = Pick<BettyAPI, 'waitingApprovals' | 'decide'>;

/** The approvals waiting for a person, and the answers on their way to the server. */
export class WaitingApprovals extends WaitingList<IWaitingApproval> {
  private readonly _api: WaitingAPI;

  constructor(api: WaitingAPI) {
    super(
      async () => (await api.waitingApprovals()).approvals,
      approval => approval.approval_id,
      [404, 409]
    );
    this._api = api;
  }

  /** The approvals waiting now, oldest first. */
  get approvals(): readonly IWaitingApproval[] {
    return this.items;
  }

  /**
   * Answer approval `id` (`args` only with `edited`). The card goes once the server took the
   * answer, or when it waits no more (404, 409: {@link problem} says why); any other refusal
   * rejects with its one-line message and the card stays, to be answered again.
   */
  decide(
    id: string,
    decision: PersonDecision,
    args?: Record<string, unknown>,
    digest?: string
  ): Promise<void> {
    return this.settle(id, this._api.decide(id, decision, args, digest));
  }
}

/** The approvals not of `sessionId` (the panel's own chat, which shows its cards itself). */
export function othersThan(
  approvals: readonly IWaitingApproval[],
  sessionId: string | null
): IWaitingApproval[] {
  return approvals.filter(approval => approval.session_id !== sessionId);
}

/** Whom a card is for, in words: its session's task, or the session (a notebook's, another chat's). */
export function whose(approval: IWaitingApproval): string {
  return approval.task ?? `another session (${approval.session_id})`;
}
