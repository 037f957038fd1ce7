"""A person's own call of a tool from a face that keeps no session (the terminal's ``betty submit``).

It goes through the same :class:`~betty_jupyter.agent.loop.AgentSession` as the agent's and the
panel's calls: the same tool, the same rules and tiers (tier 2 still shows its exact preview and
waits for an answer), the same action log line with the person as approver. The face only
supplies ``answer``: how a card is answered where it runs (a prompt on the terminal, ``--yes``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from . import events as ev
from .approvals import ApprovalBroker
from .session import SessionSpec, open_session
from .vocabulary import Decision

if TYPE_CHECKING:
    from ..config import BettyConfig
    from ..experiments.workspace import Workspace
    from .models import ToolOutcome

Answer = Callable[["ev.ApprovalRequest"], Awaitable[Decision]]
"""Shows a card's preview to the person and returns their answer (approved or denied)."""


async def call_as_person(workspace: "Workspace", config: "BettyConfig", tool: str, args: Mapping[str, Any], *,
                         person: str, answer: Answer, cluster: str | None = None) -> "ToolOutcome":
    """Run ``tool`` with ``args`` as ``person``'s own call; every card it raises is answered by ``answer``.

    Refusals (a rule, bad arguments, a failed preview, a denied card) come back as
    ``ToolOutcome(ok=False)`` with one line for the person, as they do in every face.
    """
    broker = ApprovalBroker()
    answering: set[asyncio.Task[None]] = set()

    async def answer_card(request: "ev.ApprovalRequest") -> None:
        try:
            decision = await answer(request)
        except Exception:  # a card nobody could answer fails closed
            decision = Decision.DENIED
        broker.respond(request.approval_id, decision, person)

    def on_event(event: "ev.AnyEvent") -> None:
        if isinstance(event, ev.ApprovalRequestEvent):
            task = asyncio.get_running_loop().create_task(answer_card(event.payload))
            answering.add(task)
            task.add_done_callback(answering.discard)

    # one call, never a model's turn: no prompt is written, its facts about the cluster are not asked, no other tool
    # is loaded
    session = await open_session(workspace, config, SessionSpec(cluster=cluster, broker=broker, listeners=(on_event,),
                                                                require_model=False, reads_cluster_facts=False,
                                                                prompts_model=False,
                                                                tools=(tool,)))
    try:
        return await session.run_tool(tool, args, person)
    finally:
        await session.context.close()
