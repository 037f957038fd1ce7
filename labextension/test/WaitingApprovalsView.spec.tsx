/**
 * "Waiting for you" over a fake server (the REST helper answers from the approvals it holds, so
 * each button is checked against the endpoint it calls): the cards of other sessions with whom
 * they are for, the panel's own chat's left to the chat, answering, a card answered elsewhere,
 * and the reading every 2 s while the panel is attached.
 */
import * as React from 'react';

import { BettyAPI } from '../src/api';
import { BettyApp } from '../src/components/BettyApp';
import { WaitingApprovalsView } from '../src/components/WaitingApprovalsView';
import { BettyModel } from '../src/model';
import { IWaitingApproval } from '../src/models';
import { POLL_MS } from '../src/poll';
import { BettyRequestError, requestAPI } from '../src/request';
import { WaitingApprovals } from '../src/waiting';
import { expectReadsWhileAttached } from './attached';
import { allByTestId, byTestId, click, render, settle, useFakeClock } from './render';

jest.mock('../src/request', () => ({
  ...jest.requireActual('../src/request'),
  requestAPI: jest.fn()
}));
// The panel's other tabs import JupyterLab's dialogs, which these tests never open.
jest.mock('@jupyterlab/apputils', () => ({ showDialog: jest.fn(), Dialog: {} }));

const SCRIPT = '#!/bin/bash\n#SBATCH --job-name=train\nsrun python train.py\n';

function approval(id: string, overrides: Partial<IWaitingApproval> = {}): IWaitingApproval {
  return {
    approval_id: id,
    call_id: `mcp_${id}`,
    digest: `sha256:${'c'.repeat(64)}`,
    tool: 'cluster_submit',
    tier: 2,
    args: { script: SCRIPT },
    preview: { kind: 'script', text: SCRIPT, command: ['sbatch', '--parsable'], language: 'bash' },
    reason: 'tier 2 asks every time',
    task: 'claude-code (MCP)',
    session_id: 's-mcp',
    ...overrides
  } as IWaitingApproval;
}

/** Betty's approval routes as the panel sees them: the approvals waiting, the calls made. */
class FakeServer {
  calls: string[] = [];
  bodies: unknown[] = [];
  waiting: IWaitingApproval[] = [approval('apr_a')];

