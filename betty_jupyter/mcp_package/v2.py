"""Betty's MCP faces on the ``mcp`` package's 2.x releases (:mod:`betty_jupyter.mcp_package` says what each does)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from . import Answer, CallTool, ListTools, Progress, ProtocolError, Refused, Request

Context = ServerRequestContext[Any]


def server(name: str, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool) -> Server[Any]:
    """The low-level server with the two handlers."""
    async def on_list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            tools = await list_tools(_request(ctx))
        except ProtocolError as error:
            raise MCPError(error.code, error.message) from None
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in tools])

    async def on_call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            answer = await call_tool(_request(ctx), params.name, dict(params.arguments or {}))
        except ProtocolError as error:
            raise MCPError(error.code, error.message) from None
        return types.CallToolResult(content=[types.TextContent(text=answer.text)], is_error=answer.error)

    return Server(name, version=version, instructions=instructions, on_list_tools=on_list_tools,
                  on_call_tool=on_call_tool)


def _request(ctx: Context) -> Request:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None

    async def progress(done: float, message: str) -> None:
        await ctx.session.report_progress(done, None, message)

    return Request(client=info.name if info else "", client_version=info.version if info else "",
                   scope=ctx.request.scope if ctx.request is not None else None, progress=progress)


def session_manager(server: Server[Any]) -> StreamableHTTPSessionManager:
    """The streamable-HTTP session manager of ``server``, stateful."""
    return StreamableHTTPSessionManager(server)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on stdin/stdout."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Upstream:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def list_tools(self) -> list[dict[str, Any]]:
        try:
            listed = await self.client.list_tools()
        except MCPError as error:
            raise ProtocolError(error.code, error.message) from None
        return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        try:
            result = await self.client.call_tool(name, arguments, progress_callback=progress)
        except MCPError as error:
            raise ProtocolError(error.code, error.message) from None
        return Answer("\n".join(getattr(block, "text", "") for block in result.content), bool(result.is_error))


@asynccontextmanager
async def upstream(endpoint: str, token: str, client: str, client_version: str,
                   refused: Refused) -> AsyncIterator[_Upstream]:
    """A client of the MCP server at ``endpoint`` (the ``initialize`` handshake, which every server speaks)."""
    async def heard(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused(response.status_code, str(response.request.url), await response.aread())

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=None),
                              event_hooks={"response": [heard]})
    async with http, Client(streamable_http_client(endpoint, http_client=http),
                            client_info=types.Implementation(name=client, version=client_version),
                            mode="legacy") as session:
        yield _Upstream(session)
