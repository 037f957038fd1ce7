"""``betty mcp``: Betty's MCP server over stdio, for a client that starts it, relayed to ``/betty/mcp``.

Every request of the client (its tools, a call) goes to the Jupyter server's own MCP endpoint
(:mod:`betty_jupyter.server.mcp_http`) with the client's credential, under the client's own name, and
its answer (progress included) comes back as it is. So stdio and HTTP are one face with one door: the
credential is accepted on ``/betty/mcp`` and nowhere else. A call is one HTTP exchange: when the client
cancels it, or ``betty mcp`` is killed, the connection closes and the server cancels the call's card.

The credential is sent only to the server it was issued for (:func:`server_for`).
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Awaitable, Callable, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ._version import __version__
from .errors import UsageError
from .mcp_credentials import McpCredentials, digest, server_url
from .mcp_server import INSTRUCTIONS

Context = ServerRequestContext[Any]
T = TypeVar("T")


def server_for(token: str, url: str | None) -> str:
    """The Jupyter server ``token`` may be sent to: the one it was issued for, as the person's credentials
    record it; where they are not on this machine, ``url``, which must be https or this machine's own.
    UsageError, one line, for any other URL."""
    issued = next((c for c in McpCredentials().listed() if c.sha256 == digest(token)), None)
    if issued is not None:
        if url and server_url(url) != issued.server:
            raise UsageError(f"this credential ({issued.caller}) was issued for {issued.server}; betty mcp sends it "
                             f"nowhere else (not to {url[:80]})")
        return issued.server
    if not url:
        raise UsageError("betty mcp needs the Jupyter server's URL for this credential: give it with --url or "
                         "$BETTY_SERVER_URL")
    return server_url(url)


class Relay:
    """The stdio client's requests, each made of ``/betty/mcp`` on ``server`` with ``token``."""

    def __init__(self, server: str, token: str, query: dict[str, str]) -> None:
        self.endpoint = server + "betty/mcp" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        self.token = token

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """The server's tools for this client."""
        return await self._upstream(ctx, lambda client: client.list_tools())

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        """The client's call, made of the server; its progress (waiting for a person) is passed on."""
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        try:
            return await self._upstream(ctx, lambda client: client.call_tool(params.name, params.arguments or {},
                                                                             progress_callback=progress))
        except MCPError as error:
            return types.CallToolResult(content=[types.TextContent(text=error.message)], is_error=True)

    async def _upstream(self, ctx: Context, request: Callable[[Client], Awaitable[T]]) -> T:
        """``request`` of the server in one MCP exchange under the client's name; MCPError, one line, when the
        server refuses or does not answer."""
        refusal: list[str] = []

        async def heard(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                await response.aread()
                refusal.append(_error_line(response))

        params = ctx.session.client_params
        name = params.client_info if params is not None else types.Implementation(name="", version="")
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                  timeout=httpx2.Timeout(30, read=None), event_hooks={"response": [heard]})
        try:
            async with http, Client(streamable_http_client(self.endpoint, http_client=http),
                                    client_info=types.Implementation(name=name.name, version=name.version),
                                    mode="legacy") as client:
                return await request(client)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as error:  # the relay's boundary: whatever failed becomes one line for the client
            said = next((line for line in refusal if line), "")
            if isinstance(error, MCPError) and not said:
                raise
            raise MCPError(types.INTERNAL_ERROR, said or (
                f"Betty's server at {self.endpoint} does not answer ({_first_cause(error)}); "
                "is Jupyter running with Betty's extension?")) from None


def _error_line(response: httpx2.Response) -> str:
    try:
        said = response.json().get("error")
    except (ValueError, AttributeError):
        said = None
    if said:
        return str(said)
    if response.status_code == 404:
        return f"{response.request.url} is not Betty's MCP endpoint (404): is Betty's extension enabled there?"
    return f"Betty's server answered {response.status_code}"


def _first_cause(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


async def _serve(relay: Relay) -> None:
    server: Server[Any] = Server("betty", version=__version__, instructions=INSTRUCTIONS,
                                 on_list_tools=relay.list_tools, on_call_tool=relay.call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve(url: str | None, token: str, *, cluster: str | None = None, mode: str | None = None) -> None:
    """Serve Betty's tools over stdin/stdout until the client closes them, relayed to the server ``token`` was
    issued for (UsageError before anything is sent when ``url`` is another)."""
    query = {key: value for key, value in (("cluster", cluster), ("mode", mode)) if value}
    anyio.run(_serve, Relay(server_for(token, url), token, query))
