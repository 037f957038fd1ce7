"""What the MCP tests share: the client's name and credential, its answers as text, Betty's API off the event loop,
the cards an MCP client raised and the action log's lines. No tests but the ``credential`` fixture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from mcp_types import CallToolResult, Implementation
from notebook_support import new_project

GUARD = 180.0  # a guard against a hang on a loaded machine, not a measurement
CLIENT = Implementation(name="betty-test-client", version="1.0")
CREDENTIAL = "test-client"
TASK = f"betty-test-client (mcp:{CREDENTIAL})"


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project made by ``betty init`` with the dev cluster and the scripted model, and a Jupyter configuration
    directory of its own, where the person's MCP credentials are kept (never the machine's)."""
    made = new_project(tmp_path_factory.mktemp("mcp-project"), dev_cluster, llm)
    made["env"]["JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("mcp-jupyter-config"))
    return made


@pytest.fixture(scope="module")
def credential(server: JupyterServer) -> str:
    """The MCP credential the person made for the test client, over the panel's REST route."""
    made: dict[str, Any] = server.request("POST", "mcp/credentials", {"name": CREDENTIAL})
    assert made["credential"]["server"] == server.url and made["endpoint"] == f"{server.url}betty/mcp"
    return str(made["token"])


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
