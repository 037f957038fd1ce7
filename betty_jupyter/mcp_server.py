"""Betty's tools as an MCP server: where an MCP client's requests become calls in a Betty session.

It is served by the Jupyter server itself at ``/betty/mcp`` over streamable HTTP
(:mod:`betty_jupyter.server.mcp_http`), which hands it a :class:`Betty` (the server's sessions, in
process) and takes only a credential Betty issued to the client. ``betty mcp`` over stdio
(:mod:`betty_jupyter.mcp_stdio`) relays a client's requests to that endpoint, with the same credential.

Each client, known by its credential, its name (and the cluster and mode it asked for), works in one
Betty session named after both (``claude-code (mcp:laptop)``), opened on its first request:

- ``tools/list`` is that session's tools, those another agent can use (not the ones that serve
  Betty's own chat): name, title, description with the tier, the JSON schema of the arguments,
  and MCP's annotations (read-only, destructive, idempotent, open-world), derived from the
  tool's tier and metadata, so a host can let reads run;
- a ``tools/call`` of a tool not in that list is a JSON-RPC error naming the closest ones;
- ``tools/call`` is the client's call in that session, as another agent's: Betty's policy decides
  it as it decides its own agent's calls, a card waits for a person, and the action log records it
  with the client's name. The answer is the text Betty's own model would be told; a refusal, a
  denied card or a server that does not answer is an error result of one line.

It speaks through :mod:`betty_jupyter.mcp_package`, whichever supported release of the ``mcp``
package is installed. Nothing here decides anything: the server does. Nothing here asks the client anything either: an
MCP elicitation could be answered by the client's own agent, so a card is answered only by a
person, in Betty (``docs/mcp.md``).
"""

from __future__ import annotations

import difflib
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol, TypeVar

import anyio

from ._version import __version__
from .errors import BettyError
from .mcp_package import INTERNAL_ERROR, INVALID_PARAMS, Answer, ProtocolError, Request, load

POLL_SECONDS = 25
INSTRUCTIONS = ("Betty's tools for a Slurm cluster. Betty's policy decides every call: reads may ask a person "
                "once per session, and submitting or cancelling a job always waits until a person approves the "
                "exact script or command in Betty. A call that was not approved did not run: do not retry it "
                "unless the person asks.")
TIERS = {0: "Betty runs it (tier 0).",
         1: "Betty tier 1: in confirm mode a person approves its first call of the session.",
         2: "Betty tier 2: every call waits until a person approves its exact preview in Betty."}
T = TypeVar("T")


@dataclass(frozen=True)
class SessionOptions:
    """What a client's session is opened with: the cluster and the mode (None: the server's default), and the
    credential that asks (``mcp:NAME``), which cards and the action log name."""

    cluster: str | None = None
    mode: str | None = None
    caller: str | None = None


class Waitable(Protocol):
    """An event a call can wait on (asyncio's or anyio's)."""

    async def wait(self) -> Any:
        """Return once the event is set."""
        ...


