/**
 * The plan drawer: its answer per step (grant, deny, edit; what a denial takes with it), what
 * Execute plan, Step by step and Deny plan send, a step's edit checked through the plan's
 * preview route, the progress of each step, and hostile text kept as text.
 */
import * as React from 'react';

import { PlanDrawer } from '../src/components/PlanDrawer';
import { ChatView } from '../src/components/ChatView';
import { EditingContext, IEditing, RECHECK_DELAY_MS } from '../src/editing';
import { IPlan, IPreview } from '../src/events';
import {
  answerStep,
  editCheck,
  grantsAsProposed,
  initialAnswers,
  IPlanProgress,
  IPlanStepUpdate,
  planAnswer,
  planOfCall,
  statusTrail,
  stepPreview,
  willNotRun,
  withPlan,
  withStepUpdate
} from '../src/plans';
import { emptyTranscript, IApprovalItem, ITranscript, reduce } from '../src/transcript';
import { allByTestId, byTestId, click, render, settle, type, useFakeClock } from './render';

const HOSTILE = '<img src=x onerror="document.title=\'owned\'"> \u202eevil';

function preview(title: string, text: string, kind: IPreview['kind'] = 'command'): IPreview {
  return { kind, title, text, details: {} };
}

/** Read, estimate, submit (needs 1 and 2), status (needs 3): the four steps of a fine-tune. */
function fourSteps(): IPlan {
  const step = (
    index: number,
    tool: string,
    tier: number,
    args: Record<string, unknown>,
    shown: IPreview,
    depends_on: number[] = []
  ) => ({
    index,
    tool,
    tier,
    args,
    preview: shown,
    depends_on,
    status: 'proposed' as const,
    reason: ''
  });
  return {
    plan_id: 'plan_1',
    call_id: 'call_plan',
    goal: `fine-tune ${HOSTILE}`,
    steps: ['1. cluster_run', '2. gpu_estimate', '3. cluster_submit', '4. cluster_status'],
    calls: [
      step(
        1,
        'cluster_run',
        1,
        { command: 'cat train.yaml' },
        preview('run on betty-dev', `cat train.yaml # ${HOSTILE}`)
      ),
      step(
        2,
        'gpu_estimate',
        0,
        { model: 'Llama-3.1-8B' },
        preview('estimate', 'Llama-3.1-8B lora', 'text')
      ),
      step(
        3,
        'cluster_submit',
        2,
        {
          script: '#!/bin/bash\n#SBATCH --time=00:10:00\necho hi\n',
          goal: 'train'
        },
        preview('submit to betty-dev', '#!/bin/bash\n#SBATCH --time=00:10:00\necho hi\n', 'script'),
        [1, 2]
      ),
      step(
        4,
        'cluster_status',
        1,
        { job_id: '99999999' },
        preview('status', 'squeue -j 99999999'),
        [3]
      )
    ]
  };
}

function cardOf(plan: IPlan, status: IApprovalItem['status'] = 'pending'): IApprovalItem {
  return {
    kind: 'approval',
    key: 'approval-apr_1',
    status,
    resolution: null,
    request: {
      approval_id: 'apr_1',
      call_id: plan.call_id,
      digest: 'sha256:' + '1'.repeat(64),
      tool: 'propose_plan',
      tier: 2,
      args: {},
      preview: preview(`plan: ${plan.goal}`, plan.steps.join('\n'), 'text'),
      reason: 'a plan',
      task: null
    }
  };
}

