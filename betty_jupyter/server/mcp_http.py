"""``/betty/mcp``: Betty's MCP server (:mod:`betty_jupyter.mcp_server`) over streamable HTTP, in the Jupyter server.

The route takes one credential and no other: one Betty issued to an MCP client
(:mod:`betty_jupyter.mcp_credentials`), in an ``Authorization`` header. Jupyter's own authentication
never sees it, and never runs here: the Jupyter server's token and the browser's cookie are refused,
so another agent is never handed the person's identity, and the credential opens nothing else
(every other route is Jupyter's, which does not know it). Jupyter's Host and Origin checks still
apply. The request is then handed, as ASGI, to the ``mcp`` package's session manager; its answer
streams back, as server-sent events while a call waits for a person. The credential goes no further:
the ``Authorization`` and ``Cookie`` headers and the query stay here. ``?cluster=`` and ``?mode=``
choose the client's session, and the credential's name goes with it, so cards and the action log
say which credential asked (``claude-code (mcp:laptop)``).

When the client hangs up before its answer (a timeout, a killed process), the call it waited on
stops and its open card is cancelled, within a moment, whatever the protocol: nobody is left waiting
for the person's answer, and nothing runs for nobody.

The calls reach the server's services in process (:class:`ServerBetty`), exactly as
``POST sessions/{id}/tools/{tool}`` with ``caller: "agent"`` does. The ``mcp`` package (the extra
``betty-jupyter[mcp]``, any release :mod:`betty_jupyter.mcp_package` supports) is imported at the first request;
without it, or with a release Betty does not support, the route answers 501 with one line saying what to install.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from tornado.iostream import StreamClosedError

from ..agent.vocabulary import MODES, Tier
from ..errors import BettyError
from ..mcp_credentials import McpCredential, McpCredentials
from ..mcp_package import load, problem
from ..mcp_server import BettyFace, SessionOptions, mcp_server
from .base import BettyHandler, allow_unauthenticated, refused

if TYPE_CHECKING:
    from ..agent.tools.base import Tool
    from ..mcp_package import Request
    from .services import BettyServices

OPTIONS = "betty.session"
"""The key of the ASGI scope that carries the options of the client's session."""
LEFT = "betty.left"
"""The key of the ASGI scope that carries the event set when the request's calls must stop: its client hung up,
or its credential was revoked."""
REVOCATION_CHECK = 2.0
"""Seconds between two looks at whether an open request's credential was revoked."""
REFUSED = ("Betty's MCP endpoint takes only a credential Betty issued for an MCP client, never the Jupyter "
           "server's token: run `betty mcp token add NAME` and give the client what it prints")
_KEPT_BACK = {b"authorization", b"cookie"}


