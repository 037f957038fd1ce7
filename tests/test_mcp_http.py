"""``/betty/mcp``: the ``mcp`` package's own streamable-HTTP client calls Betty's tools in a real Jupyter server on the
dev cluster, with the MCP credential the person made for it — Betty's policy deciding, a person answering tier 2 over
the approvals API, the job really queued in Slurm, every call in the action log under the client's name and
credential; without that credential (a wrong one, none, or the Jupyter server's own token) nothing reaches a tool."""

from __future__ import annotations

import getpass
import json
import re
import urllib.error
import urllib.request
from typing import Any, Awaitable, Callable

import anyio
import httpx2
import pytest
from jupyter_server_proc import JupyterServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import CLIENT, TASK, api, card_for, credential, logged, project, text, until  # noqa: F401
from mcp_types import CallToolResult, Implementation

from betty_jupyter.server.mcp_http import REFUSED
from notebook_support import SCRIPT, llm, server  # noqa: F401 (fixtures)
from conftest import run_betty
from test_server_support import job_state, scancel

pytestmark = pytest.mark.cluster

ENDPOINTS = ("legacy", "auto")  # the initialize handshake most clients speak today, and the newer protocol


def over_http(server: JupyterServer, http: httpx2.AsyncClient, query: str = "", mode: str = "auto") -> Client:
    """The MCP client on the server's ``/betty/mcp``, its HTTP requests made by ``http`` (which holds the credential)."""
    return Client(streamable_http_client(f"{server.url}betty/mcp{query}", http_client=http), client_info=CLIENT,
                  mode=mode)


def with_token(token: str | None, statuses: list[int] | None = None) -> httpx2.AsyncClient:
    """An HTTP client sending ``token`` as MCP clients are told to (``Authorization: Bearer``), or no token;
    the status of each answer it gets goes into ``statuses``."""
    async def seen(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300),
                              event_hooks={"response": [seen]})


async def actions(server: JupyterServer) -> list[dict[str, Any]]:
    """Every line of the action log."""
    records: list[dict[str, Any]] = (await api(server, "GET", "actions?limit=10000"))["actions"]
    return records


@pytest.mark.parametrize("mode", ENDPOINTS)
def test_a_client_lists_the_tools_and_reads_the_cluster(server: JupyterServer, credential: str, mode: str) -> None:
    async def main() -> None:
        async with with_token(credential) as http, over_http(server, http, "?mode=auto", mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"cluster_queue", "cluster_partitions", "cluster_submit", "cluster_run"} <= set(tools)
            assert "script" in tools["cluster_submit"].input_schema["required"]
            assert "tier 2" in (tools["cluster_submit"].description or "")
            read = await client.call_tool("cluster_partitions", {})  # tier 1 runs without a card in auto mode
            assert not read.is_error and "gpu" in text(read), text(read)
            again = await client.call_tool("cluster_partitions", {})  # the same session: its name on each line
            assert not again.is_error
        lines = [r for r in await actions(server) if r["tool"] == "cluster_partitions" and r["task"] == TASK]
        assert len(lines) >= 2 and {(r["decision"], r["ok"]) for r in lines} == {("auto", True)}
        assert len({r["session_id"] for r in lines}) == 1  # one Betty session for the client, whatever the protocol

    anyio.run(main)


