"""``betty mcp``: Betty's tools for any MCP client (jupyter-ai's agents, Claude Code, an IDE), over stdio.

A thin face on a running Jupyter server with Betty's extension, through Betty's REST API
(``docs/server-api.md``). On the client's first request it opens one session there, named after
the client, and from then on:

- ``tools/list`` is that session's tools (``GET sessions/{id}/tools``): name, description with
  the tier, and the JSON schema of the arguments;
- ``tools/call`` is the client's call in that session (``POST sessions/{id}/tools/{tool}`` with
  ``caller: "agent"``): Betty's policy decides it as it decides its own agent's calls, a card
  waits for a person in the server's approvals, and the action log records it with the client's
  name. The answer is the text Betty's own model would be told; a refusal, a denied card or a
  server that does not answer is an error result of one line.

Nothing here decides anything: the server does. Only this module imports ``mcp``.
"""

from __future__ import annotations

import urllib.parse
import uuid
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ._version import __version__
from .errors import BettyError, TransportError, UsageError

POLL_SECONDS = 25
INSTRUCTIONS = ("Betty's tools for a Slurm cluster. Betty's policy decides every call: reads may ask a person "
                "once per session, and submitting or cancelling a job always waits until a person approves the "
                "exact script or command in Betty. A call that was not approved did not run: do not retry it "
                "unless the person asks.")
TIERS = {0: "Betty runs it (tier 0).",
         1: "Betty tier 1: in confirm mode a person approves its first call of the session.",
         2: "Betty tier 2: every call waits until a person approves its exact preview in Betty."}


class SessionGone(UsageError):
    """The server no longer has the session (Jupyter restarted): open a new one."""