/** Edit services whose server previews a plan answer as the plan, each step with its own preview. */
function planServer(plan: IPlan) {
  const repreview = jest.fn(
    async (_id: string, answer: Record<string, unknown>): Promise<IPreview> => {
      const steps = answer.steps as {
        decision: string;
        args?: Record<string, unknown>;
      }[];
      const refused = steps.find(
        s => s.decision === 'edited' && String(s.args?.script ?? '').includes('no-such')
      );
      if (refused) {
        throw new Error(
          "step 3 (cluster_submit): the edited call is refused: partition 'no-such' does not exist"
        );
      }
      const calls = plan.calls.map((step, i) =>
        steps[i].decision === 'edited'
          ? {
              ...step,
              args: steps[i].args,
              status: 'edited',
              preview: preview(
                `submit to betty-dev (edited ${HOSTILE})`,
                String(steps[i].args?.script),
                'script'
              )
            }
          : step
      );
      return {
        kind: 'text',
        title: 'plan',
        text: '',
        details: { steps: calls.length, calls }
      };
    }
  );
  const editing: IEditing = {
    repreview,
    partitions: jest.fn(async () => ['cpu', 'gpu']),
    editors: null,
    opensEditing: () => false
  };
  return Object.assign(editing, { repreview });
}

function renderDrawer(
  progress: IPlanProgress,
  item: IApprovalItem | null,
  editing: IEditing | null
) {
  const onDecide = jest.fn();
  const element = (next: IPlanProgress, card: IApprovalItem | null) => (
    <EditingContext.Provider value={editing}>
      <PlanDrawer progress={next} item={card} onDecide={onDecide} />
    </EditingContext.Provider>
  );
  const { container, rerender } = render(element(progress, item));
  return {
    container,
    onDecide,
    rerender: (next: IPlanProgress, card: IApprovalItem | null) => rerender(element(next, card))
  };
}

function stepRow(container: HTMLElement, index: number): HTMLElement {
  return allByTestId(container, 'betty-plan-step').find(
    row => row.dataset.index === String(index)
  )!;
}

function update(
  index: number,
  tool: string,
  status: IPlanStepUpdate['status'],
  summary = ''
): IPlanStepUpdate {
  return {
    plan_id: 'plan_1',
    index,
    tool,
    status,
    call_id: null,
    args: null,
    summary
  };
}

describe('plans: the drawer answer', () => {
  it('a denied step takes every step that needs it, directly or not, with it', () => {
    const plan = fourSteps();
    const answers = answerStep(initialAnswers(plan), 2, { decision: 'denied' });
    expect([...willNotRun(plan, answers)]).toEqual([3, 4]);
    expect([
      ...willNotRun(plan, answerStep(initialAnswers(plan), 4, { decision: 'denied' }))
    ]).toEqual([]);
    expect([...willNotRun(plan, initialAnswers(plan))]).toEqual([]);
  });

  it('the answer carries one entry per step, an edit with its arguments', () => {
    const plan = fourSteps();
    const answers = answerStep(
      answerStep(initialAnswers(plan), 3, {
        decision: 'edited',
        args: { script: 'x' },
        preview: preview('p', 'x')
      }),
      1,
      { decision: 'denied' }
    );
    expect(planAnswer(answers, 'step_by_step')).toEqual({
      steps: [
        { decision: 'denied' },
        { decision: 'approved' },
        { decision: 'edited', args: { script: 'x' } },
        { decision: 'approved' }
      ],
      run: 'step_by_step'
    });
    expect(grantsAsProposed(initialAnswers(plan), 'whole')).toBe(true);
    expect(grantsAsProposed(initialAnswers(plan), 'step_by_step')).toBe(false);
    expect(grantsAsProposed(answers, 'whole')).toBe(false);
    expect(editCheck(plan, 2, { model: 'x' })).toEqual({
      steps: [
        { decision: 'approved' },
        { decision: 'edited', args: { model: 'x' } },
        { decision: 'approved' },
        { decision: 'approved' }
      ],
      run: 'whole'
    });
  });

  it("a step's own preview comes from the preview route's details, or an error says it is missing", () => {
    const plan = fourSteps();
    const whole = {
      kind: 'text' as const,
      title: '',
      text: '',
      details: { calls: plan.calls }
    };
    expect(stepPreview(whole, 3)).toBe(plan.calls[2].preview);
    expect(() => stepPreview({ ...whole, details: {} }, 3)).toThrow(/does not show step 3/);
  });

  it('the transcript keeps the plan and its timeline; its steps are not chat lines', () => {
    const plan = fourSteps();
    const frame = (type: string, seq: number, payload: unknown) => ({
      type,
      seq,
      session_id: 's',
      ts: seq,
      payload
    });
    const state = [
      frame('plan', 1, plan),
      frame('approval_request', 2, cardOf(plan).request),
      frame('plan_step', 3, update(1, 'cluster_run', 'running')),
      frame('plan_step', 4, update(1, 'cluster_run', 'done')),
      frame('plan_step', 5, update(2, 'gpu_estimate', 'failed', 'no such model'))
    ].reduce<ITranscript>((s, f) => reduce(s, f), emptyTranscript('s'));
    const progress = planOfCall(state.plans, 'call_plan')!;
    expect(progress.plan.goal).toBe(plan.goal);
    expect(statusTrail(progress, 1)).toEqual(['running', 'done']);
    expect(state.items.map(item => item.kind)).toEqual(['note', 'approval']);
    expect(
      withStepUpdate(state.plans, {
        ...update(1, 'x', 'done'),
        plan_id: 'unknown'
      })
    ).toBe(state.plans);
    expect(withPlan(state.plans, plan)).toBe(state.plans);
  });
});

