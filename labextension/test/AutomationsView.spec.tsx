/**
 * The Automations tab over a fake server (the REST helper answers from a route table, so each
 * button is checked against the endpoint it calls): cards, buttons, the kill's confirmation,
 * a run's transcript, an automation's approval card, errors and the empty state.
 */
import { showDialog } from '@jupyterlab/apputils';
import * as React from 'react';
import { act } from 'react';

import { BettyAPI } from '../src/api';
import { AutomationsView, IAutomationsViewProps } from '../src/components/AutomationsView';
import { BettyApp } from '../src/components/BettyApp';
import { IWaitingApproval } from '../src/contract/serverApi';
import { BettyModel } from '../src/model';
import { IAutomation, IAutomationRun, IAutomationTrigger, IRunEvent } from '../src/models';
import { requestAPI } from '../src/request';
import { allByTestId, byTestId, click, render } from './render';

jest.mock('../src/request', () => ({
  ...jest.requireActual('../src/request'),
  requestAPI: jest.fn()
}));
jest.mock('@jupyterlab/apputils', () => ({
  showDialog: jest.fn(),
  Dialog: {
    cancelButton: () => ({ label: 'Cancel', accept: false }),
    warnButton: (options: { label: string }) => ({ ...options, accept: true })
  }
}));

const NOW = 1_700_000_000;
const dialog = showDialog as jest.MockedFunction<typeof showDialog>;

function trigger(fields: Partial<IAutomationTrigger>): IAutomationTrigger {
  return { kind: 'manual', states: [], cluster: null, cron: null, template: null, ...fields };
}

function automation(id: string, overrides: Partial<IAutomation>): IAutomation {
  return {
    id,
    name: id,
    persona: 'default',
    prompt: 'look',
    trigger: trigger({}),
    cluster: null,
    tools: null,
    limits: { iterations: 12, tokens: 200_000, seconds: 900 },
    mode: 'auto',
    status: 'idle',
    failures: 0,
    webhook: false,
    next_due: null,
    created: NOW - 86_400,
    updated: NOW - 86_400,
    ...overrides
  };
}

function run(id: string, automationId: string, overrides: Partial<IAutomationRun>): IAutomationRun {
  return {
    id,
    automation: automationId,
    status: 'done',
    trigger: 'job',
    delivery_id: null,
    payload: null,
    attempts: 1,
    session_id: `automation-${id}`,
    tokens: 0,
    iterations: 1,
    seconds: 3,
    code: null,
    result: '',
    created: NOW - 600,
    started: NOW - 590,
    ended: NOW - 300,
    owner: null,
    lease_until: 0,
    heartbeat: null,
    kill_requested: false,
    paused_before: null,
    ...overrides
  };
}

const SUBMIT: IWaitingApproval = {
  approval_id: 'ap1',
  call_id: 'c9',
  digest: 'sha256:' + '0'.repeat(64),
  tool: 'cluster_submit',
  tier: 2,
  args: { script: '#!/bin/bash\n#SBATCH -p gpu\npython train.py' },
  preview: { kind: 'script', title: 'Submit to gpu', text: '#!/bin/bash\n#SBATCH -p gpu', details: {} },
  reason: 'tier 2 always asks',
  task: 'Build watcher',
  session_id: 'automation-r9'
};

/** A resubmission (as the babysitter proposes): its run r3 is done, its card still waits. */
const RESUBMIT: IWaitingApproval = {
  ...SUBMIT,
  approval_id: 'ap3',
  digest: 'sha256:' + '3'.repeat(64),
  call_id: 'c3',
  task: 'Triage',
  session_id: 'automation-r3'
};

function event(attempt: number, seq: number, type: string, payload: unknown): IRunEvent {
  return { attempt, type, session_id: 'automation-r3', seq, ts: NOW - 400 + seq, payload };
}

/** Job logs read on the first attempt, which a crash cut off; the second finished. */
const TRANSCRIPT: IRunEvent[] = [
  event(1, 1, 'message', { role: 'user', text: 'Job 42 ended FAILED.', model: null }),
  event(1, 2, 'tool_call', { call_id: 'c1', tool: 'job_logs', args: { job_id: '42' }, tier: 0 }),
  event(2, 1, 'message', { role: 'user', text: 'Resumed: read your scratchpad.', model: null }),
  event(2, 2, 'tool_call', { call_id: 'c2', tool: 'job_logs', args: { job_id: '42' }, tier: 0 }),
  event(2, 3, 'tool_result', {
    call_id: 'c2',
    tool: 'job_logs',
    ok: true,
    decision: 'auto',
    approver: null,
    summary: '120 lines',
    duration_ms: 40,
    output_ref: null,
    artifacts: []
  }),
  event(2, 4, 'message', { role: 'assistant', text: 'It ran out of GPU memory.', model: null }),
  event(2, 5, 'done', { reason: 'finished' })
];

