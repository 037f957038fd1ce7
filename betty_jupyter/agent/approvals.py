"""Approvals: a tool call waits for a person, and fails closed.

The loop asks :meth:`ApprovalBroker.request` for an approval and awaits the returned future;
a front-end answers with :meth:`ApprovalBroker.respond`. A request left unanswered is
resolved ``timed_out`` after its timeout, and ``cancelled`` when its front-end goes away
(:meth:`ApprovalBroker.cancel_all`). Only ``approved``, ``approved_for_session`` and
``edited`` let the tool run (:attr:`Resolution.approved`); anything else means it does not.

Edited arguments are the person's own call: the loop checks them with the tool's argument
model and previews them again (:func:`~betty_jupyter.agent.tools.base.revalidated`), so what
runs is what was shown.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, cast

from pydantic import BaseModel

from ..errors import ApprovalError as ApprovalError  # defined with the others, importable here too
from ..errors import CardChangedError
from .vocabulary import APPROVING, PERSON_ANSWERS, Decision, Resolved

DEFAULT_TIMEOUT = 600.0
_REMEMBERED = 1000  # answered ids kept to tell "answered twice" from "unknown"





class ApprovalInfo(Protocol):
    """What a person is asked (the ``approval_request`` event's payload): only its id matters here."""

    @property
    def approval_id(self) -> str:
        """The approval's unique id, which the answer names."""
        ...


class Resolution(BaseModel):
    """How an approval ended; ``args`` holds the person's edited arguments for ``edited``."""

    decision: Resolved
    approver: str | None = None
    args: dict[str, Any] | None = None
    reason: str = ""

    @property
    def approved(self) -> bool:
        """Whether the tool may run (fail closed: anything else means no)."""
        return self.decision in APPROVING


class Approver(Protocol):
    """Where a session's approval cards wait for a person: an :class:`ApprovalBroker`, or one in front of it.

    An automation's run passes its cards on to the Assistant's broker with a wait of its own (as
    long as the run may last).
    """

    def request(self, request: ApprovalInfo, *, session_id: str | None = None,
                timeout: float | None = None) -> "asyncio.Future[Resolution]":
        """Open ``request`` (emit its event first); the future resolves with the person's answer, or fails closed."""
        ...


@dataclass
class _Pending:
    request: ApprovalInfo
    session_id: str | None
    opened: float
    future: "asyncio.Future[Resolution]"
    timer: asyncio.TimerHandle


class ApprovalBroker:
    """Open approvals of every session on one event loop."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self._answered: dict[str, Resolution] = {}

    def request(self, request: ApprovalInfo, *, session_id: str | None = None,
                timeout: float | None = None) -> "asyncio.Future[Resolution]":
        """Open ``request`` and return the future its resolution arrives on (call inside the running loop).

        Emit the ``approval_request`` event before awaiting the future. ``timeout`` (seconds,
        default the broker's) resolves it ``timed_out``; ``session_id`` lets
        :meth:`cancel_all` close one session's requests.
        """
        approval_id = request.approval_id
        if approval_id in self._pending or approval_id in self._answered:
            raise ApprovalError(f"approval {approval_id} already exists; every request needs a fresh id")
        loop = asyncio.get_running_loop()
        seconds = timeout if timeout is not None and timeout > 0 else self.timeout
        future: asyncio.Future[Resolution] = loop.create_future()
        timer = loop.call_later(seconds, self._resolve, approval_id,
                                Resolution(decision=Decision.TIMED_OUT, reason=f"no answer within {seconds:g} s"))
        self._pending[approval_id] = _Pending(request, session_id, time.monotonic(), future, timer)
        future.add_done_callback(lambda _: self._forget(approval_id))
        return future

    def respond(self, approval_id: str, decision: str, approver: str | None,
                args: Mapping[str, Any] | None = None, digest: str | None = None) -> Resolution:
        """A person's answer; ApprovalError for an unknown id, a second answer or a malformed one, and for an
        answer naming the ``digest`` of a card other than the one open now (what they saw is not what would run)."""
        if approval_id in self._answered:
            earlier = self._answered[approval_id]
            by = f" by {earlier.approver}" if earlier.approver else ""
            raise ApprovalError(f"approval {approval_id} was already resolved ({earlier.decision}{by}); "
                                "nothing changed")
        if approval_id not in self._pending:
            raise ApprovalError(f"no open approval {approval_id[:40]!r}; it may belong to another server")
        if decision not in PERSON_ANSWERS:
            raise ApprovalError(f"answer {decision!r} is not one of {', '.join(PERSON_ANSWERS)}")
        if (decision == Decision.EDITED) != (args is not None):
            raise ApprovalError("edited answers carry the edited arguments, and only they do")
        shown = getattr(self._pending[approval_id].request, "digest", "")
        if digest is not None and digest != shown:
            raise CardChangedError(f"approval {approval_id} shows another card than the one answered (digest "
                                f"{digest[:20]!r}, the card's is {shown[:20]!r}); nothing changed, answer the card "
                                "as it is shown now")
        resolution = Resolution(decision=cast(Resolved, Decision(decision)), approver=approver,
                                args=dict(args) if args is not None else None)
        self._resolve(approval_id, resolution)
        return resolution

    def cancel_all(self, reason: str, session_id: str | None = None) -> list[str]:
        """Resolve every open approval (of one session, when given) ``cancelled``; returns their ids."""
        ids = [i for i, p in self._pending.items() if session_id is None or p.session_id == session_id]
        for approval_id in ids:
            self.cancel(approval_id, reason)
        return ids

    def cancel(self, approval_id: str, reason: str) -> None:
        """Resolve one open approval ``cancelled`` (nothing happens when it is not open)."""
        self._resolve(approval_id, Resolution(decision=Decision.CANCELLED, reason=reason))

    def answered(self, approval_id: str) -> Resolution | None:
        """How an answered approval ended (the newest ones are kept); None while open or when unknown."""
        return self._answered.get(approval_id)

    def pending(self, session_id: str | None = None) -> list[ApprovalInfo]:
        """The open requests (of one session, when given), oldest first: what a reconnecting front-end shows."""
        return [request for _, request in self.waiting(session_id)]

    def waiting(self, session_id: str | None = None) -> list[tuple[str | None, ApprovalInfo]]:
        """The open requests (of one session, when given) with the session each waits in, oldest first."""
        return [(p.session_id, p.request) for p in sorted(self._pending.values(), key=lambda p: p.opened)
                if session_id is None or p.session_id == session_id]

    def _resolve(self, approval_id: str, resolution: Resolution) -> None:
        pending = self._pending.pop(approval_id, None)
        if pending is None:
            return
        pending.timer.cancel()
        self._answered[approval_id] = resolution
        while len(self._answered) > _REMEMBERED:
            del self._answered[next(iter(self._answered))]
        if not pending.future.done():
            pending.future.set_result(resolution)

    def _forget(self, approval_id: str) -> None:
        """The waiter went away (its task was cancelled): the request is closed as cancelled."""
        self._resolve(approval_id, Resolution(decision=Decision.CANCELLED, reason="the waiting call was stopped"))
