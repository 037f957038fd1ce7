/**
 * The approval cards waiting for the person in every session of the server — MCP clients',
 * automations', other chats' — read from the server every 2 s while the panel is attached, so
 * a card that another agent raised shows up without the person doing anything. The panel's
 * own chat shows its cards in the chat; {@link othersThan} leaves those out.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { BettyAPI } from './api';
import { PersonDecision } from './events';
import { IWaitingApproval } from './models';
import { Poll } from './poll';
import { BettyRequestError } from './request';

/** The calls the waiting cards need: `BettyAPI` itself, or a fake in tests. */
export type WaitingAPI = Pick<BettyAPI, 'waitingApprovals' | 'decide'>;

/** The approvals waiting for a person, and the answers on their way to the server. */
export class WaitingApprovals {
  /** The approvals waiting now, oldest first. */
  approvals: readonly IWaitingApproval[] = [];
  /** Why the last answer found no card waiting (answered elsewhere, timed out, cancelled). */
  problem: string | null = null;

  private readonly _api: WaitingAPI;
  private readonly _poll: Poll<IWaitingApproval[]>;
  /** Answered here: a read that began before the answer may still list them. */
  private readonly _settled = new Set<string>();
  private readonly _seen = new Set<string>();
  private readonly _changed = new Signal<this, void>(this);
  private readonly _asked = new Signal<this, IWaitingApproval>(this);

  constructor(api: WaitingAPI) {
    this._api = api;
    this._poll = new Poll(
      async () => (await api.waitingApprovals()).approvals,
      approvals => this._show(approvals)
    );
  }

  /** Fires when the approvals or the problem change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Fires once for each approval the panel sees for the first time. */
  get asked(): ISignal<this, IWaitingApproval> {
    return this._asked;
  }

  /** Whether the approvals are being read. */
  get running(): boolean {
    return this._poll.running;
  }

  /** Read the approvals now and every 2 s from then on; a second start does nothing. */
  start(): void {
    this._poll.start();
  }

  /** Stop reading. */
  stop(): void {
    this._poll.stop();
  }

  /** Stop for good. */
  dispose(): void {
    this.stop();
    Signal.clearData(this);
  }

  /**
   * Answer approval `id` (`args` only with `edited`). The card goes once the server took the
   * answer, or when it waits no more (404, 409: {@link problem} says why); any other refusal
   * rejects with its one-line message and the card stays, to be answered again.
   */
  async decide(
    id: string,
    decision: PersonDecision,
    args?: Record<string, unknown>
  ): Promise<void> {
    try {
      await this._api.decide(id, decision, args);
      this.problem = null;
    } catch (error) {
      if (!(error instanceof BettyRequestError && [404, 409].includes(error.status))) {
        throw error;
      }
      this.problem = error.message;
    }
    this._settled.add(id);
    this.approvals = this.approvals.filter(approval => approval.approval_id !== id);
    this._changed.emit();
  }

  /** Forget {@link problem}. */
  dismissProblem(): void {
    if (this.problem !== null) {
      this.problem = null;
      this._changed.emit();
    }
  }

  private _show(listed: IWaitingApproval[]): void {
    const ids = new Set(listed.map(approval => approval.approval_id));
    for (const id of [...this._settled, ...this._seen]) {
      if (!ids.has(id)) {
        this._settled.delete(id);
        this._seen.delete(id);
      }
    }
    const approvals = listed.filter(approval => !this._settled.has(approval.approval_id));
    const fresh = approvals.filter(approval => !this._seen.has(approval.approval_id));
    const same =
      approvals.length === this.approvals.length &&
      approvals.every((approval, i) => approval.approval_id === this.approvals[i].approval_id);
    if (!same) {
      this.approvals = approvals;
      this._changed.emit();
    }
    for (const approval of fresh) {
      this._seen.add(approval.approval_id);
      this._asked.emit(approval);
    }
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
