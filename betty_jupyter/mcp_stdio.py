"""``betty mcp``: Betty's MCP server over stdio, for a client that starts it, relayed to ``/betty/mcp``.

Every request of the client (its tools, a call) goes to the Jupyter server's own MCP endpoint
(:mod:`betty_jupyter.server.mcp_http`) with the client's credential, under the client's own name, and
its answer (progress included) comes back as it is. So stdio and HTTP are one face with one door: the
credential is accepted on ``/betty/mcp`` and nowhere else. A call is one HTTP exchange: when the client
cancels it, or ``betty mcp`` is killed, the connection closes and the server cancels the call's card.

The credential is sent only to the server it was issued for (:func:`server_for`).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Awaitable, Callable, TypeVar

import anyio

from ._version import __version__
from .errors import UsageError
from .mcp_credentials import McpCredentials, digest, server_url
from .mcp_package import INTERNAL_ERROR, Answer, ProtocolError, Request, Upstream, load
from .mcp_server import INSTRUCTIONS

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

    async def list_tools(self, request: Request) -> list[dict[str, Any]]:
        """The server's tools for this client, as the server gives them."""
        return await self._upstream(request, lambda upstream: upstream.list_tools())

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> Answer:
        """The client's call, made of the server; its progress (waiting for a person) is passed on. A server that
        refuses or does not answer is an error result of one line; the server's own JSON-RPC error (a tool it does not
        have) comes back as it is."""
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await request.progress(progress, message or "")

        try:
            return await self._upstream(request, lambda upstream: upstream.call_tool(name, arguments, progress))
        except _Unreachable as error:
            return Answer(error.message, error=True)

    async def _upstream(self, request: Request, ask: Callable[[Upstream], Awaitable[T]]) -> T:
        """``ask`` of the server in one MCP exchange under the client's name; _Unreachable, one line, when the server
        refuses or does not answer."""
        refusal: list[str] = []

        def refused(status: int, url: str, body: bytes) -> None:
            refusal.append(_error_line(status, url, body))

        try:
            async with load().upstream(self.endpoint, self.token, request.client, request.client_version,
                                       refused) as upstream:
                return await ask(upstream)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as error:  # the relay's boundary: whatever failed becomes one line for the client
            said = next((line for line in refusal if line), "")
            cause = _innermost(error)
            if isinstance(cause, ProtocolError) and not said:
                raise cause from None  # the server's own answer, as it is
            raise _Unreachable(INTERNAL_ERROR, said or (
                f"Betty's server at {self.endpoint} does not answer ({str(cause) or type(cause).__name__}); "
                "is Jupyter running with Betty's extension?")) from None


class _Unreachable(ProtocolError):
    """The server refused the request, or did not answer: one line."""


def _error_line(status: int, url: str, body: bytes) -> str:
    try:
        said = json.loads(body.decode("utf-8", "replace")).get("error")
    except (ValueError, AttributeError):
        said = None
    if said:
        return str(said)[:300]
    if status in (404, 405) or b"_xsrf" in body:
        return (f"{url[:120]} is not Betty's MCP endpoint (it answered {status}): give the Jupyter server's own URL "
                "(like http://127.0.0.1:8888/, not a JupyterLab page such as …/lab/), on a server with Betty's "
                "extension enabled")
    return f"Betty's server answered {status}"


def _innermost(error: BaseException) -> BaseException:
    """The first error inside ``error``'s groups (a client's task groups wrap what its request raised)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def _serve(relay: Relay) -> None:
    package = load()
    await package.serve_stdio(package.server("betty", __version__, INSTRUCTIONS, relay.list_tools, relay.call_tool))


def serve(url: str | None, token: str, *, cluster: str | None = None, mode: str | None = None) -> None:
    """Serve Betty's tools over stdin/stdout until the client closes them, relayed to the server ``token`` was
    issued for (UsageError before anything is sent when ``url`` is another)."""
    query = {key: value for key, value in (("cluster", cluster), ("mode", mode)) if value}
    anyio.run(_serve, Relay(server_for(token, url), token, query))
