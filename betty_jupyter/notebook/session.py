"""This notebook's Betty: the backend, the cluster in use, one session per cluster, and its events.

Events arrive from another thread (Betty's event loop, or the poller of the server's
events); :class:`NotebookBetty` hands each one to whoever follows its call (a
:class:`Call`) or its session (a chat). Nothing here blocks the kernel on a person: a call
that needs an approval returns as soon as the approval is asked, and the card drives the
rest.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..agent.vocabulary import MODES, Mode
from ..errors import UsageError

if TYPE_CHECKING:
    from ..agent.events import AnyEvent, ApprovalRequest
    from ..agent.models import Preview, ToolOutcome
    from .backend import Backend

Listener = Callable[["AnyEvent"], None]
PROGRESS_AFTER = 1.0  # seconds before a waiting cell shows what it waits for


class Call:
    """A person's tool call in flight: its outcome future and, when it asks, the approval request."""

    def __init__(self, call_id: str, tool: str) -> None:
        self.call_id, self.tool = call_id, tool
        self.future: Future[ToolOutcome] = Future()
        self.approval: ApprovalRequest | None = None
        self.answerable_elsewhere = False
        """Whether a person can answer its approval while this kernel is busy (the side panel, on a server)."""
        self.asked = threading.Event()
        self._settled = threading.Event()
        """Set once the call is done or asks a person: what :meth:`settle` waits for."""
        self.future.add_done_callback(lambda _: self._settled.set())
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def on_event(self, event: "AnyEvent") -> None:
        """One of this call's events (from another thread)."""
        from ..agent import events as ev  # lazy: pydantic; `%load_ext betty_jupyter` never needs it

        if isinstance(event, ev.ApprovalRequestEvent):
            self.approval = event.payload
            self.asked.set()
            self._settled.set()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)

    @property
    def outcome(self) -> "ToolOutcome | None":
        """What the call did, once it is done (None while it runs or waits for a person)."""
        if not self.future.done() or self.future.exception() is not None:
            return None
        return self.future.result()

    @property
    def data(self) -> Any:
        """The outcome's data once done: the submitted Experiment, the Job, the DataFrame…"""
        return None if self.outcome is None else self.outcome.data

    @property
    def job_id(self) -> str | None:
        """The job id, for a submission once it was approved and submitted."""
        return getattr(self.data, "job_id", None)

    def wait(self, timeout: float = 60.0) -> Any:
        """The outcome's data once the call ran; UsageError when it is refused or still waits for a person.

        The card's buttons cannot be clicked while a cell runs, so when only this notebook can
        answer, a call still waiting for approval is an error at once; when Betty runs in the
        server (the side panel can answer), it waits up to ``timeout`` seconds.
        """
        if not self.future.done() and self.asked.is_set():
            if not self.answerable_elsewhere:
                raise UsageError(f"{self.tool} waits for your approval: answer its card above, then run this "
                                 "cell again")
            try:
                self.future.result(timeout)
            except TimeoutError:
                raise UsageError(f"{self.tool} still waits for approval after {timeout:g} s") from None
        outcome = self.future.result()
        if not outcome.ok:
            raise UsageError(f"{self.tool} did not run: {(outcome.summary.splitlines() or [''])[0]}")
        return outcome.data

    def state(self) -> str:
        """``waiting for your approval``, ``running``, ``done`` or ``failed: …``."""
        outcome = self.outcome
        if outcome is not None:
            return "done" if outcome.ok else f"failed: {(outcome.summary.splitlines() or [''])[0]}"
        if self.future.done():
            return f"failed: {self.future.exception()}"
        return "waiting for your approval" if self.asked.is_set() and self.approval else "running"

    def __repr__(self) -> str:
        job = f", job {self.job_id}" if self.job_id else ""
        return f"<Betty call {self.tool}: {self.state()}{job}>"

    def follow(self, listener: Listener) -> None:
        """Send this call's later events to ``listener`` too (a card, a status line)."""
        with self._lock:
            self._listeners.append(listener)

    def settle(self, waiting: Callable[[], Callable[[], None]] | None = None) -> bool:
        """Wait until the call is done (True) or waits for a person (False).

        ``waiting`` is called when this takes longer than :data:`PROGRESS_AFTER` seconds; it shows
        a progress indicator and returns the function that removes it.
        """
        done = self._wait(PROGRESS_AFTER)
        if done is not None:
            return done
        remove = waiting() if waiting else None
        try:
            while True:
                done = self._wait(0.1)
                if done is not None:
                    return done
        finally:
            if remove:
                remove()

    def _wait(self, seconds: float) -> bool | None:
        """True once done, False once a person is asked, None when neither happened in ``seconds``."""
        self._settled.wait(seconds)
        if self.future.done():
            return True
        return False if self.asked.is_set() else None