type Route = (body: any) => unknown;

/** Betty's server as the tab sees it: a route per `METHOD endpoint`, and the calls made. */
class FakeServer {
  calls: string[] = [];
  bodies: unknown[] = [];
  waiting: IWaitingApproval[] = [SUBMIT];
  routes: Record<string, Route> = {
    'GET automations': () => ({
      automations: [
        automation('triage', {
          name: 'Failed job triage',
          trigger: trigger({ kind: 'job', states: ['FAILED', 'OUT_OF_MEMORY'] })
        }),
        automation('digest', {
          name: 'Daily digest',
          status: 'paused',
          trigger: trigger({ kind: 'schedule', cron: '0 8 * * *' })
        }),
        automation('build', {
          name: 'Build watcher',
          status: 'active',
          trigger: trigger({ kind: 'webhook' }),
          webhook: true
        }),
        automation('retry', {
          name: 'Retry',
          status: 'error-suspended',
          failures: 3,
          trigger: trigger({})
        })
      ]
    }),
    'GET automations/triage/runs?limit=20': () => ({
      runs: [
        run('r3', 'triage', { tokens: 1234, ended: NOW - 300 }),
        run('r2', 'triage', {
          status: 'breaker',
          code: 'token_limit',
          tokens: 5000,
          result: 'stopped: 5000 tokens'
        }),
        run('r1', 'triage', { tokens: 800 })
      ]
    }),
    'GET automations/digest/runs?limit=20': () => ({ runs: [] }),
    'GET automations/build/runs?limit=20': () => ({
      runs: [
        run('r9', 'build', {
          status: 'running',
          trigger: 'webhook',
          tokens: 300,
          started: NOW - 120,
          ended: null
        })
      ]
    }),
    'GET automations/retry/runs?limit=20': () => ({
      runs: [run('r7', 'retry', { status: 'failed', code: 'model', trigger: 'manual', tokens: 10 })]
    }),
    'GET approvals': () => ({ approvals: this.waiting }),
    'GET automations/triage/runs/r3': () => ({
      ...run('r3', 'triage', { tokens: 1234 }),
      events: TRANSCRIPT
    }),
    'POST automations/triage/pause': () => automation('triage', { status: 'paused' }),
    'POST automations/digest/resume': () => automation('digest', {}),
    'POST automations/triage/run': () => ({ run_id: 'r4', status: 'queued' }),
    'POST automations/build/kill': () => ({ killed: ['r9'] }),
    'POST approvals/ap1': () => {
      this.waiting = [];
      return { decision: 'approved', approver: 'ada', args: null, reason: null };
    }
  };

  answer = async (endpoint: string, init: RequestInit = {}): Promise<unknown> => {
    const key = `${init.method ?? 'GET'} ${endpoint}`;
    this.calls.push(key);
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    this.bodies.push(body);
    const route = this.routes[key];
    if (route === undefined) {
      throw new Error(`no route ${key}`);
    }
    return route(body);
  };

  /** How often `key` was called. */
  count(key: string): number {
    return this.calls.filter(call => call === key).length;
  }

  bodyOf(key: string): unknown {
    return this.bodies[this.calls.lastIndexOf(key)];
  }
}

let server: FakeServer;

beforeEach(() => {
  jest.useFakeTimers();
  jest.setSystemTime(NOW * 1000);
  server = new FakeServer();
  (requestAPI as jest.Mock).mockImplementation(server.answer);
  dialog.mockReset();
  dialog.mockResolvedValue({ button: { accept: true } } as never);
});
afterEach(() => jest.useRealTimers());

function props(overrides: Partial<IAutomationsViewProps> = {}): IAutomationsViewProps {
  return { api: new BettyAPI(), visible: true, watching: true, ...overrides };
}

async function settle(ms = 0): Promise<void> {
  await act(async () => {
    await jest.advanceTimersByTimeAsync(ms);
  });
}

async function shown(overrides: Partial<IAutomationsViewProps> = {}) {
  const rendered = render(<AutomationsView {...props(overrides)} />);
  await settle();
  const card = (id: string) =>
    allByTestId(rendered.container, 'betty-automation-card').find(each => each.dataset.id === id)!;
  return { ...rendered, card };
}