class BettyLink:
    """Betty's REST API on one Jupyter server; every failure becomes one of Betty's errors with one line."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.base, self.client = url.rstrip("/") + "/betty/api/", client

    async def request(self, method: str, route: str, body: Any = None, *, timeout: float | None = 30.0,
                      ) -> dict[str, Any]:
        """One JSON request to ``route`` (no ``timeout``: as long as the server takes); the decoded answer."""
        try:
            answer = await self.client.request(method, self.base + route, json=body,
                                               timeout=httpx.Timeout(timeout, connect=10.0))
        except httpx.HTTPError as error:
            raise TransportError(f"Betty's server at {self.base} does not answer ({error or type(error).__name__}); "
                                 "is Jupyter running with Betty's extension?") from None
        if answer.status_code == 403:
            raise UsageError("Betty's server refused the token: set BETTY_SERVER_TOKEN to the Jupyter server's token")
        said = _error_line(answer)
        if answer.status_code == 404 and not said:
            raise UsageError(f"{self.base} is not Betty's API (404): give the Jupyter server's URL, "
                             "and check that Betty's extension is enabled there")
        if answer.is_error:
            kind = SessionGone if answer.status_code == 404 else TransportError if answer.is_server_error else UsageError
            raise kind(said or f"Betty's server answered {answer.status_code}")
        try:
            data: dict[str, Any] = answer.json()
        except ValueError:
            raise UsageError(f"{self.base} did not answer in JSON: is it Betty's API?") from None
        return data


class BettyFace:
    """The MCP server's two handlers, over one Betty session opened on first use."""

    def __init__(self, link: BettyLink, *, cluster: str | None, mode: str | None) -> None:
        self.link, self.cluster, self.mode = link, cluster, mode
        self._session: str | None = None
        self._opening = anyio.Lock()

    async def list_tools(self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None,
                         ) -> types.ListToolsResult:
        """The session's tools; an error response of one line when the server cannot say."""
        try:
            tools = await self._in_session(ctx, "GET", "tools")
        except BettyError as error:
            raise MCPError(types.INTERNAL_ERROR, str(error)) from None
        return types.ListToolsResult(tools=[_tool(info) for info in tools["tools"]])

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                        ) -> types.CallToolResult:
        """The client's call, as another agent's in Betty's session; waits while a person decides."""
        call_id = f"mcp_{uuid.uuid4().hex[:12]}"
        try:
            after = int((await self._in_session(ctx, "GET", ""))["last_seq"])
        except BettyError as error:
            return _result(str(error), error=True)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._tell_while_waiting, ctx, call_id, after)
            result = await self._call(ctx, params, call_id)
            tasks.cancel_scope.cancel()
        return result

    async def _call(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                    call_id: str) -> types.CallToolResult:
        body = {"args": params.arguments or {}, "caller": "agent", "call_id": call_id}
        route = "tools/" + urllib.parse.quote(params.name, safe="")
        try:
            answer = await self._in_session(ctx, "POST", route, body, timeout=None)
        except BettyError as error:
            return _result(str(error), error=True)
        return _result(str(answer.get("text") or answer["summary"]), error=not answer["ok"])

    async def _in_session(self, ctx: ServerRequestContext[Any], method: str, route: str, body: Any = None,
                          timeout: float | None = 30.0) -> dict[str, Any]:
        """A request to the session's ``route``; when the server forgot the session (Jupyter restarted), a new one."""
        session = await self._session_id(ctx)
        try:
            return await self.link.request(method, f"sessions/{session}/{route}".rstrip("/"), body, timeout=timeout)
        except SessionGone:
            if self._session == session:
                self._session = None
        session = await self._session_id(ctx)
        return await self.link.request(method, f"sessions/{session}/{route}".rstrip("/"), body, timeout=timeout)

    async def _session_id(self, ctx: ServerRequestContext[Any]) -> str:
        async with self._opening:
            if self._session is None:
                body = {"cluster": self.cluster, "mode": self.mode, "agent": _client_name(ctx)}
                self._session = str((await self.link.request("POST", "sessions", body))["session_id"])
            return self._session

    async def _tell_while_waiting(self, ctx: ServerRequestContext[Any], call_id: str, after: int) -> None:
        """Progress for the client while its call waits for a person: which card, and where it is answered."""
        told = 0
        waiting = ""
        while True:
            try:
                answer = await self._in_session(ctx, "GET", f"events?after={after}&wait={POLL_SECONDS}",
                                                timeout=POLL_SECONDS + 15)
            except BettyError:
                return  # the call itself says what went wrong
            after = answer["last_seq"]
            for event in answer["events"]:
                payload = event["payload"]
                if event["type"] == "approval_request" and payload.get("call_id") == call_id:
                    waiting = (f"waiting for a person to approve {payload['tool']} in Betty "
                               f"(card {payload['approval_id']}: %betty approvals, or the server's approvals API)")
                elif event["type"] == "approval_resolved" and payload.get("call_id") == call_id:
                    waiting = ""
            if waiting:
                told += 1
                await ctx.session.report_progress(told, None, waiting)


def _client_name(ctx: ServerRequestContext[Any]) -> str:
    """The client's own name (printable, short), as Betty's cards and action log name it."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else ""
    printable = "".join(c for c in name if c.isprintable())[:60].strip()
    return f"{printable or 'an MCP client'} (MCP)"


def _tool(info: dict[str, Any]) -> types.Tool:
    tier = int(info["tier"])
    return types.Tool(name=info["name"], description=f"{info['description']}\n\n{TIERS.get(tier, '')}".strip(),
                      input_schema=info["schema"])


def _result(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _error_line(answer: httpx.Response) -> str:
    try:
        said = answer.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(said) if said else ""


async def _serve(url: str, token: str, cluster: str | None, mode: str | None) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"token {token}"}) as client:
        face = BettyFace(BettyLink(url, client), cluster=cluster, mode=mode)
        server: Server[Any] = Server("betty", version=__version__, instructions=INSTRUCTIONS,
                                     on_list_tools=face.list_tools, on_call_tool=face.call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def serve(url: str, token: str, *, cluster: str | None = None, mode: str | None = None) -> None:
    """Serve Betty's tools over stdin/stdout until the client closes them."""
    anyio.run(_serve, url, token, cluster, mode)
