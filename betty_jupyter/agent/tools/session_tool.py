"""``SessionTool``: a tool whose calls its session hands back to it, with a face of itself.

Most tools are answered by the loop: decided, previewed, approved, run, logged. A tool whose answer
needs the session itself (checking other calls with its policy, as ``propose_plan`` does) subclasses
:class:`SessionTool`: once the policy has let the call through, the loop calls :meth:`SessionTool.answer`
with a :class:`~betty_jupyter.agent.turn.SessionFace` bound to the call, and the tool shows its own
card, logs and answers. Its tier, the policy's decision before it, the action log and the events are
the same as any tool's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NoReturn, TypeVar

from pydantic import BaseModel

from .base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from ..models import Preview, ToolOutcome
    from ..turn import Answer, SessionFace

A = TypeVar("A", bound=BaseModel)


class SessionTool(Tool[A]):
    """A tool the session answers through the tool itself; :meth:`preview` and :meth:`run` refuse outside one."""

    async def answer(self, session: "SessionFace", args: A, tier: int, action: str) -> "Answer":
        """Answer one call the policy let through (``action``: ``allow``, ``ask`` or ``propose``, the mode's)."""
        raise NotImplementedError

    async def review(self, session: "SessionFace", proposal: Mapping[str, Any], answer: Mapping[str, Any]) -> "Preview":
        """The preview of a person's ``answer`` to this tool's open card (``proposal``: the call's arguments),
        checked as the call's own answer would be; ToolError (one line) when it is refused. Nothing is kept."""
        raise ToolError("this card is answered as shown; there is no answer to check")

    async def preview(self, ctx: ToolContext, args: A) -> "Preview":
        """Never called by a session: it answers through :meth:`answer`."""
        self._session_only()

    async def run(self, ctx: ToolContext, args: A) -> "ToolOutcome":
        """Never called by a session: it answers through :meth:`answer`."""
        self._session_only()

    def _session_only(self) -> NoReturn:
        raise ToolError("this is answered in a chat with Betty; ask there")
