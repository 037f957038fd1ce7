"""The switch of one running automation run: the gate before each tool call, pause, kill, and what it used.

The session awaits :meth:`RunControl.gate` before each tool call. While the automation is
paused the gate holds there (``paused_before`` names the waiting tool), so nothing starts
until a person resumes it. :meth:`RunControl.stop` (the kill switch, or the wall-time
breaker) cancels the run at once when no tool is executing — a model reply being streamed,
an approval card or a paused gate is dropped — and otherwise as soon as the executing tool
returns, so a tool is never cut off halfway (a submission is never left half-recorded). Either
way the run stops within one step; a gate reached meanwhile holds until the cancellation comes.

The control also follows the session's events for what the run used (tokens, model turns),
the breaker code of its last error and its last answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Callable

from .. import events as ev
from ..vocabulary import APPROVING

PAUSE_POLL = 1.0
"""How often a held gate looks at the store (a pause or resume from another process)."""


class RunControl:
    """Pause, kill and usage of one run in this process."""

    def __init__(self, paused: Callable[[], bool], *, tokens: int = 0, iterations: int = 0,
                 seconds: float = 0.0) -> None:
        self._paused = paused
        self.stopped: str | None = None
        """Why the run is being stopped: ``killed``, ``time_limit`` or ``lost`` (its lease went to another server)."""
        self.paused_before: str | None = None
        self.task: asyncio.Task[str] | None = None
        self.tokens_before, self.iterations_before, self.seconds_before = tokens, iterations, seconds
        self.tokens, self.iterations = tokens, iterations
        self.began = time.monotonic()
        self.code: str | None = None
        self.error = ""
        self.answer = ""
        self._wake = asyncio.Event()
        self._running: set[str] = set()  # calls past their tool_call event, not waiting for a person, not ended
        self._asking: set[str] = set()  # calls waiting for a person's answer

    # ----- the gate -----------------------------------------------------------------------------
    async def gate(self, tool: str) -> None:
        """Before each tool call: hold while paused; once stopped, hold until the cancellation arrives."""
        while self.stopped or self._paused():
            self.paused_before = tool
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), None if self.stopped else PAUSE_POLL)
        self.paused_before = None

    def wake(self) -> None:
        """Look at the pause again now (a person resumed the automation)."""
        self._wake.set()

    def attach(self, task: "asyncio.Task[str]") -> None:
        """The run's task, once it started (a stop asked before then takes effect now)."""
        self.task = task
        self._cancel_when_idle()

    def stop(self, why: str) -> None:
        """Stop the run: now when no tool is executing, else once it returns."""
        if self.stopped is None:
            self.stopped = why
        self._cancel_when_idle()

    def _cancel_when_idle(self) -> None:
        if self.stopped and not self._running and self.task is not None and not self.task.done():
            self.task.cancel()

    # ----- following the session ------------------------------------------------------------------
    def usage(self) -> dict[str, float]:
        """Tokens, model turns and wall seconds of the run so far, earlier attempts included."""
        return {"tokens": self.tokens, "iterations": self.iterations,
                "seconds": round(self.seconds_before + time.monotonic() - self.began, 3)}

    def __call__(self, event: "ev.AnyEvent") -> None:
        """A subscriber of the session's stream (called on the loop's thread, in order)."""
        match event:
            case ev.ToolCallEvent(payload=call):
                self._running.add(call.call_id)
            case ev.ApprovalRequestEvent(payload=request):
                self._running.discard(request.call_id)
                self._asking.add(request.call_id)
            case ev.ApprovalResolvedEvent(payload=resolved):
                self._asking.discard(resolved.call_id)
                if resolved.decision in APPROVING:
                    self._running.add(resolved.call_id)
                self._cancel_when_idle()
            case ev.ToolResultEvent(payload=result):
                self._running.discard(result.call_id)
                self._cancel_when_idle()
            case ev.BudgetEvent(payload=budget):
                self.tokens = self.tokens_before + budget.tokens
                self.iterations = self.iterations_before + budget.iterations
            case ev.ErrorEvent(payload=error):
                self.code, self.error = error.code, error.message
            case ev.MessageEvent(payload=message) if message.role == "assistant":
                self.answer = message.text
