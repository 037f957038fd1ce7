"""Betty's MCP faces on the ``mcp`` package's 1.x releases, 1.24 on (:mod:`betty_jupyter.mcp_package` says what each
does): the release jupyter-ai 3 and FastMCP 3 pull in."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError

from . import Answer, CallTool, ListTools, Progress, ProtocolError, Refused, Request


def server(name: str, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool) -> Server[Any, Any]:
    """The low-level server with the two handlers, registered as plain request handlers: the arguments reach the
    tool as the client sent them (each tool checks its own), and a ProtocolError is the request's JSON-RPC error."""
    made: Server[Any, Any] = Server(name, version=version, instructions=instructions)

    async def on_list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        try:
            tools = await list_tools(_request(made))
        except ProtocolError as error:
            raise McpError(types.ErrorData(code=error.code, message=error.message)) from None
        return types.ServerResult(types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in tools]))

    async def on_call_tool(request: types.CallToolRequest) -> types.ServerResult:
        try:
            answer = await call_tool(_request(made), request.params.name, dict(request.params.arguments or {}))
        except ProtocolError as error:
            raise McpError(types.ErrorData(code=error.code, message=error.message)) from None
        return types.ServerResult(types.CallToolResult(content=[types.TextContent(type="text", text=answer.text)],
                                                       isError=answer.error))

    made.request_handlers[types.ListToolsRequest] = on_list_tools
    made.request_handlers[types.CallToolRequest] = on_call_tool
    return made


def _request(server: Server[Any, Any]) -> Request:
    ctx = server.request_context
    params = ctx.session.client_params
    info = params.clientInfo if params is not None else None
    token = ctx.meta.progressToken if ctx.meta is not None else None

    async def progress(done: float, message: str) -> None:
        if token is not None:
            await ctx.session.send_progress_notification(token, done, None, message,
                                                         related_request_id=str(ctx.request_id))

    scope = getattr(ctx.request, "scope", None)
    return Request(client=info.name if info else "", client_version=info.version if info else "",
                   scope=scope if isinstance(scope, dict) else None, progress=progress)


def session_manager(server: Server[Any, Any]) -> StreamableHTTPSessionManager:
    """The streamable-HTTP session manager of ``server``, stateful."""
    return StreamableHTTPSessionManager(server)


async def serve_stdio(server: Server[Any, Any]) -> None:
    """Serve ``server`` on stdin/stdout."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Upstream:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def list_tools(self) -> list[dict[str, Any]]:
        try:
            listed = await self.session.list_tools()
        except McpError as error:
            raise ProtocolError(error.error.code, error.error.message) from None
        return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        try:
            result = await self.session.call_tool(name, arguments, progress_callback=progress)
        except McpError as error:
            raise ProtocolError(error.error.code, error.error.message) from None
        return Answer("\n".join(getattr(block, "text", "") for block in result.content), bool(result.isError))


@asynccontextmanager
async def upstream(endpoint: str, token: str, client: str, client_version: str,
                   refused: Refused) -> AsyncIterator[_Upstream]:
    """A client of the MCP server at ``endpoint`` (the ``initialize`` handshake)."""
    async def heard(response: httpx.Response) -> None:
        if response.status_code >= 400:
            refused(response.status_code, str(response.request.url), await response.aread())

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(30, read=None),
                             event_hooks={"response": [heard]})
    async with http, streamable_http_client(endpoint, http_client=http) as (read, write, _), \
            ClientSession(read, write, client_info=types.Implementation(name=client, version=client_version)) as session:
        await session.initialize()
        yield _Upstream(session)
