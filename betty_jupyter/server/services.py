"""``BettyServices``: what every handler of one server shares, built once at start-up.

It holds the server's configuration and workspace, its one
:class:`~betty_jupyter.agent.assistant.Assistant` — built when the server's loop starts (or
by the first request, whichever comes first), so loading the agent does not delay Jupyter's
start-up — and adds what only a server needs: sessions instrumented for Prometheus as they
open, calls a person started without waiting, another agent's calls (an MCP client's, over
REST or the MCP endpoint alike), and the chat sockets open on each session (when the last one
closes, the session's open approvals are cancelled).

The clusters follow the configuration files as they are now: a cluster added with ``betty
cluster add`` while the server runs is there at the next request (:meth:`current_config`).
A cluster's health (:meth:`health`) is checked over its desk session's connection and kept
for :data:`HEALTH_KEPT` seconds, so a panel asking every few seconds costs the login node one
read now and then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, TypeVar, cast

from ..agent.vocabulary import Mode
from ..transport.login import answer_login_questions_with, stop_answering
from ..config import beyond_files, config_signature, load_config
from ..errors import BettyError, ConfigError, LinkProblem
from . import prometheus
from .login_desk import LoginDesk
from .search_rounds import SearchRounds
from .model_setup import no_model_setup

if TYPE_CHECKING:
    from ..agent.assistant import Assistant
    from ..agent.automations.runner import AutomationRunner
    from ..agent.events import AnyEvent
    from traitlets.config import Config

    from ..agent.loop import AgentSession
    from ..cluster.health import ClusterHealth
    from ..config import BettyConfig
    from ..experiments.workspace import Workspace
    from .models import ClusterOverview, Session, ToolInfo

log = logging.getLogger(__name__)


class Closing(Protocol):
    """Something the services close as they stop (the MCP endpoint)."""

    async def close(self) -> None:
        """Let go of what it holds."""
        ...


E = TypeVar("E", bound=Closing)

HEALTH_KEPT = 20.0
"""Seconds a cluster's health check is kept before the next request checks again."""

OVERVIEW_KEPT = 10.0
"""Seconds a cluster's overview is kept: panels open side by side, or ticking faster, share one read."""


class Socket(Protocol):
    """An open chat socket, as the services see it."""

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        """Close it."""


