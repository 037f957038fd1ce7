"""What the MCP tests share: the client's name, its answers as text, Betty's API off the event loop, the cards an
MCP client raised and the action log's lines. No tests here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from jupyter_server_proc import JupyterServer
from mcp_types import CallToolResult, Implementation

GUARD = 180.0  # a guard against a hang on a loaded machine, not a measurement
CLIENT = Implementation(name="betty-test-client", version="1.0")
TASK = "betty-test-client (MCP)"


def text(result: CallToolResult) -> str:
    """The text of a tool's answer."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def api(server: JupyterServer, method: str, route: str, body: Any = None) -> Any:
    """One request to the server's Betty API, off the event loop (urllib blocks)."""
    return await anyio.to_thread.run_sync(lambda: server.request(method, route, body))


async def until(what: str, check: Callable[[], Awaitable[Any]]) -> Any:
    """Poll ``check`` until it returns something true; that value."""
    with anyio.move_on_after(GUARD):
        while not (value := await check()):
            await anyio.sleep(0.2)
        return value
    pytest.fail(f"{what} did not happen within {GUARD:g} s")


async def card_for(server: JupyterServer, tool: str) -> dict[str, Any]:
    """The open card of ``tool`` that the test client's session raised."""
    async def open_card() -> dict[str, Any] | None:
        return next((a for a in (await api(server, "GET", "approvals"))["approvals"]
                     if a["tool"] == tool and a["task"] == TASK), None)

    card: dict[str, Any] = await until(f"the {tool} card", open_card)
    return card


async def logged(server: JupyterServer, call_id: str) -> dict[str, Any] | None:
    """The action log's line of ``call_id`` (None before it is written)."""
    records = (await api(server, "GET", "actions?limit=1000"))["actions"]
    return next((r for r in records if r["call_id"] == call_id), None)