describe('PlanDrawer: answering', () => {
  useFakeClock();

  it('lists every step with its tool, tier, the steps it needs and its own preview', () => {
    const plan = fourSteps();
    const { container } = renderDrawer({ plan, timeline: [] }, cardOf(plan), planServer(plan));
    const rows = allByTestId(container, 'betty-plan-step');
    expect(rows.map(row => row.dataset.tool)).toEqual([
      'cluster_run',
      'gpu_estimate',
      'cluster_submit',
      'cluster_status'
    ]);
    expect(rows[2].textContent).toContain('tier 2');
    expect(byTestId(rows[2], 'betty-plan-needs').textContent).toBe('needs step 1, 2');
    expect(rows[2].querySelector('[data-testid="betty-preview"]')!.getAttribute('data-kind')).toBe(
      'script'
    );
    expect(rows.map(row => row.dataset.state)).toEqual([
      'approved',
      'approved',
      'approved',
      'approved'
    ]);
  });

  it('hostile text in the goal and a preview stays text', () => {
    const plan = fourSteps();
    const { container } = renderDrawer({ plan, timeline: [] }, cardOf(plan), planServer(plan));
    expect(container.querySelector('img')).toBeNull();
    expect(container.querySelector('[onerror]')).toBeNull();
    expect(container.textContent).toContain('<img src=x onerror=');
    expect(container.textContent).not.toContain('\u202e');
  });

  it('Execute plan as proposed sends a plain approval', async () => {
    const plan = fourSteps();
    const { container, onDecide } = renderDrawer(
      { plan, timeline: [] },
      cardOf(plan),
      planServer(plan)
    );
    await click(byTestId(container, 'betty-plan-execute'));
    expect(onDecide).toHaveBeenCalledWith('approved', undefined);
  });

  it('denying a step marks the steps that need it as will not run; Step by step sends the answer', async () => {
    const plan = fourSteps();
    const { container, onDecide } = renderDrawer(
      { plan, timeline: [] },
      cardOf(plan),
      planServer(plan)
    );
    await click(byTestId(stepRow(container, 2), 'betty-plan-step-deny'));
    expect(allByTestId(container, 'betty-plan-step').map(row => row.dataset.state)).toEqual([
      'approved',
      'denied',
      'will_not_run',
      'will_not_run'
    ]);
    expect(byTestId(stepRow(container, 4), 'betty-plan-state').textContent).toBe(
      'will not run: needs step 3, which will not run'
    );
    await click(byTestId(stepRow(container, 2), 'betty-plan-grant'));
    expect(stepRow(container, 4).dataset.state).toBe('approved');
    await click(byTestId(stepRow(container, 4), 'betty-plan-step-deny'));
    await click(byTestId(container, 'betty-plan-step-by-step'));
    expect(onDecide).toHaveBeenCalledWith('edited', {
      steps: [
        { decision: 'approved' },
        { decision: 'approved' },
        { decision: 'approved' },
        { decision: 'denied' }
      ],
      run: 'step_by_step'
    });
  });

  it('Deny plan denies it', async () => {
    const plan = fourSteps();
    const { container, onDecide } = renderDrawer(
      { plan, timeline: [] },
      cardOf(plan),
      planServer(plan)
    );
    await click(byTestId(container, 'betty-plan-deny'));
    expect(onDecide).toHaveBeenCalledWith('denied', undefined);
  });

  it("a step's edit is checked as the plan's answer; a refused edit shows one line and keeps what was typed", async () => {
    const plan = fourSteps();
    const server = planServer(plan);
    const { container, onDecide } = renderDrawer({ plan, timeline: [] }, cardOf(plan), server);
    await click(byTestId(stepRow(container, 3), 'betty-plan-edit'));
    expect(byTestId<HTMLButtonElement>(container, 'betty-plan-execute').disabled).toBe(true);
    const script = byTestId<HTMLTextAreaElement>(container, 'betty-edit-script');
    const wrong = '#!/bin/bash\n#SBATCH --partition=no-such\necho hi\n';
    type(script, wrong);
    await settle(RECHECK_DELAY_MS);
    const status = byTestId(container, 'betty-edit-status');
    expect(status.dataset.state).toBe('refused');
    expect(status.textContent).toBe(
      "step 3 (cluster_submit): the edited call is refused: partition 'no-such' does not exist"
    );
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-script').value).toBe(wrong);
    expect(byTestId<HTMLButtonElement>(container, 'betty-edit-send').disabled).toBe(true);

    const right = '#!/bin/bash\n#SBATCH --time=00:05:00\necho hi\n';
    type(byTestId<HTMLTextAreaElement>(container, 'betty-edit-script'), right);
    await settle(RECHECK_DELAY_MS);
    expect(server.repreview).toHaveBeenLastCalledWith('apr_1', {
      steps: [
        { decision: 'approved' },
        { decision: 'approved' },
        { decision: 'edited', args: { script: right, goal: 'train' } },
        { decision: 'approved' }
      ],
      run: 'whole'
    });
    await click(byTestId(container, 'betty-edit-send'));
    const row = stepRow(container, 3);
    expect(row.dataset.state).toBe('edited');
    expect(row.querySelector('[data-testid="betty-preview"]')!.textContent).toContain(
      '#SBATCH --time=00:05:00'
    );
    expect(row.querySelector('img')).toBeNull();
    await click(byTestId(container, 'betty-plan-execute'));
    expect(onDecide).toHaveBeenCalledWith('edited', {
      steps: [
        { decision: 'approved' },
        { decision: 'approved' },
        { decision: 'edited', args: { script: right, goal: 'train' } },
        { decision: 'approved' }
      ],
      run: 'whole'
    });
  });

  it("an answer the server refuses shows its line and keeps the drawer's answers", async () => {
    const plan = fourSteps();
    const { container, onDecide } = renderDrawer(
      { plan, timeline: [] },
      cardOf(plan),
      planServer(plan)
    );
    onDecide.mockRejectedValueOnce(new Error(`the plan has 4 steps ${HOSTILE}`));
    await click(byTestId(stepRow(container, 4), 'betty-plan-step-deny'));
    await click(byTestId(container, 'betty-plan-execute'));
    expect(byTestId(container, 'betty-approval-error').textContent).toContain(
      'the plan has 4 steps <img'
    );
    expect(stepRow(container, 4).dataset.state).toBe('denied');
    expect(byTestId<HTMLButtonElement>(container, 'betty-plan-execute').disabled).toBe(false);
  });
});

