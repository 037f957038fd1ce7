"""``Assistant``: one researcher's Betty in one process, whichever face they use.

The server extension owns one for the side panel (and for notebooks whose kernel runs
under that server); a notebook whose server has no Betty extension owns one in its kernel.
Either way the same object holds the sessions, the approval broker, the job watcher and the
action log, so a magic, a panel button and the agent go through the same tools, policy and
log. All of its coroutines run on one event loop. Its sessions and its watcher reach each cluster
through the process's one link to it (:func:`~betty_jupyter.cluster.shared.shared_cluster`), which
the process, not the Assistant, closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ApprovalError, BettyError, UsageError
from ..experiments.watcher import ClusterClients, JobWatcher
from . import events as ev
from .actions import ActionLog
from .approvals import DEFAULT_TIMEOUT, ApprovalBroker
from .bulletin import ContextBulletin
from .policy import ApprovalPolicy
from .session import SessionSpec, new_session_id, open_session, save
from .vocabulary import DoneReason, Mode

if TYPE_CHECKING:
    from ..config import BettyConfig
    from ..experiments.watcher import JobUpdate
    from ..experiments.workspace import Workspace
    from .actions import ActionRecord
    from .approvals import Resolution
    from .loop import AgentSession
    from .models import Preview, ToolOutcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionInfo:
    """What a front-end lists about a session."""

    session_id: str
    cluster: str
    mode: str
    busy: bool
    last_seq: int
    has_model: bool
    user: str | None = None
    model: str | None = None
    """The chat model's name as its answers carry it (None: no model)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)