@pytest.mark.parametrize("mode", ENDPOINTS)
def test_a_submission_waits_for_a_person_then_is_queued_in_slurm(server: JupyterServer, dev_cluster: dict[str, str],
                                                                  credential: str, mode: str) -> None:
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> tuple[str, dict[str, Any]]:
        async with with_token(credential) as http, over_http(server, http, "?mode=auto", mode) as client:
            answers: list[CallToolResult] = []
            async with anyio.create_task_group() as tasks:
                async def submit() -> None:
                    script = SCRIPT.format(name=f"mcp-http-{mode}", seconds=300)
                    answers.append(await client.call_tool("cluster_submit", {"script": script, "goal": "test MCP"},
                                                          progress_callback=on_progress))

                tasks.start_soon(submit)
                card = await card_for(server, "cluster_submit")  # tier 2 asks in auto mode too
                assert f"#SBATCH --job-name=mcp-http-{mode}" in card["preview"]["text"]

                async def told() -> bool:
                    return any(f"card {card['approval_id']}" in m for m in progress)

                await until("the client told it waits for a person", told)
                assert not answers  # still waiting
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
        assert not answers[0].is_error, text(answers[0])
        return re.search(r"submitted job (\d+)", text(answers[0])).group(1), card

    job_id, card = anyio.run(main)
    try:
        assert job_state(dev_cluster, job_id) in ("PENDING", "RUNNING")
        record = server.request("GET", "actions?limit=1000")["actions"]
        line = next(r for r in record if r["call_id"] == card["call_id"])
        assert (line["tool"], line["decision"], line["ok"], line["task"]) == ("cluster_submit", "approved", True, TASK)
        assert line["session_id"] == card["session_id"]
    finally:
        scancel(dev_cluster, job_id)


def test_a_command_outside_the_allowlist_is_refused(server: JupyterServer, credential: str) -> None:
    async def main() -> CallToolResult:
        async with with_token(credential) as http, over_http(server, http, "?mode=auto") as client:
            return await client.call_tool("cluster_run", {"command": "squeue; reboot"})

    result = anyio.run(main)
    assert result.is_error and text(result) == ("error: refused: ';' is a shell metacharacter; "
                                                 "Betty runs one plain command, no shell"), text(result)


@pytest.mark.parametrize("mode", ENDPOINTS)
def test_a_client_that_goes_away_leaves_no_card_behind(server: JupyterServer, project: dict[str, Any],
                                                       credential: str, mode: str) -> None:
    page = {"page": f"notes/mcp-http-gone-{mode}.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "Gone", "description": "a page nobody approved", "type": "note"}}

    async def main() -> dict[str, Any]:
        async with with_token(credential) as http, over_http(server, http, "?mode=auto", mode) as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "wiki_write", page)
                card = await card_for(server, "wiki_write")
                tasks.cancel_scope.cancel()  # the client gives up on the call, and leaves
        return card

    card = anyio.run(main)
    record = anyio.run(until, "the card cancelled", lambda: logged(server, card["call_id"]))
    assert (record["decision"], record["ok"]) == ("cancelled", None)
    assert card["approval_id"] not in {a["approval_id"] for a in server.request("GET", "approvals")["approvals"]}
    assert not (project["root"] / "wiki" / "notes" / f"mcp-http-gone-{mode}.md").exists()


@pytest.mark.parametrize("token", [None, "not-the-token", "the Jupyter server's token"])
def test_without_the_credential_no_request_reaches_a_tool(server: JupyterServer, credential: str,
                                                          token: str | None) -> None:
    marker = f"squeue --name=mcp-http-{(token or 'none').split()[-1]}"
    token = server.token if token == "the Jupyter server's token" else token

    async def run_it(http: httpx2.AsyncClient) -> CallToolResult:
        async with over_http(server, http, "?mode=auto") as client:
            return await client.call_tool("cluster_run", {"command": marker})

    async def main() -> None:
        statuses: list[int] = []
        async with with_token(token, statuses) as http:
            with pytest.raises(Exception):  # the client cannot even start
                await run_it(http)
        assert statuses and set(statuses) == {403}, statuses
        assert not [r for r in await actions(server) if r["args"].get("command") == marker]
        async with with_token(credential) as http:  # the same call with the credential runs, and is logged
            assert not (await run_it(http)).is_error
        assert [r for r in await actions(server) if r["args"].get("command") == marker]

    anyio.run(main)


@pytest.mark.parametrize("authorization", [None, "token not-the-token", "Bearer not-the-token", "jupyter"])
def test_every_method_of_the_endpoint_refuses_a_request_without_the_credential(server: JupyterServer,
                                                                                authorization: str | None) -> None:
    if authorization == "jupyter":  # the person's own token: never handed to another agent, so never taken here
        authorization = f"Bearer {server.token}"
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    for method in ("POST", "GET", "DELETE"):
        request = urllib.request.Request(f"{server.url}betty/mcp", data=body if method == "POST" else None,
                                         method=method, headers={"Content-Type": "application/json",
                                                                 "Accept": "application/json, text/event-stream",
                                                                 **({"Authorization": authorization}
                                                                    if authorization else {})})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403, (method, refused.value.code)
        assert json.loads(refused.value.read()) == {"error": REFUSED}
        refused.value.close()


