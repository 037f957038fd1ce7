"""How one call is answered, and what a tool that answers its own calls may use of its session.

The loop (:mod:`.loop`) answers every call the same way: decided by the policy, previewed and
approved when it must be, run, logged. A tool that cannot be answered so, because answering it
means checking other calls with the session's policy (``propose_plan``), is a
:class:`~.tools.session_tool.SessionTool`: the loop hands it a :class:`SessionFace` of itself,
bound to the one call, and takes the :class:`Answer` it returns. What such a tool leaves standing
for the rest of the turn (a plan a person answered) is a :class:`Standing`: the loop asks it about
every later call, without knowing what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol, TypeVar

from .models import ToolOutcome
from .vocabulary import Decision

if TYPE_CHECKING:
    from .approvals import Resolution
    from .events import EventStream
    from .models import Preview
    from .policy import Ruling
    from .registry import ToolRegistry
    from .tools.base import Tool, ToolContext

S = TypeVar("S")


@dataclass
class Approval:
    """How a call came to run (or not): the decision, who made it, what they saw."""

    decision: Decision
    approver: str | None = None
    preview: "Preview | None" = None
    digest: str | None = None
    """The digest of the card that was answered (None when no card was shown)."""
    second: str | None = None
    """The site's second approver who approved this very card too (a job above the site's limits)."""


@dataclass(frozen=True)
class Answer:
    """How one call ended: what it did, and what the model is told about it."""

    outcome: ToolOutcome
    told: str
    denied: bool = False
    """A person denied it: the turn ends once every call of the reply is answered."""


class Standing(Protocol[S]):
    """A person's answer that stands until the turn ends (a plan): the later calls it covers or refuses.

    ``S`` is what a call holds while it is decided and run (a plan's step).
    """

    def refusal(self, tool: str, canonical: Mapping[str, Any]) -> str | None:
        """Why a call of ``tool`` with these rule values never runs (the person denied it), or None."""
        ...

    def claim(self, tool: str, canonical: Mapping[str, Any]) -> S | None:
        """What this call is of the standing answer, held for it until :meth:`release`; None when nothing."""
        ...

    def release(self, held: S) -> None:
        """The call holding ``held`` has ended."""
        ...

    async def approval(self, held: S, tool: "Tool[Any]", args: Any, context: "ToolContext") -> Approval | None:
        """The standing approval of this exact call, when it still previews as approved; None: show its card."""
        ...

    def running(self, held: S, call_id: str) -> None:
        """The call runs now."""
        ...

    def ran(self, held: S, call_id: str, outcome: ToolOutcome) -> str | None:
        """The call ended; a line for the person when that stops the rest."""
        ...

    def stop(self, why: str) -> Any:
        """Nothing more of it runs (the turn ended, a newer one replaced it)."""
        ...


class SessionFace(Protocol):
    """What a tool that answers its own call may use of the session, bound to that one call."""

    @property
    def registry(self) -> "ToolRegistry":
        """The session's tools."""
        ...

    @property
    def context(self) -> "ToolContext":
        """What the session's tools use."""
        ...

    @property
    def stream(self) -> "EventStream":
        """The session's events."""
        ...

    @property
    def call_id(self) -> str:
        """The id of the call being answered."""
        ...

    def decide(self, tool: "Tool[Any]", args: Any, tier: int) -> "Ruling":
        """The session's policy for a call of ``tool`` made by whoever made this one."""
        ...

    def site_refusal(self, preview: "Preview") -> str | None:
        """Why the site refuses the job ``preview`` shows (above its limits), or None."""
        ...

    async def card(self, tier: int, args: Any, preview: "Preview", reason: str) -> "tuple[Resolution, Approval]":
        """This call's card shown, bound to ``preview``, and the person's answer (or none) with its approval."""
        ...

    def log(self, tier: int, args: Any, approval: Approval, outcome: ToolOutcome | None) -> None:
        """This call written to the action log (and its result to the events)."""
        ...

    def refused(self, message: str, tier: int) -> Answer:
        """This call refused in one line, logged."""
        ...

    def not_approved(self, tier: int, args: Any, approval: Approval, resolution: "Resolution") -> Answer:
        """This call's card was not approved: logged, and the model told it did not run."""
        ...

    def stand(self, standing: "Standing[Any]") -> None:
        """``standing`` covers the later calls of this turn (it replaces, and stops, any older one)."""
        ...
