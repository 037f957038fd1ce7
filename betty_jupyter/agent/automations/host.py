"""What the runner gives the code that runs an automation's run: the host it runs in, and the run's session.

Both the runner (for a run a model answers) and a built-in automation's code (the job
babysitter) open a run's session with :func:`open_run_session`: on the Assistant's action
log, its cards on the Assistant's broker through a :class:`PatientBroker` (they wait as long
as the run may last), its events in the run's transcript, and the host's ``on_session`` told.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from ..session import open_session
from .transcripts import TranscriptWriter, transcript_path

if TYPE_CHECKING:
    from ..approvals import ApprovalBroker, ApprovalInfo, Resolution
    from ..assistant import Assistant
    from ..loop import AgentSession
    from ..session import SessionSpec
    from .definitions import Automation, Run


class RunHost(Protocol):
    """The runner as a run's code sees it."""

    @property
    def assistant(self) -> "Assistant":
        """The Assistant whose workspace, configuration, broker and action log the runs use."""
        ...

    @property
    def on_session(self) -> "Callable[[AgentSession], None] | None":
        """Called with each run's session as it opens (the server counts its calls for Prometheus)."""
        ...

    def keep(self, ident: str, task: "asyncio.Task[Any]") -> None:
        """Hold a task a built-in run of ``ident`` left behind (a card waiting for a person); kill and close end it."""
        ...


BuiltInRun = Callable[[RunHost, "Automation", "Run"], Awaitable[tuple[str, "str | None", str]]]
"""Code that runs a built-in automation's run in place of a model; returns (status, code, result)."""


class PatientBroker:
    """The Assistant's broker, whose cards for one run wait as long as the run may last (an ``Approver``)."""

    def __init__(self, broker: "ApprovalBroker", timeout: float) -> None:
        self.broker, self.timeout = broker, timeout

    def request(self, request: "ApprovalInfo", *, session_id: str | None = None,
                timeout: float | None = None) -> "asyncio.Future[Resolution]":
        """Open the card on the shared broker, with the run's wait."""
        return self.broker.request(request, session_id=session_id, timeout=timeout or self.timeout)


async def open_run_session(host: RunHost, run: "Run", spec: "SessionSpec", wait: float) -> "AgentSession":
    """The session of ``run`` as ``spec`` asks for it, on the Assistant's broker (cards waiting ``wait`` seconds)."""
    assistant = host.assistant
    transcript = TranscriptWriter(transcript_path(assistant.workspace.state, run.id), run.attempts)
    session = await open_session(assistant.workspace, assistant.config, replace(
        spec, session_id=run.session_id, broker=PatientBroker(assistant.broker, wait), actions=assistant.actions,
        listeners=(*spec.listeners, transcript), require_model=False))
    assistant.adopt(session)
    if host.on_session is not None:
        host.on_session(session)
    return session
