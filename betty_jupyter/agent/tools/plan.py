"""``propose_plan``: the agent shows every state-changing step of a request at once, for one answer."""

from __future__ import annotations

from typing import NoReturn

from ..models import Preview, Tier, ToolOutcome
from ..plans import PLAN_TOOL, PlanArgs
from .base import Tool, ToolContext, ToolError


class ProposePlan(Tool[PlanArgs]):
    """A plan: the session checks each step with its policy and previews it, then asks the person once.

    The session itself answers this tool's calls (:mod:`betty_jupyter.agent.plans`): checking a
    plan needs the session's policy, which a tool does not hold.
    """

    name = PLAN_TOOL
    description = ("Before a request that needs more than one step that changes something (submit, cancel, write a "
                   "page), propose all the steps at once: each a tool, its exact arguments and the earlier steps it "
                   "needs. Betty checks and previews every step and the person answers the plan once, per step. "
                   "Then call the granted steps in order with exactly the arguments the answer lists; a call with "
                   "other arguments asks the person again, and a denied step is refused.")
    Args = PlanArgs
    tier = Tier.ALWAYS_ASK

    async def preview(self, ctx: ToolContext, args: PlanArgs) -> Preview:
        """Never called: the session previews a plan step by step."""
        _session_only()

    async def run(self, ctx: ToolContext, args: PlanArgs) -> ToolOutcome:
        """Never called: the session runs a plan's steps as the model calls them."""
        _session_only()


def _session_only() -> NoReturn:
    raise ToolError(f"{PLAN_TOOL}: a plan is checked and answered by an agent session; call it from one")