class NotebookBetty:
    """Betty in one notebook: which cluster, which session, who follows which events."""

    def __init__(self, backend: "Backend", mode: str = Mode.CONFIRM) -> None:
        self.backend = backend
        self.cluster: str | None = None
        self.mode = mode
        self._chosen = False  # a mode the person chose here; until then sessions start in Betty's (the site's)
        self.tag = uuid.uuid4().hex[:8]
        self._sessions: dict[str | None, str] = {}
        self._users: dict[str, str | None] = {}
        self._calls: dict[str, Call] = {}
        # ids of the person's calls (the newest 10,000), so chats never show them
        self._mine: set[str] = set()
        self._mine_order: deque[str] = deque()
        self._followers: dict[str, list[Listener]] = {}
        self._lock = threading.Lock()

    # ----- clusters and sessions ---------------------------------------------------------------
    def use(self, cluster: str) -> str:
        """Work on ``cluster`` from now on; UsageError naming the configured ones when it is unknown."""
        names = [c["name"] for c in self.backend.clusters()]
        if cluster not in names:
            raise UsageError(f"no cluster called {cluster!r}; configured: {', '.join(names) or 'none'} "
                             "(add one with `betty cluster add`)")
        self.cluster = cluster
        return cluster

    def session_id(self) -> str:
        """The session of the cluster in use, opened (and followed) the first time."""
        with self._lock:
            known = self._sessions.get(self.cluster)
        if known:
            return known
        label = (self.cluster or "default").replace(".", "_")
        wanted = f"nb-{self.tag}-{label}"[:64]
        info = self.backend.open_session(wanted, self.cluster, self.mode if self._chosen else None)
        ident = str(info["session_id"])
        self.mode = str(info.get("mode") or self.mode)
        self.backend.subscribe(ident, self._route, after=int(info.get("last_seq", 0)))
        with self._lock:
            self._sessions[self.cluster] = ident
            self._users[ident] = info.get("user")
        return ident

    def user(self) -> str | None:
        """The person's login name on the cluster in use (None when the cluster did not say)."""
        return self._users.get(self.session_id())

    def set_mode(self, mode: str) -> None:
        """The agent's mode in this notebook's sessions (now and later)."""
        if mode not in MODES:
            raise UsageError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        self.backend.site().check_mode(mode)  # SiteRefusal: "your site does not allow auto mode; …"
        for ident in list(self._sessions.values()):
            self.backend.set_mode(ident, mode)  # SiteRefusal (or the server's 403) when the site does not allow it
        self.mode, self._chosen = mode, True

    # ----- calls and events ----------------------------------------------------------------------
    def start(self, tool: str, args: Mapping[str, Any]) -> Call:
        """Start a person's call of ``tool``; follow it with the returned :class:`Call`."""
        session = self.session_id()
        call = Call(f"nb_{uuid.uuid4().hex[:12]}", tool)
        call.answerable_elsewhere = self.backend.shared
        with self._lock:
            self._calls[call.call_id] = call
            self._mine.add(call.call_id)
            self._mine_order.append(call.call_id)
            if len(self._mine_order) > 10_000:
                self._mine.discard(self._mine_order.popleft())
        future = self.backend.start_call(session, tool, args, call.call_id)
        future.add_done_callback(lambda done: self._finished(call, done))
        return call

    def _finished(self, call: Call, done: "Future[ToolOutcome]") -> None:
        with self._lock:
            self._calls.pop(call.call_id, None)
        error = done.exception()
        if error is not None:
            call.future.set_exception(error)
        else:
            call.future.set_result(done.result())

    def follow(self, listener: Listener) -> Callable[[], None]:
        """Send the current session's events to ``listener`` (not those of the person's own calls: each
        :class:`Call` has them); returns the function that stops it."""
        session = self.session_id()
        with self._lock:
            self._followers.setdefault(session, []).append(listener)

        def stop() -> None:
            with self._lock:
                if listener in self._followers.get(session, []):
                    self._followers[session].remove(listener)

        return stop

    def _route(self, event: "AnyEvent") -> None:
        call_id = getattr(event.payload, "call_id", None)
        with self._lock:
            call = self._calls.get(call_id) if call_id else None
            mine = call_id is not None and call_id in self._mine
            followers = [] if mine else list(self._followers.get(event.session_id, []))
        if call is not None:
            call.on_event(event)
        for listener in followers:
            listener(event)

    def respond(self, approval_id: str, decision: str, args: Mapping[str, Any] | None = None,
                digest: str | None = None) -> None:
        """Answer an approval as the person at this notebook (``digest``: the card they saw)."""
        self.backend.respond(approval_id, decision, args, digest)

    def repreview(self, approval_id: str, args: Mapping[str, Any]) -> "Preview":
        """A person's edit of an open card, checked by the same code as the model's call and previewed again."""
        return self.backend.repreview(approval_id, args)

    def start_estimate(self, approval_id: str) -> str:
        """When and where an open submission card's job would start, one line ("" for other cards)."""
        return self.backend.start_estimate(approval_id)