class BettyServices:
    """The one Assistant of this server, and the sockets and background calls around it."""

    def __init__(self, workspace: "Workspace", config: "BettyConfig", *, mode: str = Mode.CONFIRM,
                 approval_timeout: float = 600.0, automation_lease: float = 60.0,
                 server_config: "Config | None" = None) -> None:
        self.workspace, self.config = workspace, config
        self._server_config, self._config_signature = beyond_files(server_config), config_signature()
        self._health: dict[str, tuple[str, float, asyncio.Task[ClusterHealth]]] = {}
        self._overviews: dict[str, tuple[float, asyncio.Task[ClusterOverview]]] = {}
        self._mode, self._approval_timeout = mode, approval_timeout
        self._assistant: Assistant | None = None
        self._automation_lease = automation_lease
        self._automations: AutomationRunner | None = None
        self._instrumented: set[str] = set()
        self._sockets: dict[str, set[Socket]] = {}
        self._calls: set[asyncio.Task[Any]] = set()
        self._mcp: Closing | None = None
        self._search_rounds: SearchRounds | None = None
        self.login_desk = LoginDesk()

    @property
    def assistant(self) -> "Assistant":
        """The server's one Assistant (built on first use; a bad mode or bad rules are a ConfigError here)."""
        if self._assistant is None:
            # lazy: the agent (pydantic) loads when the server's loop starts, after the extension
            from ..agent.assistant import Assistant

            self._assistant = Assistant(self.workspace, self.config, mode=self._mode,
                                        approval_timeout=self._approval_timeout)
        return self._assistant

    @property
    def automations(self) -> "AutomationRunner":
        """The server's automation runner (built on first use; it runs once :meth:`start` started it)."""
        if self._automations is None:
            # lazy: the agent (pydantic) loads when the server's loop starts, after the extension
            from ..agent.automations.runner import AutomationRunner

            self._automations = AutomationRunner(self.assistant, lease_seconds=self._automation_lease,
                                                 on_session=prometheus.instrument)
        return self._automations

    def mcp(self, build: "Callable[[BettyServices], E]") -> E:
        """The server's MCP endpoint, made by ``build`` (:class:`~.mcp_http.McpEndpoint`, which needs the ``mcp``
        package) at its first request; closed with the services."""
        if self._mcp is None:
            self._mcp = build(self)
        return cast(E, self._mcp)

    def start(self) -> None:
        """Build the Assistant, start its job watcher and the automation runner on the running loop (once).

        From now on a cluster's login questions (a second factor) wait in :attr:`login_desk` for the panel.
        """
        answer_login_questions_with(self.login_desk)
        if self._search_rounds is None:  # every request starts the services: one subscriber, or rounds run twice
            self._search_rounds = SearchRounds(self)
            self.assistant.watch().subscribe_tick(self._search_rounds)
        self.automations.start()

    # ----- clusters -----------------------------------------------------------------------------
    def current_config(self) -> "BettyConfig":
        """The configuration, its clusters re-read when a configuration file changed since the last look.

        A file that cannot be read now keeps the clusters as they were (a warning in the server's log).
        """
        signature = config_signature()
        if signature != self._config_signature:
            self._config_signature = signature
            try:
                if self.config.take_clusters(load_config(self._server_config, site=self.config.site)):
                    log.info("Betty's clusters are now: %s", ", ".join(self.config.cluster_names) or "none")
            except ConfigError as error:
                log.warning("Betty keeps its clusters as they were: %s", error)
        return self.config

    async def health(self, cluster: str) -> "ClusterHealth":
        """``cluster``'s health: checked over its desk session's connection, kept :data:`HEALTH_KEPT` seconds.

        Requests that come while a check runs wait for that one; a changed profile is checked afresh.
        """
        profile = self.current_config().profile(cluster)
        shape = repr(sorted(profile.to_dict().items()))
        kept = self._health.get(profile.name)
        if kept is not None and kept[0] == shape and (not kept[2].done() or time.monotonic() - kept[1] < HEALTH_KEPT):
            return await asyncio.shield(kept[2])
        check = asyncio.get_running_loop().create_task(self._check_health(profile.name))
        self._health[profile.name] = (shape, time.monotonic(), check)
        return await asyncio.shield(check)

    async def _check_health(self, cluster: str) -> "ClusterHealth":
        # lazy: the cluster's policy; the extension loads without it
        from ..cluster.health import ClusterHealth, check_health

        try:
            session = await self.desk(cluster)
        except BettyError as error:
            return ClusterHealth(cluster, False, str(error), LinkProblem.CONFIG, checked_at=time.time())
        return await check_health(cluster, session.context.slurm.transport, session.context.profile.policy())

    async def overview(self, cluster: str, person: str) -> "ClusterOverview":
        """What ``cluster`` is doing: ``cluster_overview`` run in its desk session as ``person``'s read, the answer
        kept :data:`OVERVIEW_KEPT` seconds. Requests that come while a read runs wait for that one; a kept answer
        (a failed read's too) costs the cluster nothing."""
        name = self.current_config().profile(cluster).name
        kept = self._overviews.get(name)
        if kept is not None and (not kept[1].done() or time.monotonic() - kept[0] < OVERVIEW_KEPT) \
                and not (kept[1].done() and kept[1].exception() is not None):
            return await asyncio.shield(kept[1])
        read = asyncio.get_running_loop().create_task(self._read_overview(name, person))
        self._overviews[name] = (time.monotonic(), read)
        return await asyncio.shield(read)

    async def _read_overview(self, cluster: str, person: str) -> "ClusterOverview":
        from ..advisor.overview import waits_line  # lazy: the advisor; the extension loads without it

        session = await self.desk(cluster)
        outcome = await self.assistant.call(session.session_id, "cluster_overview", {}, person)
        data: Any = outcome.data if outcome.ok and isinstance(outcome.data, dict) else None
        message = f"expected waits: {waits_line(data)}" if data is not None else outcome.summary
        return {"cluster": cluster, "ok": data is not None, "message": message, "overview": data}

    # ----- sessions -----------------------------------------------------------------------------
    async def session(self, session_id: str | None = None, *, cluster: str | None = None,
                      mode: str | None = None, agent: str | None = None) -> "AgentSession":
        """The open session ``session_id``, or a new (or resumed) one; instrumented for metrics.

        ``agent`` names the other agent a session works for (an MCP client): its cards and
        action-log lines carry the name, as a delegated task's or an automation's do.
        """
        return self._instrument(await self.assistant.session(session_id, cluster=cluster, mode=mode, task=agent))

    async def desk(self, cluster: str | None = None) -> "AgentSession":
        """The cluster's desk session, for a person's reads outside any chat."""
        return self._instrument(await self.assistant.desk(cluster))

    def _instrument(self, session: "AgentSession") -> "AgentSession":
        if session.session_id not in self._instrumented:
            self._instrumented.add(session.session_id)
            prometheus.instrument(session)
        return session

    def info(self, session_id: str) -> "Session":
        """What a front-end shows of one open session; UsageError when it is not open."""
        self.assistant.opened(session_id)
        info = next(i for i in self.assistant.sessions() if i.session_id == session_id)
        mode = Mode(info.mode)
        return {"session_id": info.session_id, "cluster": info.cluster, "mode": mode, "busy": info.busy,
                "last_seq": info.last_seq, "has_model": info.has_model, "user": info.user, "model": info.model,
                "model_setup": None if info.has_model else no_model_setup(),
                "allowed_modes": [Mode(each) for each in self.config.site.modes],
                "site_policy": str(self.config.site.source) if self.config.site.source else None}

    # ----- calls a person started without waiting -----------------------------------------------
    def start_call(self, session_id: str, tool: str, args: Mapping[str, Any], person: str | None,
                   call_id: str | None = None) -> str:
        """Start a person's tool call in the background; returns its call id (its events carry it)."""
        ident = call_id or f"call_{uuid.uuid4().hex[:12]}"
        task = asyncio.get_running_loop().create_task(self._call(session_id, tool, args, person, ident))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        return ident

    async def _call(self, session_id: str, tool: str, args: Mapping[str, Any], person: str | None,
                    call_id: str) -> None:
        try:
            await self.assistant.call(session_id, tool, args, person, call_id)
        except Exception:
            log.exception("Betty's %s call %s in %s failed", tool, call_id, session_id)

    async def agent_call(self, session_id: str, tool: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
        """Another agent's call (an MCP client's) in ``session_id``, decided by the session's mode: its Outcome with
        ``text``, what a model is told of it. A bad tool name or bad arguments are refused (ToolError) before anything
        runs. When the caller stops waiting (its task is cancelled) the call's open card is cancelled; a call already
        running finishes, and is logged. A table (the queue, accounting) is answered in ``text`` alone, a
        page of it within :mod:`..agent.budget`, with ``data`` null: the text says how to ask for the rest."""
        # lazy: pydantic and pandas; the extension loads without them
        from ..agent.condense import condense
        from ..agent.wire import outcome_to_json

        session = self.assistant.opened(session_id)
        session.registry.get(tool).parse(args)
        running = asyncio.ensure_future(self.assistant.call(session_id, tool, args, None, call_id))
        self._calls.add(running)
        running.add_done_callback(self._calls.discard)
        try:
            outcome = await asyncio.shield(running)  # the caller leaving must not cut the call short: it is logged
        except asyncio.CancelledError:
            self.abandoned(session_id, call_id)
            running.add_done_callback(_logged)
            raise
        told = condense(outcome, session.user)
        # a table is answered as the text, within the one budget (agent/budget.py); its 20,000 rows are not sent
        return outcome_to_json(outcome, told, with_data=outcome.paging is None)

    def tools(self, session_id: str) -> list["ToolInfo"]:
        """The tools an open session may call, in the registry's order: tier and the arguments' JSON schema."""
        registry = self.assistant.opened(session_id).registry
        return [{"name": tool.name, "description": tool.description, "tier": int(tool.tier),
                 "schema": tool.schema()["function"]["parameters"]} for tool in registry]

    async def events(self, session_id: str, after: int, wait: float = 0.0) -> list["AnyEvent"]:
        """The session's events after ``after``; with ``wait``, held up to that many seconds until there is one."""
        stream = self.assistant.opened(session_id).stream
        if wait > 0 and not stream.since(after):
            loop = asyncio.get_running_loop()
            arrived = asyncio.Event()

            # Subscribing with `after` replays what came meanwhile, so no event slips between check and wait.
            def wake(_: "AnyEvent") -> None:
                loop.call_soon_threadsafe(arrived.set)

            unsubscribe = stream.subscribe(wake, after=after)
            try:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(arrived.wait(), wait)
            finally:
                unsubscribe()
        return stream.since(after)

    def abandoned(self, session_id: str, call_id: str) -> None:
        """Nobody waits for ``call_id`` any more (its request's connection closed): its open card is cancelled."""
        for request in self.assistant.pending(session_id):
            if request.call_id == call_id:
                self.assistant.broker.cancel(request.approval_id, "the caller stopped waiting for the answer")

    def revoked(self, caller: str) -> list[str]:
        """The MCP credential ``caller`` (``mcp:NAME``) was revoked: the open cards its calls raised are cancelled,
        so none is approved for a client that may no longer ask; their ids."""
        cancelled = [request.approval_id for _, request in self.assistant.waiting()
                     if (request.task or "").endswith(f"({caller})")]
        for approval_id in cancelled:
            self.assistant.broker.cancel(approval_id, "the MCP credential that asked was revoked")
        return cancelled

    # ----- chat sockets -------------------------------------------------------------------------
    def connected(self, session_id: str, socket: Socket) -> None:
        """A chat socket opened on ``session_id``."""
        self._sockets.setdefault(session_id, set()).add(socket)

    def disconnected(self, session_id: str, socket: Socket) -> list[str]:
        """A chat socket closed; when it was the session's last, its open approvals are cancelled (their ids)."""
        sockets = self._sockets.get(session_id, set())
        sockets.discard(socket)
        if sockets:
            return []
        self._sockets.pop(session_id, None)
        return self.assistant.disconnected(session_id, "the side panel closed, so nobody can see the card")

    # ----- shutting down ------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the background calls, close the sockets, close the Assistant (watcher, sessions), then the process's
        links to the clusters."""
        stop_answering(self.login_desk)
        for _, _, check in self._health.values():
            check.cancel()
        for _, read in self._overviews.values():
            read.cancel()
        for task in list(self._calls):
            task.cancel()
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        for sockets in list(self._sockets.values()):
            for socket in list(sockets):
                socket.close(1001, "the Jupyter server is stopping")
        if self._mcp is not None:
            await self._mcp.close()
        if self._automations is not None:
            await self._automations.close()  # its running runs go back to the queue for the next server
        if self._assistant is not None:
            await self._assistant.close()
        from ..cluster.shared import close_clusters  # lazy: the Slurm client; the extension loads without it

        await close_clusters()


def _logged(call: "asyncio.Task[Any]") -> None:
    """A call nobody waits for any more: a failure is logged here rather than lost."""
    if not call.cancelled() and call.exception() is not None:
        log.error("Betty's call failed after its caller left", exc_info=call.exception())
