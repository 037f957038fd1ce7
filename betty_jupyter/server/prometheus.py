"""Betty's Prometheus metrics, served by the Jupyter server's own ``/metrics`` (the default registry).

::

    betty_tool_calls_total{tool,decision}   tool calls by how they were decided (the words of
                                            agent.vocabulary.Decision): auto (ran without a card, the
                                            agent's or a person's own call), approved,
                                            approved_for_session, edited (ran after a card), denied,
                                            timed_out, cancelled (did not run), proposed, refused
    betty_approval_wait_seconds             how long approval cards waited for an answer
    betty_slurm_command_seconds{command}    Slurm commands sessions ran, by program (squeue, sbatch, …)
    betty_llm_tokens_total                  tokens the chat model used

Nothing here changes the agent: :func:`instrument` listens to a session's events (approvals,
tool results, budget), reading their fields, never their text, and times the commands of its cluster link by wrapping the transport.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from prometheus_client import Counter, Histogram

from ..agent.vocabulary import Decision
from ..cluster.allowlist import SLURM_PROGRAMS

if TYPE_CHECKING:
    from ..agent import events as ev
    from ..agent.loop import AgentSession
    from ..transport.interface import CommandResult, Transport

TOOL_CALLS = Counter("betty_tool_calls", "Betty tool calls, by tool and by how the call was decided",
                     ["tool", "decision"])
APPROVAL_WAIT = Histogram("betty_approval_wait_seconds", "Seconds an approval card waited for its answer",
                          buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, float("inf")))
SLURM_COMMAND = Histogram("betty_slurm_command_seconds", "Seconds a Slurm command took, seen from Betty",
                          ["command"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")))
LLM_TOKENS = Counter("betty_llm_tokens", "Tokens Betty's chat model used (prompt and completion)")


def instrument(session: "AgentSession") -> None:
    """Count the session's tool calls, approval waits and tokens; time the Slurm commands of its link."""
    session.stream.subscribe(CallCounter(session.tokens))
    slurm = session.context.slurm
    if not isinstance(slurm.transport, TimedTransport):
        slurm.transport = TimedTransport(slurm.transport)


class CallCounter:
    """Follows one session's events: each call is counted once, by the decision its events carry.

    A call that ended in a ``tool_result`` is counted there: ``auto`` when it ran without a card
    (the agent's own or a person's), else the result's ``decision`` (the card's answer,
    ``proposed``, ``refused``). A card that did not let its call run is counted at its
    ``approval_resolved``. Events of one stream arrive one at a time, in order, so no lock is needed.
    """

    def __init__(self, tokens: int = 0) -> None:
        self.tokens = tokens
        self._tools: dict[str, str] = {}  # call_id -> tool, for calls whose card is open
        self._carded: set[str] = set()  # call_ids approved on a card, until their result
        self._asked: dict[str, float] = {}  # approval_id -> when the card was shown

    def __call__(self, event: "ev.AnyEvent") -> None:
        from ..agent import events as ev  # lazy: the events' pydantic models; loading the extension never needs them

        match event:
            case ev.ApprovalRequestEvent(payload=request):
                self._asked[request.approval_id] = event.ts
                self._tools[request.call_id] = request.tool
            case ev.ApprovalResolvedEvent(payload=resolved):
                self._resolved(resolved, event.ts)
            case ev.ToolResultEvent(payload=result):
                carded = result.call_id in self._carded
                self._carded.discard(result.call_id)
                decision = result.decision if carded or not result.decision.ran else Decision.AUTO
                TOOL_CALLS.labels(result.tool, decision.value).inc()
            case ev.BudgetEvent(payload=budget):
                if budget.tokens > self.tokens:
                    LLM_TOKENS.inc(budget.tokens - self.tokens)
                self.tokens = budget.tokens

    def _resolved(self, payload: "ev.ApprovalResolved", ts: float) -> None:
        APPROVAL_WAIT.observe(max(0.0, ts - self._asked.pop(payload.approval_id, ts)))
        tool = self._tools.pop(payload.call_id, "unknown")
        if payload.decision.ran:
            self._carded.add(payload.call_id)
        else:
            TOOL_CALLS.labels(tool, payload.decision.value).inc()


class TimedTransport:
    """A transport that times every Slurm command it carries; everything else is the wrapped one's."""

    def __init__(self, inner: "Transport") -> None:
        self.inner = inner

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> "CommandResult":
        """Run ``argv`` on the wrapped transport, observing its duration when it is a Slurm command."""
        program = argv[0].rsplit("/", 1)[-1] if argv else ""
        began = time.perf_counter()
        try:
            return await self.inner.run(argv, timeout, idempotent=idempotent)
        finally:
            if program in SLURM_PROGRAMS:
                SLURM_COMMAND.labels(program).observe(time.perf_counter() - began)

    async def put(self, data: bytes, remote_path: str) -> str:
        """Upload through the wrapped transport."""
        return await self.inner.put(data, remote_path)

    async def close(self) -> None:
        """Close the wrapped transport."""
        await self.inner.close()