  answer = async (endpoint: string, init: RequestInit = {}): Promise<unknown> => {
    const method = init.method ?? 'GET';
    this.calls.push(`${method} ${endpoint}`);
    this.bodies.push(typeof init.body === 'string' ? JSON.parse(init.body) : undefined);
    if (method === 'GET' && endpoint === 'approvals') {
      return { approvals: [...this.waiting] };
    }
    const id = decodeURIComponent(endpoint.replace(/^approvals\//, ''));
    if (!this.waiting.some(each => each.approval_id === id)) {
      throw new BettyRequestError(
        `approval ${id} was already resolved (denied by ada); nothing changed`,
        409
      );
    }
    this.waiting = this.waiting.filter(each => each.approval_id !== id);
    const { decision } = JSON.parse(init.body as string);
    return { decision, approver: 'ada (server API)', args: null, reason: '' };
  };

  count(key: string): number {
    return this.calls.filter(call => call === key).length;
  }
}

let server: FakeServer;
let waiting: WaitingApprovals;

useFakeClock();
beforeEach(() => {
  server = new FakeServer();
  (requestAPI as jest.Mock).mockImplementation(server.answer);
  waiting = new WaitingApprovals(new BettyAPI());
});
afterEach(() => waiting.dispose());

/** The section, once the first read of the approvals came back. */
async function shown(chatSession: string | null = 's-chat') {
  const rendered = render(<WaitingApprovalsView waiting={waiting} chatSession={chatSession} />);
  waiting.start();
  await settle();
  return rendered;
}

describe('WaitingApprovalsView', () => {
  it("shows other sessions' cards with whom each is for and its preview, not the chat's own", async () => {
    server.waiting = [
      approval('apr_a'),
      approval('apr_chat', { session_id: 's-chat', task: null }),
      approval('apr_auto', {
        session_id: 'run-1',
        task: 'Nightly <b>check</b>\u202e',
        tool: 'wiki_write'
      }),
      approval('apr_other', { session_id: 's-other', task: null })
    ];
    const { container } = await shown();
    const items = allByTestId(container, 'betty-waiting-item');
    expect(items.map(item => item.dataset.approvalId)).toEqual(['apr_a', 'apr_auto', 'apr_other']);
    expect(items.map(item => byTestId(item, 'betty-waiting-for').textContent)).toEqual([
      'for claude-code (MCP)',
      'for Nightly <b>check</b>\\u202e',
      'for another session (s-other)'
    ]);
    expect(container.querySelector('b')).toBeNull();
    expect(byTestId(container, 'betty-waiting-count').textContent).toBe('3');
    const card = byTestId(items[0], 'betty-approval-card');
    expect(card.dataset.tool).toBe('cluster_submit');
    expect(card.textContent).toContain('#SBATCH --job-name=train');
    expect(allByTestId(items[0], 'betty-approve-session')).toHaveLength(0); // tier 2 always asks
  });

  it('takes no focus: its cards come unasked, from other sessions', async () => {
    await shown();
    expect(document.activeElement).toBe(document.body);
  });

  it('shows nothing while no other session waits', async () => {
    server.waiting = [approval('apr_chat', { session_id: 's-chat', task: null })];
    const { container } = await shown();
    expect(container.innerHTML).toBe('');
  });

  it('a card that arrives later shows up at the next read, and goes when answered elsewhere', async () => {
    server.waiting = [];
    const { container } = await shown();
    expect(allByTestId(container, 'betty-waiting-item')).toHaveLength(0);
    server.waiting = [approval('apr_late')];
    await settle(POLL_MS);
    expect(allByTestId(container, 'betty-waiting-item')).toHaveLength(1);
    server.waiting = [];
    await settle(POLL_MS);
    expect(container.innerHTML).toBe('');
  });

  it('Approve sends POST approvals/{id} once, naming the card it answers, and the card goes', async () => {
    const { container } = await shown();
    await click(byTestId(container, 'betty-approve'));
    await settle();
    expect(server.count('POST approvals/apr_a')).toBe(1);
    expect(server.bodies[server.calls.indexOf('POST approvals/apr_a')]).toEqual({
      decision: 'approved',
      face: 'side panel',
      digest: `sha256:${'c'.repeat(64)}`
    });
    expect(allByTestId(container, 'betty-waiting-item')).toHaveLength(0);
  });

  it('Deny sends denied', async () => {
    const { container } = await shown();
    await click(byTestId(container, 'betty-deny'));
    await settle();
    expect(server.bodies[server.calls.indexOf('POST approvals/apr_a')]).toEqual({
      decision: 'denied',
      face: 'side panel',
      digest: `sha256:${'c'.repeat(64)}`
    });
  });

  it('a card answered meanwhile elsewhere goes, with the one-line reason', async () => {
    const { container } = await shown();
    server.waiting = []; // answered in a notebook before this click
    await click(byTestId(container, 'betty-approve'));
    await settle();
    expect(allByTestId(container, 'betty-waiting-item')).toHaveLength(0);
    expect(byTestId(container, 'betty-waiting-problem').textContent).toContain(
      'approval apr_a was already resolved (denied by ada); nothing changed'
    );
    await click(byTestId(container, 'betty-waiting-problem-dismiss'));
    expect(container.innerHTML).toBe('');
  });

  it('tells of each card once, when first seen', async () => {
    const asked: string[] = [];
    waiting.asked.connect((_, each) => asked.push(each.approval_id));
    await shown();
    await settle(POLL_MS * 3);
    expect(asked).toEqual(['apr_a']);
  });

  it("the Chat tab's badge counts the cards waiting for you in other sessions", async () => {
    server.waiting = [approval('apr_a'), approval('apr_b', { session_id: 'automation-r1' })];
    const model = new BettyModel({ api: new BettyAPI() });
    const { container } = render(<BettyApp model={model} onOpen={jest.fn()} />);
    model.waiting.start();
    await settle();
    const badge = () => allByTestId(byTestId(container, 'betty-tab-chat'), 'betty-pending-count');
    expect(badge().map(each => each.textContent)).toEqual(['2']);
    server.waiting = [];
    await settle(POLL_MS);
    expect(badge()).toHaveLength(0);
    model.dispose();
  });

  it('the panel reads the approvals while attached, and stops when disposed', async () => {
    await expectReadsWhileAttached(
      () => server.count('GET approvals'),
      model => model.waiting.running
    );
  });
});