class Assistant:
    """Every session, approval and watched job of one workspace in this process."""

    def __init__(self, workspace: "Workspace", config: "BettyConfig", *, mode: str = Mode.CONFIRM,
                 approval_timeout: float = DEFAULT_TIMEOUT) -> None:
        mode = config.site.starting_mode(mode)  # a start-up mode the site does not allow: the site's default
        ApprovalPolicy(mode, config.rules, config.site)  # a bad mode or bad rules fail here, not at the first call
        self.workspace, self.config, self.mode = workspace, config, mode
        self.broker = ApprovalBroker(timeout=approval_timeout)
        self.actions: ActionLog = ActionLog(workspace.root)
        self._sessions: dict[str, AgentSession] = {}
        self._elsewhere: weakref.WeakValueDictionary[str, AgentSession] = weakref.WeakValueDictionary()
        self._opening: dict[str, asyncio.Lock] = {}
        self._asking: dict[str, asyncio.Task[str]] = {}
        self._watcher: JobWatcher | None = None
        self._watching: asyncio.Task[None] | None = None
        self._stop_watching = asyncio.Event()

    # ----- clusters and sessions ----------------------------------------------------------------
    def clusters(self) -> list[dict[str, Any]]:
        """The configured clusters (name, how they are reached, which is the default, the environments a run may
        use)."""
        default = self.config.active_cluster
        return [{"name": p.name, "transport": p.transport, "host": p.host or "", "default": p.name == default,
                 "environments": list(p.environments)}
                for p in (self.config.profile(c["name"]) for c in self.config.clusters)]

    async def session(self, session_id: str | None = None, *, cluster: str | None = None,
                      mode: str | None = None, task: str | None = None) -> "AgentSession":
        """The open session ``session_id``, or a new (or resumed) one on ``cluster`` in ``mode``.

        ``task`` names whom a new session works for (an MCP client): its cards and action-log lines
        carry it. An open session keeps the task it was built with.
        """
        ident = session_id or new_session_id()
        lock = self._opening.setdefault(ident, asyncio.Lock())
        async with lock:
            known = self._sessions.get(ident)
            if known is not None:
                if cluster and known.context.profile.name != self.config.profile(cluster).name:
                    raise UsageError(f"session {ident} works on {known.context.profile.name}, not {cluster}; "
                                     "start a new session for another cluster")
                if mode:
                    self.set_mode(ident, mode)
                return known
            opened = await open_session(self.workspace, self.config, SessionSpec(
                session_id=ident, cluster=cluster, mode=mode or self.mode, broker=self.broker, actions=self.actions,
                task=task, require_model=False))
            self._sessions[ident] = opened
            return opened

    async def desk(self, cluster: str | None = None) -> "AgentSession":
        """The session for a person's own clicks on ``cluster`` outside any chat (the panel's Jobs tab)."""
        name = self.config.profile(cluster).name
        return await self.session("desk-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)[:50], cluster=name)

    def opened(self, session_id: str) -> "AgentSession":
        """An open session; UsageError naming it when there is none."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UsageError(f"no open session {session_id[:40]!r}") from None

    def sessions(self) -> list[SessionInfo]:
        """The open sessions, oldest first."""
        return [SessionInfo(s.session_id, s.context.profile.name, s.policy.mode, self.busy(s.session_id),
                            s.stream.last_seq, s.model is not None, s.user,
                            s.model.settings.model if s.model is not None else None)
                for s in self._sessions.values()]

    def set_mode(self, session_id: str, mode: str) -> None:
        """Switch one session's agent between off, propose, confirm and auto (its grants are kept); SiteRefusal for
        a mode the site does not allow."""
        self.opened(session_id).set_policy(ApprovalPolicy(mode, self.config.rules, self.config.site))

    # ----- what a person asks -------------------------------------------------------------------
    def busy(self, session_id: str) -> bool:
        """Whether the agent is answering in this session now."""
        task = self._asking.get(session_id)
        return task is not None and not task.done()

    def ask(self, session_id: str, prompt: str, context: ContextBulletin | None = None) -> "asyncio.Task[str]":
        """Start the agent on ``prompt`` (and the context bulletin the person sent with it, quoted after it).

        Its events stream on the session, the task gives the done reason."""
        session = self.opened(session_id)
        if self.busy(session_id):
            raise UsageError(f"session {session_id} is still answering; stop it or wait for it to finish")
        if not prompt.strip():
            raise UsageError("ask Betty something: the prompt is empty")
        task = asyncio.get_running_loop().create_task(self._answer(session, prompt, context))
        self._asking[session_id] = task
        return task

    async def _answer(self, session: "AgentSession", prompt: str, context: ContextBulletin | None) -> str:
        try:
            return await session.ask(prompt, context)
        except asyncio.CancelledError:
            self.broker.cancel_all("the person stopped Betty", session.session_id)
            session.stream.emit("done", ev.Done(reason=DoneReason.STOPPED))
            return DoneReason.STOPPED
        finally:
            save(session, self.workspace)

    def stop(self, session_id: str) -> bool:
        """Stop the agent's answer in this session (its open approvals are cancelled); False when idle."""
        task = self._asking.get(session_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def call(self, session_id: str, tool: str, args: Mapping[str, Any], person: str | None,
                   call_id: str | None = None) -> "ToolOutcome":
        """A tool call a person made (magic, panel button): same policy, approvals and log as the agent's.

        ``person`` None makes it another agent's call (an MCP client's), decided by the session's mode.

        ``call_id`` (letters, digits, _ and -) names the call in its events, so the caller can follow it.
        """
        if call_id is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", call_id):
            raise UsageError(f"{call_id[:40]!r} is not a call id (letters, digits, - and _)")
        return await self.opened(session_id).run_tool(tool, args, person, call_id)

    # ----- approvals ----------------------------------------------------------------------------
    def pending(self, session_id: str | None = None) -> list[ev.ApprovalRequest]:
        """Approvals waiting for a person (of one session, when given), oldest first."""
        return [request for _, request in self.waiting(session_id)]

    def waiting(self, session_id: str | None = None) -> list[tuple[str, ev.ApprovalRequest]]:
        """Approvals waiting for a person (of one session, when given), each with the session it waits in,
        oldest first: the cards of MCP clients' sessions and automations' runs as well as the chats'."""
        return [(waits_in or "", request) for waits_in, request in self.broker.waiting(session_id)
                if isinstance(request, ev.ApprovalRequest)]

    def respond(self, approval_id: str, decision: str, approver: str,
                args: Mapping[str, Any] | None = None, digest: str | None = None) -> "Resolution":
        """A person's answer to an approval; ApprovalError when it is unknown, already answered, or names (by
        ``digest``) another card than the one open."""
        if not approver.strip():
            raise ApprovalError("an answer names who gave it")
        return self.broker.respond(approval_id, decision, approver, args, digest)

    def adopt(self, session: "AgentSession") -> None:
        """A session opened outside :meth:`session` (an automation's run) whose cards a person may edit here."""
        self._elsewhere[session.session_id] = session

    async def repreview(self, approval_id: str, args: Mapping[str, Any]) -> "Preview":
        """The preview of a person's edit of an open card, checked by the same tool and policy code as the
        model's call; ToolError (one line) when the edit is refused, ApprovalError when the card is not open."""
        waits_in, request = self._open(approval_id)
        session = self._sessions.get(waits_in) or self._elsewhere.get(waits_in)
        if session is None:
            raise ApprovalError(f"approval {approval_id} waits in a session this server cannot check edits in; "
                                "approve it as asked or deny it")
        return await session.repreview(request.tool, request.args, args)

    async def start_estimate(self, approval_id: str) -> str:
        """One line saying when the open submission card ``approval_id`` would start where (``starts ~in 12 min on
        gpu (a100), ~3 h on gpu (h100)``), "" for a card that submits nothing; a failure is a short note. Asked
        after the card is shown, so the card never waits for it; ApprovalError when the card is not open."""
        # lazy: the advisor; only a submission card asks for it
        from ..advisor.placement import START_BUDGET, PlacementAdvisor, advise_script

        waits_in, request = self._open(approval_id)
        session = self._sessions.get(waits_in) or self._elsewhere.get(waits_in)
        script = request.args.get("script")
        if session is None or request.tool != "cluster_submit" or not isinstance(script, str):
            return ""
        transport = session.context.slurm.transport
        try:
            advisor = PlacementAdvisor(transport, budget=START_BUDGET, policy=session.context.policy())
            return (await advise_script(transport, script, advisor=advisor)).summary(limit=2)
        except BettyError as error:
            return f"no start estimate: {str(error).splitlines()[0][:160]}"

    def _open(self, approval_id: str) -> tuple[str, ev.ApprovalRequest]:
        """The open card ``approval_id`` and the session it waits in; ApprovalError when none is open."""
        for waits_in, request in self.waiting():
            if request.approval_id == approval_id:
                return waits_in, request
        raise ApprovalError(f"no open approval {approval_id[:40]!r}; it was answered, expired or belongs "
                            "to another server")

    def answered(self, approval_id: str) -> "Resolution | None":
        """How an answered approval ended; None while it is open or when it is unknown."""
        return self.broker.answered(approval_id)

    def disconnected(self, session_id: str, reason: str = "the front-end went away") -> list[str]:
        """A front-end left: its session's open approvals are denied (cancelled), failing closed."""
        return self.broker.cancel_all(reason, session_id)

    def history(self, session_id: str | None = None, limit: int = 200) -> list["ActionRecord"]:
        """The newest action-log records (of one session, when given), oldest first."""
        records: list[ActionRecord] = []
        for day in reversed(self.actions.days()):
            records = self.actions.read(day, session_id) + records
            if len(records) >= limit:
                break
        return records[-limit:]

    # ----- the job watcher ----------------------------------------------------------------------
    def watch(self, **options: Any) -> "JobWatcher":
        """Start the job watcher on this loop (once); its updates reach every open session as ``job_update``."""
        if self._watcher is None:
            self._watcher = JobWatcher(self.workspace, ClusterClients(self.config), **options)
            self._watcher.subscribe(self._announce)
            self._stop_watching.clear()
            self._watching = asyncio.get_running_loop().create_task(self._watch(self._watcher))
        return self._watcher

    async def _watch(self, watcher: "JobWatcher") -> None:
        try:
            await asyncio.gather(watcher.run(self._stop_watching), self._notify(watcher))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Betty's job watcher stopped")

    async def _notify(self, watcher: "JobWatcher") -> None:
        """Tell the person's notification targets of every job that ends (``docs/notifications.md``)."""
        # lazy: the mail and HTTP clients; a host that never starts the watcher needs none of them
        from ..experiments.notify.outbox import notify_ends

        await notify_ends(watcher, self.config.notify, self._stop_watching)

    def _announce(self, update: "JobUpdate") -> None:
        info = ev.JobUpdateInfo(job_id=update.experiment.job_id, cluster=update.experiment.cluster,
                                state=update.state, previous=update.previous,
                                page=f"wiki/{update.experiment.page}", notebook=update.experiment.notebook)
        for session in self._sessions.values():
            session.stream.emit("job_update", info)

    async def close(self) -> None:
        """Stop everything: answers, approvals (cancelled), the watcher, the sessions (kept).

        The links to the clusters are the process's (:mod:`~betty_jupyter.cluster.shared`): its host closes them
        with :func:`~betty_jupyter.cluster.shared.close_clusters` after this."""
        for session_id in list(self._asking):
            self.stop(session_id)
        self.broker.cancel_all("Betty is shutting down")
        asking = [t for t in self._asking.values() if not t.done()]
        if asking:
            await asyncio.gather(*asking, return_exceptions=True)
        if self._watching is not None:
            self._stop_watching.set()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._watching, timeout=10)
        for session in self._sessions.values():
            save(session, self.workspace)
            await session.context.close()
        self._sessions.clear()