describe('AutomationsView', () => {
  it('shows a card per automation: status, trigger in words, last run, tokens', async () => {
    const { container, card } = await shown();
    const cards = allByTestId(container, 'betty-automation-card');
    expect(cards.map(each => [each.dataset.id, each.dataset.status])).toEqual([
      ['triage', 'idle'],
      ['digest', 'paused'],
      ['build', 'active'],
      ['retry', 'error-suspended']
    ]);
    const trigger = (id: string) => byTestId(card(id), 'betty-automation-trigger').textContent;
    expect(trigger('triage')).toBe('when a job ends FAILED, OUT_OF_MEMORY');
    expect(trigger('digest')).toBe('daily at 08:00 (cron 0 8 * * *)');
    expect(trigger('build')).toBe('webhook');
    expect(trigger('retry')).toBe('manual');
    expect(byTestId(card('retry'), 'betty-automation-status').className).toContain(
      'betty-AutomationStatus-error-suspended'
    );
    const last = (id: string) => byTestId(card(id), 'betty-automation-last-run').textContent;
    expect(last('triage')).toBe('last run done · 5 min ago · 1.2k tokens');
    expect(last('digest')).toBe('never run');
    expect(last('retry')).toBe('last run failed (model) · 5 min ago · 10 tokens');
    expect(card('retry').textContent).toContain('Suspended after 3 failed runs in a row');
  });

  it('draws a sparkline with a point per recent run, oldest first', async () => {
    const { card } = await shown();
    const line = byTestId(card('triage'), 'betty-automation-sparkline');
    expect(line.dataset.points).toBe('3');
    const points = line
      .querySelector('polyline')!
      .getAttribute('points')!
      .split(' ')
      .map(point => point.split(',').map(Number));
    expect(points).toHaveLength(3);
    // runs r1 (800), r2 (5000, the highest: the top), r3 (1234), left to right
    const heights = points.map(([, y]) => y);
    expect(Math.min(...heights)).toBe(heights[1]);
    expect(heights[0]).toBeGreaterThan(heights[2]);
    expect(allByTestId(card('digest'), 'betty-automation-sparkline')).toHaveLength(0);
  });

  it('lists recent runs under the card with their status and breaker', async () => {
    const { card } = await shown();
    const runs = allByTestId(card('triage'), 'betty-automation-run');
    expect(runs.map(row => [row.dataset.runId, row.dataset.status])).toEqual([
      ['r3', 'done'],
      ['r2', 'breaker'],
      ['r1', 'done']
    ]);
    expect(runs[1].textContent).toContain('token_limit');
  });

  it('offers pause or resume, and kill only while a run is under way', async () => {
    const { card } = await shown();
    const has = (id: string, button: string) =>
      allByTestId(card(id), `betty-automation-${button}`).length === 1;
    expect(['pause', 'resume', 'kill'].map(b => has('triage', b))).toEqual([true, false, false]);
    expect(['pause', 'resume', 'kill'].map(b => has('digest', b))).toEqual([false, true, false]);
    expect(['pause', 'resume', 'kill'].map(b => has('build', b))).toEqual([true, false, true]);
    expect(byTestId<HTMLButtonElement>(card('retry'), 'betty-automation-run-now').disabled).toBe(
      true
    );
  });

  it('says Enable for a paused automation that never ran, Resume for one that did', async () => {
    const { card } = await shown();
    expect(byTestId(card('digest'), 'betty-automation-resume').textContent).toBe('Enable');
    expect(byTestId(card('retry'), 'betty-automation-resume').textContent).toBe('Resume');
  });

  it.each([
    ['triage', 'pause', 'POST automations/triage/pause'],
    ['digest', 'resume', 'POST automations/digest/resume'],
    ['triage', 'run-now', 'POST automations/triage/run'],
    ['build', 'kill', 'POST automations/build/kill']
  ])('the %s card’s %s button calls %s, then reads the automations again', async (
    id,
    button,
    call
  ) => {
    const { card } = await shown();
    const before = server.count('GET automations');
    await click(byTestId(card(id), `betty-automation-${button}`));
    await settle();
    expect(server.calls.filter(each => each.startsWith('POST'))).toEqual([call]);
    expect(server.count('GET automations')).toBe(before + 1);
  });

  it('asks before killing, and kills nothing when the person cancels', async () => {
    dialog.mockResolvedValue({ button: { accept: false } } as never);
    const { card } = await shown();
    await click(byTestId(card('build'), 'betty-automation-kill'));
    await settle();
    expect(dialog).toHaveBeenCalledTimes(1);
    expect(dialog.mock.calls[0][0]!.title).toBe('Kill Build watcher?');
    expect(server.count('POST automations/build/kill')).toBe(0);
  });

  it("opens a run's transcript, every attempt of it, and closes it again", async () => {
    const { card } = await shown();
    const row = () => allByTestId(card('triage'), 'betty-automation-run')[0];
    await click(row());
    await settle();
    expect(server.count('GET automations/triage/runs/r3')).toBe(1);
    const transcript = byTestId(card('triage'), 'betty-automation-transcript');
    const tools = allByTestId(transcript, 'betty-tool-row');
    // the first attempt's call never finished; the second's did
    expect(tools.map(tool => [tool.dataset.callId, tool.dataset.state])).toEqual([
      ['c1', 'not-run'],
      ['c2', 'ok']
    ]);
    expect(transcript.textContent).toContain('another resumed it (attempt 2)');
    expect(transcript.textContent).toContain('Resumed: read your scratchpad.');
    expect(transcript.textContent).toContain('It ran out of GPU memory.');
    expect(row().getAttribute('aria-expanded')).toBe('true');
    await click(row());
    expect(allByTestId(card('triage'), 'betty-automation-transcript')).toHaveLength(0);
  });

  it('shows a card a run that ended left waiting, found by what waits and not by run status', async () => {
    server.waiting = [SUBMIT, RESUBMIT];
    const counted = jest.fn();
    const { card } = await shown({ onPendingCount: counted });
    expect(counted).toHaveBeenLastCalledWith(2);
    const left = byTestId(card('triage'), 'betty-approval-card');
    expect(left.dataset.approvalId).toBe('ap3');
    expect(left.dataset.status).toBe('pending');
    expect(allByTestId(card('digest'), 'betty-approval-card')).toHaveLength(0);
  });

  it('shows the approval a running run waits on, and approving posts the decision', async () => {
    const counted = jest.fn();
    const { container, card } = await shown({ onPendingCount: counted });
    expect(server.count('GET approvals')).toBe(1);
    expect(counted).toHaveBeenLastCalledWith(1);
    expect(byTestId(container, 'betty-automations-pending').textContent).toContain(
      'One action of an automation waits'
    );
    const approval = byTestId(card('build'), 'betty-approval-card');
    expect(approval.dataset.tool).toBe('cluster_submit');
    expect(approval.dataset.status).toBe('pending');
    await click(byTestId(approval, 'betty-approve'));
    await settle();
    expect(server.bodyOf('POST approvals/ap1')).toEqual({
      decision: 'approved',
      face: 'side panel',
      digest: 'sha256:' + '0'.repeat(64)
    });
    expect(byTestId(card('build'), 'betty-approval-record').dataset.decision).toBe('approved');
    expect(card('build').textContent).toContain('approved by ada');
    expect(counted).toHaveBeenLastCalledWith(0);
    expect(allByTestId(container, 'betty-automations-pending')).toHaveLength(0);
  });

  it('shows a refused action in one line', async () => {
    server.routes['POST automations/triage/run'] = () => {
      throw new Error('automation triage is suspended after 3 failed runs;\nresume it first');
    };
    const { container, card } = await shown();
    await click(byTestId(card('triage'), 'betty-automation-run-now'));
    await settle();
    expect(byTestId(container, 'betty-automations-error').textContent).toBe(
      'automation triage is suspended after 3 failed runs; resume it first'
    );
  });

  it('shows why the automations could not be read, and no empty state', async () => {
    server.routes['GET automations'] = () => {
      throw new Error('no such route');
    };
    const { container } = await shown();
    expect(byTestId(container, 'betty-automations-error').textContent).toBe('no such route');
    expect(allByTestId(container, 'betty-automations-empty')).toHaveLength(0);
  });

  it('says how to define an automation when there is none', async () => {
    server.routes['GET automations'] = () => ({ automations: [] });
    const { container } = await shown();
    expect(byTestId(container, 'betty-automations-empty').textContent).toContain(
      'docs/automations.md'
    );
    expect(allByTestId(container, 'betty-automation-card')).toHaveLength(0);
  });

  it('refreshes every 10 s on screen, every 30 s with the panel only, never hidden', async () => {
    const { rerender } = await shown();
    const reads = () => server.count('GET automations');
    expect(reads()).toBe(1);
    await settle(10_000);
    expect(reads()).toBe(2);
    rerender(<AutomationsView {...props({ visible: false })} />);
    await settle();
    expect(reads()).toBe(3);
    await settle(20_000);
    expect(reads()).toBe(3);
    await settle(10_000);
    expect(reads()).toBe(4);
    rerender(<AutomationsView {...props({ visible: false, watching: false })} />);
    await settle(120_000);
    expect(reads()).toBe(4);
  });
});

describe('the Automations tab of the panel', () => {
  it('comes after Experiments and counts the approvals automation runs wait on', async () => {
    const model = new BettyModel({ api: new BettyAPI() });
    model.setVisible(true);
    const { container } = render(<BettyApp model={model} onOpen={jest.fn()} />);
    await settle();
    const tabs = Array.from(container.querySelectorAll<HTMLElement>('[role="tab"]'));
    expect(tabs.map(tab => tab.dataset.testid)).toEqual([
      'betty-tab-chat',
      'betty-tab-jobs',
      'betty-tab-cluster',
      'betty-tab-experiments',
      'betty-tab-automations',
      'betty-tab-gpu',
      'betty-tab-timeline'
    ]);
    expect(
      byTestId(byTestId(container, 'betty-tab-automations'), 'betty-automations-pending-count')
        .textContent
    ).toBe('1');
  });
});
