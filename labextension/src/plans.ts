/**
 * Plans in the panel: what the transcript keeps of each plan (its checked steps and every
 * `plan_step` event, in order), and the plan drawer's answer — each step granted, denied or
 * edited — as the approval routes take it (docs/plans.md).
 *
 * Pure functions only; the drawer itself is `components/PlanDrawer.tsx`.
 */
import { IPlan, IPreview } from './events';
import { IPlanStep, IPlanStepUpdate, StepStatus } from './contract/events';

export type { IPlanStep, IPlanStepUpdate, StepStatus };

/** The tool whose card is a plan. */
export const PLAN_TOOL = 'propose_plan';

/** A plan as the transcript keeps it: the checked steps and their progress since. */
export interface IPlanProgress {
  plan: IPlan;
  /** Every `plan_step` event of the plan, in the order they came: the plan's timeline. */
  timeline: IPlanStepUpdate[];
}

/** The plans of a session by `plan_id`. */
export type Plans = Record<string, IPlanProgress>;

/** `plans` with plan `plan` added (a plan seen again keeps its progress). */
export function withPlan(plans: Plans, plan: IPlan): Plans {
  if (plans[plan.plan_id]) {
    return plans;
  }
  return { ...plans, [plan.plan_id]: { plan, timeline: [] } };
}

/** `plans` with one step's progress added; an update of a plan this panel never saw is dropped. */
export function withStepUpdate(plans: Plans, update: IPlanStepUpdate): Plans {
  const progress = plans[update.plan_id];
  if (!progress) {
    return plans;
  }
  return {
    ...plans,
    [update.plan_id]: { ...progress, timeline: [...progress.timeline, update] }
  };
}

/** Whether a plan is shown by its drawer: it carries its steps, structured (a `propose_plan` plan). */
export function hasDrawer(plan: IPlan): boolean {
  return Array.isArray(plan.calls) && plan.calls.length > 0;
}

/** The plan proposed by call `callId` (its card carries the same call id), or null. */
export function planOfCall(plans: Plans, callId: string): IPlanProgress | null {
  return Object.values(plans).find(progress => progress.plan.call_id === callId) ?? null;
}

/** Step `index`'s latest progress, or null before any. */
export function latestUpdate(progress: IPlanProgress, index: number): IPlanStepUpdate | null {
  for (let i = progress.timeline.length - 1; i >= 0; i--) {
    if (progress.timeline[i].index === index) {
      return progress.timeline[i];
    }
  }
  return null;
}

/** Step `index`'s statuses since the plan was answered, in order, repeats dropped. */
export function statusTrail(progress: IPlanProgress, index: number): StepStatus[] {
  const trail: StepStatus[] = [];
  for (const update of progress.timeline) {
    if (update.index === index && trail[trail.length - 1] !== update.status) {
      trail.push(update.status);
    }
  }
  return trail;
}

// ----- the drawer's answer -------------------------------------------------------------------

/** A person's answer to one step. */
export type StepDecision = 'approved' | 'edited' | 'denied';

/** One step's answer; `args` and `preview` only for an edited step (its checked arguments and new preview). */
export interface IStepAnswer {
  decision: StepDecision;
  args?: Record<string, unknown>;
  preview?: IPreview;
}

/** How the granted steps run: without another card, or each still asking as it comes. */
export type PlanRun = 'whole' | 'step_by_step';

/** Every step granted as previewed: the drawer's answer before the person changes anything. */
export function initialAnswers(plan: IPlan): IStepAnswer[] {
  return plan.calls.map(() => ({ decision: 'approved' }));
}

/** `answers` with step `index` (1, 2, …) answered `answer`. */
export function answerStep(
  answers: IStepAnswer[],
  index: number,
  answer: IStepAnswer
): IStepAnswer[] {
  return answers.map((each, i) => (i === index - 1 ? answer : each));
}

/**
 * The numbers of the granted steps that will not run because a step they need (directly or
 * through another step) is denied — as Betty decides it when the answer arrives.
 */
export function willNotRun(plan: IPlan, answers: IStepAnswer[]): Set<number> {
  const blocked = new Set<number>();
  plan.calls.forEach((step, i) => {
    const runs = (n: number) => answers[n - 1]?.decision !== 'denied' && !blocked.has(n);
    if (answers[i]?.decision !== 'denied' && !step.depends_on.every(runs)) {
      blocked.add(step.index);
    }
  });
  return blocked;
}

/** The first step a blocked step needs that will not run, for its "needs step N" line. */
export function blockedBy(plan: IPlan, answers: IStepAnswer[], index: number): number | null {
  const blocked = willNotRun(plan, answers);
  const step = plan.calls[index - 1];
  return (
    step?.depends_on.find(n => answers[n - 1]?.decision === 'denied' || blocked.has(n)) ?? null
  );
}

/** The answer the approval routes take: one entry per step, in order, and how the plan runs. */
export function planAnswer(answers: IStepAnswer[], run: PlanRun): Record<string, unknown> {
  return {
    steps: answers.map(({ decision, args }) =>
      decision === 'edited' ? { decision, args } : { decision }
    ),
    run
  };
}

/** Whether the answer is the plan exactly as proposed, run whole: a plain `approved` says it. */
export function grantsAsProposed(answers: IStepAnswer[], run: PlanRun): boolean {
  return run === 'whole' && answers.every(answer => answer.decision === 'approved');
}

/**
 * The preview route's answer for an answer with one edited step: that step's own preview,
 * or an Error when the server's preview does not carry it.
 */
export function stepPreview(preview: IPreview, index: number): IPreview {
  const calls = preview.details?.calls;
  const step = Array.isArray(calls)
    ? (calls[index - 1] as Partial<IPlanStep> | undefined)
    : undefined;
  if (!step || typeof step !== 'object' || !step.preview) {
    throw new Error(`the server's preview of the plan does not show step ${index}`);
  }
  return step.preview;
}

/** An answer with every step granted as proposed except step `index`, edited to `args`: what its check sends. */
export function editCheck(
  plan: IPlan,
  index: number,
  args: Record<string, unknown>
): Record<string, unknown> {
  const answers = answerStep(initialAnswers(plan), index, {
    decision: 'edited',
    args
  });
  return planAnswer(answers, 'whole');
}

/** How a step's status reads in the drawer. */
export const STATUS_WORDS: Record<StepStatus, string> = {
  proposed: 'proposed',
  refused: 'refused',
  approved: 'granted',
  edited: 'granted as edited',
  denied: 'denied',
  running: 'executing',
  done: 'done',
  failed: 'failed',
  not_run: 'not run'
};
