"""The ``mcp`` package Betty's MCP faces stand on, whichever supported release is installed: one small interface.

Betty speaks MCP through the ``mcp`` package (the extra ``betty-jupyter[mcp]``). Its 1.x releases
(1.24 on, what jupyter-ai 3 and FastMCP 3 pull in) and its 2.x releases differ in every name Betty
uses, so the faces (:mod:`betty_jupyter.mcp_server`, :mod:`betty_jupyter.mcp_stdio`,
:mod:`betty_jupyter.server.mcp_http`) never touch the package: they hand :func:`load`'s
:class:`Package` two handlers that see plain data only — a :class:`Request`, tools in MCP's own
wire form (``{name, title, description, inputSchema, annotations}``), an :class:`Answer`, a
:class:`ProtocolError` — and the release's module (:mod:`.v1` or :mod:`.v2`) does the rest.

:func:`problem` says in one line why this environment cannot speak MCP (no package, a release
Betty does not support, one that does not load); each face says that line instead of a traceback.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Protocol, cast

SUPPORTED = ">=1.24,<3"
"""The ``mcp`` releases Betty speaks MCP with (pyproject's extra pins the same)."""
INSTALL = "pip install 'betty-jupyter[mcp]'"
INVALID_PARAMS = -32602
"""JSON-RPC's error code for a request naming something that is not there (an unknown tool)."""
INTERNAL_ERROR = -32603
"""JSON-RPC's error code for a server that cannot answer."""


@dataclass(frozen=True)
class Request:
    """One request of an MCP client, as a face's handler sees it."""

    client: str
    """The name the client gave (``clientInfo.name``; empty when it gave none)."""
    client_version: str
    scope: Mapping[str, Any] | None
    """The ASGI scope of the HTTP request that carried it (None over stdio)."""
    progress: Callable[[float, str], Awaitable[None]]
    """Tell the client how its request stands (``progress``, a message); nothing when it asked for no progress."""


@dataclass(frozen=True)
class Answer:
    """A tool call's answer: its text, and whether it is an error result."""

    text: str
    error: bool = False


class ProtocolError(Exception):
    """A request answered with a JSON-RPC error (code, one line) rather than a result."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


ListTools = Callable[[Request], Awaitable[list[dict[str, Any]]]]
CallTool = Callable[[Request, str, dict[str, Any]], Awaitable[Answer]]
Refused = Callable[[int, str, bytes], None]
"""Hears an HTTP answer of 400 or more from an upstream server: its status, its URL and its body."""


class Progress(Protocol):
    """Hears a request's progress, as the server tells it."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """``progress`` (of ``total``, when known), and what the server says of it."""
        ...


class Upstream(Protocol):
    """A client of another MCP server (Betty's ``/betty/mcp``), one exchange at a time."""

    async def list_tools(self) -> list[dict[str, Any]]:
        """Its tools, in MCP's wire form."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        """A call of its tool ``name``; its progress goes to ``progress``."""
        ...


class Package(Protocol):
    """What a supported release of the ``mcp`` package offers Betty (:mod:`.v1`, :mod:`.v2`)."""

    def server(self, name: str, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool) -> Any:
        """The release's low-level MCP server with these two handlers; a :class:`ProtocolError` they raise is the
        request's JSON-RPC error."""
        ...

    def session_manager(self, server: Any) -> Any:
        """The release's streamable-HTTP session manager of ``server`` (stateful; ``run()`` and
        ``handle_request(scope, receive, send)``)."""
        ...

    async def serve_stdio(self, server: Any) -> None:
        """Serve ``server`` on stdin/stdout until the client closes them."""
        ...

    def upstream(self, endpoint: str, token: str, client: str, client_version: str,
                 refused: Refused) -> AbstractAsyncContextManager[Upstream]:
        """A client of the MCP server at ``endpoint`` over streamable HTTP, with ``token`` as a bearer credential and
        the name ``client``; ProtocolError for its JSON-RPC errors, the transport's own error otherwise."""
        ...


def installed() -> str | None:
    """The installed ``mcp`` release (None: none importable)."""
    try:
        if importlib.util.find_spec("mcp") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return None


def major(version: str) -> int | None:
    """1 or 2: the supported line ``version`` is of; None for a release Betty does not support."""
    numbers = [int(part) for part in re.findall(r"\d+", version)[:2]]
    if len(numbers) < 2:
        return None
    if numbers[0] == 1 and numbers[1] >= 24:
        return 1
    return 2 if numbers[0] == 2 else None


def problem(face: str) -> str | None:
    """Why ``face`` (``betty mcp``, Betty's MCP endpoint) cannot speak MCP here, in one line; None when it can."""
    version = installed()
    if version is None:
        return f"{face} needs the MCP package: {INSTALL}"
    if major(version) is None:
        return (f"{face} needs mcp {SUPPORTED}, and this environment has mcp {version[:20]}: {INSTALL} "
                f"(or pip install 'mcp{SUPPORTED}')")
    try:
        load()
    except ImportError as error:
        return f"{face} cannot load mcp {version[:20]} ({str(error)[:120]}): {INSTALL}"
    return None


def load() -> Package:
    """The module that speaks the installed release (ImportError when none is supported, or it does not load)."""
    version = installed()
    line = major(version) if version else None
    if line is None:
        raise ImportError(f"no mcp {SUPPORTED} is installed")
    return cast(Package, importlib.import_module(f"{__name__}.v{line}"))