def test_a_mode_or_cluster_the_server_does_not_know_is_refused(server: JupyterServer, credential: str) -> None:
    for query, status, said in (("?mode=yolo", 400, "?mode= is one of off, propose, confirm, auto, not 'yolo'"),
                                ("?cluster=elsewhere", 404, "no cluster called 'elsewhere'")):
        request = urllib.request.Request(f"{server.url}betty/mcp{query}", data=b"{}", method="POST",
                                         headers={"Authorization": f"token {credential}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == status and said in refused.value.read().decode()
        refused.value.close()


AROUND_BETTY = [("POST", "betty/api/approvals/{card}", {"decision": "approved"}),
                ("POST", "betty/api/approvals/{card}", {"decision": "edited", "args": {"script": "#!/bin/bash\nid\n"}}),
                ("POST", "betty/api/approvals/{card}/preview", {"args": {"script": "#!/bin/bash\nid\n"}}),
                ("GET", "betty/api/approvals", None), ("GET", "betty/api/actions", None),
                ("GET", "betty/api/sessions/{session}/events", None),
                ("PUT", "betty/api/sessions/{session}/mode", {"mode": "auto"}),
                ("POST", "betty/api/sessions/{session}/tools/cluster_submit",
                 {"args": {"script": SCRIPT.format(name="mcp-around", seconds=1)}, "caller": "person"}),
                ("POST", "betty/api/sessions", {"mode": "auto"}),
                ("POST", "betty/api/mcp/credentials", {"name": "another"}),
                ("DELETE", "betty/api/mcp/credentials/test-client", None),
                ("POST", "api/kernels", {}), ("POST", "api/terminals", {}), ("GET", "api/contents", None),
                ("PUT", "api/contents/planted.py", {"type": "file", "format": "text", "content": "import os"})]
"""What an agent holding its MCP credential would try, to make a tier-2 call happen without the person."""


def test_a_client_cannot_answer_its_own_card_nor_reach_around_betty(server: JupyterServer, project: dict[str, Any],
                                                                    credential: str) -> None:
    async def main() -> tuple[dict[str, Any], list[CallToolResult]]:
        answers: list[CallToolResult] = []
        async with with_token(credential) as http, over_http(server, http, "?mode=auto") as client:
            assert not [tool.name for tool in (await client.list_tools()).tools if "approv" in tool.name]
            async with anyio.create_task_group() as tasks:
                async def submit() -> None:
                    script = SCRIPT.format(name="mcp-own-card", seconds=300)
                    answers.append(await client.call_tool("cluster_submit", {"script": script, "goal": "own card"}))

                tasks.start_soon(submit)
                card = await card_for(server, "cluster_submit")
                for method, route, body in AROUND_BETTY:
                    url = server.url + route.format(card=card["approval_id"], session=card["session_id"])
                    for authorization in (f"Bearer {credential}", f"token {credential}"):
                        tried = await http.request(method, url, json=body, headers={"Authorization": authorization})
                        assert tried.status_code == 403, (method, route, tried.status_code, tried.text)
                assert card["approval_id"] in {a["approval_id"] for a in (await api(server, "GET", "approvals"))[
                    "approvals"]}  # still open: only the person answers it
                assert not answers
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "denied", "face": "notebook"})
        return card, answers

    card, answers = anyio.run(main)
    assert answers[0].is_error and "not run: denied" in text(answers[0])
    line = server.request("GET", "actions?limit=1000")["actions"]
    record = next(r for r in line if r["call_id"] == card["call_id"])
    assert (record["decision"], record["task"]) == ("denied", TASK)
    assert record["approver"] == f"{getpass.getuser()} (notebook)"  # who really answered, where
    assert not (project["root"] / "planted.py").exists()
    assert server.request("GET", "mcp/credentials")["credentials"][0]["name"] == "test-client"  # nothing revoked