class ServerBetty:
    """This server's sessions, as the MCP face uses them: the same services the REST routes call."""

    def __init__(self, services: "BettyServices") -> None:
        self.services = services

    async def open_session(self, agent: str, options: SessionOptions) -> str:
        """A new session working for ``agent``."""
        session = await self.services.session(cluster=options.cluster, mode=options.mode, agent=agent)
        return session.session_id

    async def tools(self, session_id: str) -> list[dict[str, Any]]:
        """The session's tools another agent can use (not those that serve Betty's own chat), each with MCP's
        annotations."""
        registry = self.services.assistant.opened(session_id).registry
        return [{**info, "annotations": tool_annotations(registry.get(info["name"]))}
                for info in self.services.tools(session_id) if not registry.get(info["name"]).chat_only]

    async def last_seq(self, session_id: str) -> int:
        """The ``seq`` of the session's newest event."""
        return self.services.assistant.opened(session_id).stream.last_seq

    async def call(self, session_id: str, tool: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
        """Another agent's call; when the client stops waiting, its open card is cancelled."""
        return await self.services.agent_call(session_id, tool, args, call_id)

    async def events(self, session_id: str, after: int, wait: float) -> list[dict[str, Any]]:
        """The session's events after ``after``, held up to ``wait`` seconds."""
        return [event.model_dump(mode="json") for event in await self.services.events(session_id, after, wait)]


def tool_annotations(tool: "Tool[Any]") -> dict[str, Any]:
    """MCP's annotations of ``tool``, from its tier and its own metadata, so a host can let reads run by themselves:
    a tool below tier 2 that changes nothing is read-only (and idempotent); any other may change something, and is
    destructive unless it only adds (a new job); one that reaches nothing beyond the project is not open-world."""
    read_only = tool.tier < Tier.ALWAYS_ASK and not tool.changes_project
    return {"title": tool.title or tool.name.replace("_", " ").capitalize(), "readOnlyHint": read_only,
            "destructiveHint": not read_only and not tool.only_adds, "idempotentHint": read_only,
            "openWorldHint": not tool.project_only}


class McpEndpoint:
    """The MCP server of this Jupyter server, served by the ``mcp`` package's streamable-HTTP session manager.

    Stateful: a client that opens with the ``initialize`` handshake keeps its MCP session (and the
    name it gave) across its requests; a client of the newer protocol sends its name with each one.
    Answers stream as server-sent events, so a client hears progress while a person decides.
    """

    def __init__(self, services: "BettyServices") -> None:
        face = BettyFace(ServerBetty(services), _options, _left)
        # Jupyter already checked Host and Origin (and XSRF) before a request gets here.
        self.manager = load().session_manager(mcp_server(face))
        self._running: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one request (ASGI); the session manager starts with the first one."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._running = asyncio.get_running_loop().create_task(self._run(self._started))
        await asyncio.shield(self._started)
        await self.manager.handle_request(scope, receive, send)

    async def _run(self, started: "asyncio.Future[None]") -> None:
        try:
            async with self.manager.run():
                started.set_result(None)
                await self._stop.wait()
        except Exception as error:
            if not started.done():
                started.set_exception(error)
            raise

    async def close(self) -> None:
        """End every MCP session and stop the manager."""
        self._stop.set()
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)


