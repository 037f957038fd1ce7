"""``betty mcp``: Betty's MCP server (:mod:`betty_jupyter.mcp_server`) over stdio, for a client that starts it.

It reaches a running Jupyter server with Betty's extension through Betty's REST API
(``docs/server-api.md``): :class:`RestBetty` is the server's sessions as the MCP face sees them,
every failure one line of Betty's errors.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import anyio
import httpx
from mcp.server.stdio import stdio_server

from .errors import TransportError, UsageError
from .mcp_server import BettyFace, SessionGone, SessionOptions, mcp_server


class RestBetty:
    """Betty's sessions on one Jupyter server, over its REST API."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.base, self.client = url.rstrip("/") + "/betty/api/", client

    async def open_session(self, agent: str, options: SessionOptions) -> str:
        """``POST sessions`` for ``agent``."""
        body = {"cluster": options.cluster, "mode": options.mode, "agent": agent}
        return str((await self.request("POST", "sessions", body))["session_id"])

    async def tools(self, session_id: str) -> list[dict[str, Any]]:
        """``GET sessions/{id}/tools``."""
        tools: list[dict[str, Any]] = (await self.request("GET", f"sessions/{session_id}/tools"))["tools"]
        return tools

    async def last_seq(self, session_id: str) -> int:
        """``GET sessions/{id}``."""
        return int((await self.request("GET", f"sessions/{session_id}"))["last_seq"])

    async def call(self, session_id: str, tool: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
        """``POST sessions/{id}/tools/{tool}`` as ``caller: "agent"``, as long as the server takes."""
        body = {"args": args, "caller": "agent", "call_id": call_id}
        route = f"sessions/{session_id}/tools/" + urllib.parse.quote(tool, safe="")
        return await self.request("POST", route, body, timeout=None)

    async def events(self, session_id: str, after: int, wait: float) -> list[dict[str, Any]]:
        """``GET sessions/{id}/events`` (a long poll)."""
        answer = await self.request("GET", f"sessions/{session_id}/events?after={after}&wait={wait:g}",
                                    timeout=wait + 15)
        events: list[dict[str, Any]] = answer["events"]
        return events

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


def _error_line(answer: httpx.Response) -> str:
    try:
        said = answer.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(said) if said else ""


async def _serve(url: str, token: str, options: SessionOptions) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"token {token}"}) as client:
        server = mcp_server(BettyFace(RestBetty(url, client), lambda ctx: options))
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def serve(url: str, token: str, *, cluster: str | None = None, mode: str | None = None) -> None:
    """Serve Betty's tools over stdin/stdout until the client closes them."""
    anyio.run(_serve, url, token, SessionOptions(cluster, mode))