def revoked_while_waiting(server: JupyterServer, name: str, token: str,
                          revoke: Callable[[], Awaitable[None]]) -> tuple[dict[str, Any], CallToolResult]:
    """Credential ``name`` (``token``) calls ``wiki_write`` and, while its card is open, ``revoke`` runs: the card
    and the call's answer. Afterwards the client's next request is refused."""
    page = {"page": f"notes/{name}.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "Revoked", "description": "a page of a revoked client", "type": "note"}}

    async def main() -> tuple[dict[str, Any], CallToolResult]:
        answers: list[CallToolResult] = []
        async with with_token(token) as http, over_http(server, http, "?mode=auto") as client:
            async with anyio.create_task_group() as tasks:
                async def write() -> None:
                    answers.append(await client.call_tool("wiki_write", page))

                tasks.start_soon(write)

                async def open_card() -> dict[str, Any] | None:
                    return next((a for a in (await api(server, "GET", "approvals"))["approvals"]
                                 if a["task"] == f"betty-test-client (mcp:{name})"), None)

                card = await until("the card", open_card)
                await revoke()
            with pytest.raises(Exception):
                await client.list_tools()
        return card, answers[0]

    return anyio.run(main)


def test_revoking_a_credential_cancels_its_open_card_and_refuses_its_next_request(server: JupyterServer) -> None:
    token = server.request("POST", "mcp/credentials", {"name": "soon-revoked"})["token"]
    shown = server.request("GET", "mcp/credentials")["credentials"]
    assert "soon-revoked" in {c["name"] for c in shown} and token not in json.dumps(shown)
    cancelled: list[str] = []

    async def revoke() -> None:
        cancelled.extend((await api(server, "DELETE", "mcp/credentials/soon-revoked"))["cancelled"])

    card, answer = revoked_while_waiting(server, "soon-revoked", token, revoke)
    assert cancelled == [card["approval_id"]]
    assert answer.is_error and "not run: " in text(answer), text(answer)  # cancelled, however it heard of it
    statuses: list[int] = []

    async def again() -> None:
        async with with_token(token, statuses) as http:
            with pytest.raises(Exception):
                async with over_http(server, http, "?mode=auto") as client:
                    await client.list_tools()

    anyio.run(again)
    assert statuses and set(statuses) == {403}


def test_a_credential_revoked_with_the_cli_while_its_call_waits_cancels_the_card(server: JupyterServer,
                                                                                  project: dict[str, Any]) -> None:
    token = server.request("POST", "mcp/credentials", {"name": "cli-revoked"})["token"]

    async def revoke() -> None:
        revoked = await anyio.to_thread.run_sync(
            lambda: run_betty("mcp", "token", "revoke", "cli-revoked", env=project["env"]))
        assert revoked.returncode == 0, revoked.stderr

    card, answer = revoked_while_waiting(server, "cli-revoked", token, revoke)
    assert answer.is_error and "credential was revoked" in text(answer), text(answer)
    record = anyio.run(until, "the card cancelled", lambda: logged(server, card["call_id"]))
    assert (record["decision"], record["ok"]) == ("cancelled", None)
    assert not (project["root"] / "wiki" / "notes" / "cli-revoked.md").exists()


@pytest.mark.parametrize(("name", "shown"), [("claude-code (mcp:someone-else)", "claude-code mcp:someone-else"),
                                             ("red\x1b[31m\u202eevil\n", "red[31mevil"), ("", "an MCP client"),
                                             ("x" * 200, "x" * 60)])
def test_a_client_cannot_pass_itself_off_as_another_credential(server: JupyterServer, credential: str, name: str,
                                                               shown: str) -> None:
    async def main() -> None:
        async with with_token(credential) as http, \
                Client(streamable_http_client(f"{server.url}betty/mcp?mode=auto", http_client=http),
                       client_info=Implementation(name=name, version="1"), mode="legacy") as client:
            assert not (await client.call_tool("cluster_partitions", {})).is_error

    anyio.run(main)
    tasks = {r["task"] for r in server.request("GET", "actions?limit=1000")["actions"]}
    assert f"{shown} (mcp:test-client)" in tasks
    assert not [task for task in tasks if task and task.endswith("(mcp:someone-else)")]