class McpHandler(BettyHandler):
    """``POST|GET|DELETE /betty/mcp``: one request of an MCP client holding a credential Betty issued."""

    _body_read = False
    _content_type = "application/json"
    credential: McpCredential | None = None

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        """As every handler of the extension; the request's client has not left yet."""
        super().initialize(*args, **kwargs)
        self._gone = asyncio.Event()  # the client hung up, or its answer is complete
        self._stop = asyncio.Event()  # a call of this request stops: the client is gone, or its credential revoked

    async def prepare(self) -> None:  # type: ignore[override]  # as APIHandler's own
        """Jupyter's Host and Origin checks, then the MCP credential, and only it: Jupyter's own authentication
        (its token, its cookie) is not consulted, so no Jupyter identity is ever made from this request."""
        self.current_user = None  # no Jupyter identity, ever: Origin is checked as for a browser's request
        if not self.check_host():
            raise refused(403, "this Jupyter server does not answer to that Host")
        if not self.check_origin():
            raise refused(404, "not found")
        if not self.services.config.site.mcp:
            raise refused(403, f"your site does not allow Betty's MCP face (mcp is false in {self.services.config.site.source})")
        self.credential = self._credential()
        self.services.start()

    def _credential(self) -> McpCredential:
        scheme, _, token = self.request.headers.get("Authorization", "").strip().partition(" ")
        try:
            credential = McpCredentials().holder(token.strip()) if scheme.lower() in ("bearer", "token") else None
        except BettyError as error:  # told to the person in the server's log, not to whoever knocked
            self.log.warning("Betty's MCP endpoint refused a request: %s", error)
            credential = None
        if credential is None:
            raise refused(403, REFUSED)
        return credential

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: no cookie is ever accepted here, only the credential in the header."""

    @allow_unauthenticated  # not Jupyter's to authenticate: prepare() takes the MCP credential, and only it
    async def post(self) -> None:
        """A JSON-RPC message from the client."""
        await self._serve()

    @allow_unauthenticated  # not Jupyter's to authenticate: prepare() takes the MCP credential, and only it
    async def get(self) -> None:
        """The stream of a session's messages to the client."""
        await self._serve()

    @allow_unauthenticated  # not Jupyter's to authenticate: prepare() takes the MCP credential, and only it
    async def delete(self) -> None:
        """The client ends its session."""
        await self._serve()

    def compute_etag(self) -> None:
        """No ETag: an answer is a message, not a document."""
        return None

    def on_connection_close(self) -> None:
        """The client hung up: the MCP server hears a disconnect (a call it waited on cancels its card)."""
        self._gone.set()
        self._stop.set()
        super().on_connection_close()

    def on_finish(self) -> None:
        """The answer is complete: anything still listening for the client hears it left."""
        self._gone.set()
        self._stop.set()
        super().on_finish()

    async def _serve(self) -> None:
        missing = problem("Betty's MCP endpoint")
        if missing is not None:
            raise refused(501, f"{missing} in the Jupyter server's environment, then restart Jupyter")

        cluster, mode = self.query("cluster"), self.query("mode")
        if mode is not None and mode not in MODES:
            raise refused(400, f"?mode= is one of {', '.join(MODES)}, not {mode[:30]!r}")
        assert self.credential is not None  # prepare() refused the request otherwise
        options = SessionOptions(self.cluster_name(cluster) if cluster else None, mode, self.credential.caller)
        watching = asyncio.get_running_loop().create_task(self._until_revoked(self.credential))
        try:
            await self.services.mcp(McpEndpoint).handle(self._scope(options), self._receive, self._send)
        finally:
            watching.cancel()

    async def _until_revoked(self, credential: McpCredential) -> None:
        """While the request is open (a call waiting for a person), its credential is looked up again every
        :data:`REVOCATION_CHECK` seconds: once revoked (``betty mcp token revoke`` in another process), the
        call stops, its card is cancelled, and the client is told so."""
        store = McpCredentials()
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), REVOCATION_CHECK)
            try:
                kept = store.listed()
            except BettyError:  # a credentials file Betty cannot trust any more: none of them holds
                kept = []
            if not any(one.sha256 == credential.sha256 for one in kept):
                self._stop.set()

    def _scope(self, options: SessionOptions) -> dict[str, Any]:
        request = self.request
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1"))
                   for name, value in request.headers.get_all()]
        return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                "http_version": request.version.removeprefix("HTTP/"), "method": request.method,
                "scheme": request.protocol, "path": request.path, "raw_path": request.path.encode("latin-1"),
                "query_string": b"", "root_path": "", "client": (request.remote_ip, 0), "server": None,
                "headers": [(name, value) for name, value in headers if name not in _KEPT_BACK], OPTIONS: options,
                LEFT: self._stop}

    async def _receive(self) -> dict[str, Any]:
        if not self._body_read:
            self._body_read = True
            return {"type": "http.request", "body": self.request.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if self._gone.is_set():
            return  # the client left, or its answer is complete
        if message["type"] == "http.response.start":
            self.set_status(message["status"])
            for name, value in message.get("headers", []):
                name, value = name.decode("latin-1"), value.decode("latin-1")
                if name.lower() == "content-type":
                    self._content_type = value
                elif name.lower() != "content-length":  # tornado counts, or streams in chunks
                    self.set_header(name, value)
            self.set_header("Content-Type", self._content_type)
        elif message["type"] == "http.response.body":
            self.write(message.get("body", b""))
            if not message.get("more_body", False):
                self.finish(set_content_type=self._content_type)
                return
            try:
                await self.flush()
            except StreamClosedError:
                self._gone.set()


def _options(request: "Request") -> SessionOptions:
    """The options of the request's session, as the handler checked them."""
    options = request.scope.get(OPTIONS) if request.scope is not None else None
    return options if isinstance(options, SessionOptions) else SessionOptions()


def _left(request: "Request") -> asyncio.Event | None:
    """The event set when the client of the request that carried this call hung up."""
    left = request.scope.get(LEFT) if request.scope is not None else None
    return left if isinstance(left, asyncio.Event) else None


handlers = [
    (r"/betty/mcp", McpHandler),
]
"""The MCP route."""