class Betty(Protocol):
    """Betty's sessions as the MCP face uses them; every failure is one of Betty's errors, one line."""

    async def open_session(self, agent: str, options: SessionOptions) -> str:
        """A new session working for ``agent``; its id."""
        ...

    async def tools(self, session_id: str) -> list[dict[str, Any]]:
        """The session's tools another agent may call: ``{name, description, tier, schema, annotations}`` each
        (``annotations``: MCP's, ``title`` among them)."""
        ...

    async def last_seq(self, session_id: str) -> int:
        """The ``seq`` of the session's newest event."""
        ...

    async def call(self, session_id: str, tool: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
        """Another agent's call in the session, once decided (and run): its Outcome, ``text`` included."""
        ...

    async def events(self, session_id: str, after: int, wait: float) -> list[dict[str, Any]]:
        """The session's events after ``after`` (as JSON), held up to ``wait`` seconds until there is one."""
        ...


class BettyFace:
    """The MCP server's two handlers; each client gets one Betty session, opened on its first request.

    ``options`` says, for a request, what its client's session is opened with; ``left``, the event set
    when the request's calls must stop (its client hung up, or its credential was revoked; None where
    the transport cannot tell): such a call stops there, and its open card is cancelled.
    """

    def __init__(self, betty: Betty, options: Callable[[Request], SessionOptions],
                 left: Callable[[Request], Waitable | None] = lambda request: None) -> None:
        self.betty, self.options, self.left = betty, options, left
        self._sessions: dict[tuple[str, SessionOptions], str] = {}
        self._opening = anyio.Lock()

    async def list_tools(self, request: Request) -> list[dict[str, Any]]:
        """The session's tools; a JSON-RPC error of one line when the server cannot say."""
        try:
            tools = await self._in_session(request, lambda session: self.betty.tools(session))
        except BettyError as error:
            raise ProtocolError(INTERNAL_ERROR, str(error)) from None
        return [_tool(info) for info in tools]

    async def call_tool(self, request: Request, name: str, args: dict[str, Any]) -> Answer:
        """The client's call, as another agent's in Betty's session; waits while a person decides. A tool the
        session does not offer is a JSON-RPC error naming the closest ones."""
        call_id = f"mcp_{uuid.uuid4().hex[:12]}"
        try:
            after = await self._in_session(request, self.betty.last_seq)
            offered = [info["name"] for info in await self._in_session(request, self.betty.tools)]
        except BettyError as error:
            return Answer(str(error), error=True)
        if name not in offered:
            raise ProtocolError(INVALID_PARAMS, f"there is no tool {name[:60]!r}; {_closest(name, offered)}")
        answer: dict[str, Any] | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._tell_while_waiting, request, call_id, after)
            left = self.left(request)
            if left is not None:
                tasks.start_soon(_stop_when_set, left, tasks.cancel_scope)
            try:
                answer = await self._in_session(request, lambda session: self.betty.call(session, name, args, call_id))
            except BettyError as error:
                answer = {"ok": False, "summary": str(error)}
            tasks.cancel_scope.cancel()
        if answer is None:  # the call was stopped and its card cancelled: the client left, or lost its credential
            return Answer("not run: the call ended before a person answered (the client left, or its credential "
                          "was revoked)", error=True)
        return Answer(str(answer.get("text") or answer["summary"]), error=not answer["ok"])

    async def _in_session(self, request: Request, ask: Callable[[str], Awaitable[T]]) -> T:
        """``ask`` in the client's session (opened by the first request of its client)."""
        options = self.options(request)
        return await ask(await self._session_id((_client_name(request, options.caller), options)))

    async def _session_id(self, key: tuple[str, SessionOptions]) -> str:
        async with self._opening:
            if key not in self._sessions:
                self._sessions[key] = await self.betty.open_session(*key)
            return self._sessions[key]

    async def _tell_while_waiting(self, request: Request, call_id: str, after: int) -> None:
        """Progress for the client while its call waits for a person: which card, and where it is answered."""
        told = 0
        waiting = ""
        while True:
            try:
                events = await self._in_session(request,
                                                lambda session: self.betty.events(session, after, POLL_SECONDS))
            except BettyError:
                return  # the call itself says what went wrong
            for event in events:
                after = max(after, int(event["seq"]))
                payload = event["payload"]
                if event["type"] == "approval_request" and payload.get("call_id") == call_id:
                    waiting = (f"waiting for a person to approve {payload['tool']} in Betty (card "
                               f"{payload['approval_id']}: Betty's side panel, %betty approvals or the approvals API)")
                elif event["type"] == "approval_resolved" and payload.get("call_id") == call_id:
                    waiting = ""
            if waiting:
                told += 1
                await request.progress(told, waiting)


def mcp_server(face: BettyFace) -> Any:
    """The MCP server (of the installed ``mcp`` release) whose handlers are ``face``'s."""
    return load().server("betty", __version__, INSTRUCTIONS, face.list_tools, face.call_tool)


async def _stop_when_set(event: Waitable, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _client_name(request: Request, caller: str | None) -> str:
    """The client's own name (printable, short) and the credential that asks, as Betty's cards and action log
    name them: ``claude-code (mcp:laptop)``."""
    # no parentheses: only the credential's part, which the client does not choose, is in them
    printable = "".join(c for c in request.client if c.isprintable() and c not in "()")[:60].strip()
    return f"{printable or 'an MCP client'} ({caller or 'MCP'})"


def _closest(name: str, offered: list[str]) -> str:
    close = difflib.get_close_matches(name, offered, n=3, cutoff=0.5)
    return f"did you mean {' or '.join(close)}?" if close else f"the tools are {', '.join(offered)}"


def _tool(info: dict[str, Any]) -> dict[str, Any]:
    """A tool as MCP's ``tools/list`` gives it: the description ends with what its tier means here."""
    tier = int(info["tier"])
    annotations = dict(info.get("annotations") or {})
    tool = {"name": info["name"], "description": f"{info['description']}\n\n{TIERS.get(tier, '')}".strip(),
            "inputSchema": info["schema"], "annotations": annotations}
    if annotations.get("title"):
        tool["title"] = annotations["title"]
    return tool
