"""``propose_plan``: the agent shows every state-changing step of a request at once, for one answer.

Answering a plan needs the session: each step is checked with the session's policy, the person
answers one card, and what they granted stands for the rest of the turn. So this is a
:class:`~.session_tool.SessionTool`: the session hands each call here with a face of itself; the
plan's pieces (steps, answers, the plan that stands) are in :mod:`betty_jupyter.agent.plans`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import BettyError
from ..models import Preview, Tier, ToolOutcome
from ..plans import (GRANTED, PLAN_TOOL, ActivePlan, Decide, PlanAnswer, PlanArgs, Step, answer_preview, answered,
                     check_plan, plan_event, plan_preview, told)
from ..turn import Answer, Approval
from ..vocabulary import Decision, StepStatus
from .base import ToolError
from .session_tool import SessionTool

if TYPE_CHECKING:
    from ..turn import SessionFace


class ProposePlan(SessionTool[PlanArgs]):
    """A plan: each step checked with the session's policy and previewed, then one card for the person."""

    name = PLAN_TOOL
    description = ("Before a request that needs more than one step that changes something (submit, cancel, write a "
                   "page), propose all the steps at once: each a tool, its exact arguments and the earlier steps it "
                   "needs. Betty checks and previews every step and the person answers the plan once, per step. "
                   "Then call the granted steps in order with exactly the arguments the answer lists; a call with "
                   "other arguments asks the person again, and a denied step is refused.")
    Args = PlanArgs
    tier = Tier.ALWAYS_ASK
    chat_only = True

    async def answer(self, session: "SessionFace", args: PlanArgs, tier: int, action: str) -> Answer:
        """Check each step, show the plan, ask once, and leave what the person granted standing for the turn."""
        steps = _within_site(session, await check_plan(args, session.registry, session.context, _decide(session)))
        plan_id = f"plan_{uuid.uuid4().hex[:12]}"
        session.stream.emit("plan", plan_event(plan_id, session.call_id, args.goal, steps))
        refused = [step for step in steps if step.status == StepStatus.REFUSED]
        if refused:
            return session.refused("refused by Betty's policy, nothing was asked: " + "; ".join(
                f"step {step.number} ({step.tool}): {step.reason}" for step in refused), tier)
        preview = plan_preview(args.goal, steps)
        if action == "propose":
            outcome = ToolOutcome(ok=True, summary=f"proposed, not run (Betty is in propose mode):\n{preview.text}")
            session.log(tier, args, Approval(Decision.PROPOSED, None, preview), outcome)
            return Answer(outcome, outcome.summary)
        resolution, approval = await session.card(tier, args, preview, "a plan: one answer for its steps, each "
                                                  "step granted, denied or edited")
        if not resolution.approved:
            return session.not_approved(tier, args, approval, resolution)
        try:
            answer = PlanAnswer.read(resolution.args or {"steps": [{"decision": "approved"}] * len(steps)})
            steps = _edits_within_site(session, await answered(steps, answer, session.registry, session.context,
                                                               _decide(session)))
        except BettyError as error:
            return session.refused(str(error), tier)
        plan = ActivePlan(plan_id, steps, answer.run, resolution.approver, session.stream)
        session.stand(plan)
        plan.announce()
        approval.preview = plan_preview(args.goal, steps)
        granted = sum(step.status in GRANTED for step in steps)
        outcome = ToolOutcome(ok=True, summary=f"plan answered: {granted} of {len(steps)} steps granted")
        session.log(tier, args, approval, outcome)
        return Answer(outcome, told(steps, answer.run))

    async def review(self, session: "SessionFace", proposal: Mapping[str, Any], answer: Mapping[str, Any]) -> Preview:
        """The preview of a person's answer to an open plan card, each edit checked and previewed by the same tool
        and policy code as the model's call; ToolError (one line) when the answer is refused."""
        plan = self.parse(dict(proposal))
        decide = _decide(session)
        steps = await check_plan(plan, session.registry, session.context, decide)
        steps = _edits_within_site(session, await answered(steps, PlanAnswer.read(answer), session.registry,
                                                           session.context, decide))
        return answer_preview(plan.goal, steps)


def _decide(session: "SessionFace") -> Decide:
    return lambda tool, args, tier: session.decide(tool, args, tier)


def _within_site(session: "SessionFace", steps: list[Step]) -> list[Step]:
    """The steps with each job the site's limits refuse marked refused, at the card (never first when it runs)."""
    for step in steps:
        refusal = None if step.preview is None else session.site_refusal(step.preview)
        if refusal is not None and step.status != StepStatus.REFUSED:
            step.status, step.reason = StepStatus.REFUSED, refusal
    return steps


def _edits_within_site(session: "SessionFace", steps: list[Step]) -> list[Step]:
    """The answered steps; ToolError (one line) for an edit into a job the site's limits refuse."""
    for step in steps:
        refusal = None if step.preview is None else session.site_refusal(step.preview)
        if step.status == StepStatus.EDITED and refusal is not None:
            raise ToolError(f"step {step.number} ({step.tool}): the edited call is refused: {refusal}")
    return steps
