"""An MCP client that hangs up without cancelling leaves no card behind: over HTTP (a raw streaming request of the
``initialize`` handshake, closed while its tier-2 call waits for a person, as the MCP Inspector does after its
timeout) and over stdio (``betty mcp`` killed while its call waits). The card is cancelled, approving it afterwards
is refused, and no job was submitted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
from typing import Any

import anyio
import httpx2
import pytest
from jupyter_server_proc import JupyterServer
from mcp_support import CREDENTIAL, api, credential, logged, project, until  # noqa: F401 (fixtures)
from notebook_support import SCRIPT, llm, server  # noqa: F401 (fixtures)
from test_server_support import ssh

pytestmark = pytest.mark.cluster

PROTOCOL = "2025-06-18"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "", "version": "1"}}}


def submission(name: str) -> dict[str, Any]:
    """A ``tools/call`` of ``cluster_submit`` for a job called ``name``, with a progress token (as the Inspector)."""
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "cluster_submit", "_meta": {"progressToken": 7},
                       "arguments": {"script": SCRIPT.format(name=name, seconds=300), "goal": "nobody waits"}}}


async def open_card(server: JupyterServer, client: str) -> dict[str, Any] | None:
    """The open ``cluster_submit`` card of the client called ``client``."""
    return next((a for a in (await api(server, "GET", "approvals"))["approvals"]
                 if a["tool"] == "cluster_submit" and a["task"] == f"{client} (mcp:{CREDENTIAL})"), None)


async def left_behind(server: JupyterServer, dev_cluster: dict[str, str], card: dict[str, Any], job: str) -> None:
    """The card is cancelled in the action log, cannot be approved any more, and no job of that name exists."""
    record = await until("the card cancelled", lambda: logged(server, card["call_id"]))
    assert (record["decision"], record["ok"]) == ("cancelled", None), record
    with pytest.raises(urllib.error.HTTPError) as late:
        await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
    assert late.value.code == 409
    queued = ssh(dev_cluster, f"squeue --noheader --format=%i --name={job}").stdout.strip()
    assert queued == "", f"a job was submitted for a client that left: {queued}"


def test_a_client_that_drops_its_http_connection_without_cancelling_leaves_no_card(
        server: JupyterServer, dev_cluster: dict[str, str], credential: str) -> None:
    client, job = "hangs-up-http", "mcp-gone-http"

    async def main() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {credential}", "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        endpoint = f"{server.url}betty/mcp?mode=auto"
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http:
            hello = {**INITIALIZE, "params": {**INITIALIZE["params"], "clientInfo": {"name": client, "version": "1"}}}
            opened = await http.post(endpoint, json=hello)
            assert opened.status_code == 200, opened.text
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
            ready = await http.post(endpoint, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                    headers=session)
            assert ready.status_code == 202
            async with http.stream("POST", endpoint, json=submission(job), headers=session) as waiting:
                assert waiting.status_code == 200
                card: dict[str, Any] = await until("the card", lambda: open_card(server, client))
            # the stream is closed unread, and the client goes: no notifications/cancelled was ever sent
        return card

    card = anyio.run(main)
    anyio.run(left_behind, server, dev_cluster, card, job)


def test_a_killed_betty_mcp_leaves_no_card(server: JupyterServer, dev_cluster: dict[str, str],
                                           project: dict[str, Any], credential: str) -> None:
    client, job = "hangs-up-stdio", "mcp-gone-stdio"
    env = {"BETTY_MCP_TOKEN": credential, "JUPYTER_CONFIG_DIR": project["env"]["JUPYTER_CONFIG_DIR"],
           "PATH": os.environ["PATH"], **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}
    relay = subprocess.Popen([sys.executable, "-m", "betty_jupyter.cli", "mcp", "--mode", "auto"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        hello = {**INITIALIZE, "params": {**INITIALIZE["params"], "clientInfo": {"name": client, "version": "1"}}}
        assert relay.stdin is not None and relay.stdout is not None
        relay.stdin.write(json.dumps(hello) + "\n")
        relay.stdin.flush()
        assert json.loads(relay.stdout.readline())["id"] == 1
        for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"}, submission(job)):
            relay.stdin.write(json.dumps(message) + "\n")
        relay.stdin.flush()
        card = anyio.run(until, "the card", lambda: open_card(server, client))
    finally:
        relay.send_signal(signal.SIGKILL)  # no goodbye: its connection to the server just closes
        relay.wait(30)
        for pipe in (relay.stdin, relay.stdout):
            if pipe is not None:
                pipe.close()
    anyio.run(left_behind, server, dev_cluster, card, job)