describe('PlanDrawer: progress', () => {
  it('each step shows its progress; a failed step says why and the rest are not run', () => {
    const plan = fourSteps();
    const card = {
      ...cardOf(plan, 'decided'),
      resolution: {
        approval_id: 'apr_1',
        call_id: 'call_plan',
        decision: 'edited' as const,
        approver: 'ada',
        args: {}
      }
    };
    const timeline = [
      update(1, 'cluster_run', 'approved'),
      update(2, 'gpu_estimate', 'approved'),
      update(3, 'cluster_submit', 'edited'),
      update(4, 'cluster_status', 'approved'),
      update(1, 'cluster_run', 'running'),
      update(1, 'cluster_run', 'done', 'lr: 1e-4'),
      update(2, 'gpu_estimate', 'running'),
      update(2, 'gpu_estimate', 'failed', `unknown model ${HOSTILE}`),
      update(3, 'cluster_submit', 'not_run', 'step 2 failed'),
      update(4, 'cluster_status', 'not_run', 'step 2 failed')
    ];
    const { container } = renderDrawer({ plan, timeline }, card, null);
    expect(allByTestId(container, 'betty-plan-grant')).toHaveLength(0);
    expect(allByTestId(container, 'betty-plan-execute')).toHaveLength(0);
    expect(byTestId(container, 'betty-approval-record').textContent).toBe(
      'edited and approved by ada'
    );
    expect(allByTestId(container, 'betty-plan-step').map(row => row.dataset.state)).toEqual([
      'done',
      'failed',
      'not_run',
      'not_run'
    ]);
    const folded = stepRow(container, 3).querySelector('details.betty-PlanDrawer-folded')!;
    expect(folded.querySelector('summary')!.textContent).toBe('submit to betty-dev');
    expect(folded.hasAttribute('open')).toBe(false); // once answered, a preview folds to its title
    const failed = stepRow(container, 2);
    expect(byTestId(failed, 'betty-plan-progress').textContent).toContain(
      'granted → executing → failed'
    );
    expect(byTestId(failed, 'betty-plan-summary').textContent).toContain(
      'unknown model <img src=x'
    );
    expect(failed.querySelector('img')).toBeNull();
    expect(byTestId(stepRow(container, 3), 'betty-plan-summary').textContent).toBe('step 2 failed');
  });

  it('in the chat, a plan with a card is its drawer, and a plan never asked still shows its steps', () => {
    const plan = fourSteps();
    const frame = (type: string, seq: number, payload: unknown) => ({
      type,
      seq,
      session_id: 's',
      ts: seq,
      payload
    });
    const asked = [
      frame('plan', 1, plan),
      frame('approval_request', 2, cardOf(plan).request)
    ].reduce<ITranscript>((s, f) => reduce(s, f), emptyTranscript('s'));
    const props = {
      hasModel: true,
      onSend: jest.fn(),
      onStop: jest.fn(),
      onDecide: jest.fn(),
      onOpen: jest.fn()
    };
    const { container } = render(<ChatView transcript={asked} {...props} />);
    expect(allByTestId(container, 'betty-approval-card')).toHaveLength(1);
    expect(byTestId(container, 'betty-approval-card').dataset.tool).toBe('propose_plan');
    expect(allByTestId(container, 'betty-plan-step')).toHaveLength(4);
    const refused = {
      ...plan,
      plan_id: 'plan_2',
      call_id: 'call_2',
      calls: plan.calls.map(step => ({
        ...step,
        status: 'refused' as const,
        reason: `not allowed ${HOSTILE}`
      }))
    };
    const never = reduce(emptyTranscript('s'), frame('plan', 1, refused));
    const other = render(<ChatView transcript={never} {...props} />).container;
    expect(allByTestId(other, 'betty-plan')).toHaveLength(1);
    expect(allByTestId(other, 'betty-plan-step').map(row => row.dataset.state)).toEqual([
      'refused',
      'refused',
      'refused',
      'refused'
    ]);
    expect(other.textContent).toContain('not allowed <img');
    expect(other.querySelector('img')).toBeNull();
  });
});
