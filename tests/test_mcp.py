"""``betty mcp``: an MCP client (the ``mcp`` package's own) spawns it over stdio and calls Betty's tools through a
real Jupyter server on the dev cluster, with the MCP credential the person made for it — Betty's policy deciding, a
person answering tier 2 over the server's approvals API, every call in the action log under the client's name and
credential. ``betty mcp`` sends the credential only to the server it was made for, and never takes the Jupyter
server's own token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import anyio
import pytest
from jupyter_server_proc import JupyterServer
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_support import CLIENT, TASK, api, card_for, credential, logged, project, text, until  # noqa: F401
from mcp_types import CallToolResult

from betty_jupyter.server.mcp_http import REFUSED
from notebook_support import SCRIPT, llm, server  # noqa: F401 (fixtures)
from test_server_support import job_state, scancel

pytestmark = pytest.mark.cluster


def betty_mcp(project: dict[str, Any], *args: str, token: str, handshake: bool = False,
              **variables: str) -> Client:
    """An MCP client that spawns ``betty mcp ARGS`` with the credential in its environment only (and the person's
    Jupyter configuration, where the credential's server is recorded), and ``variables``.

    ``handshake``: the ``initialize`` handshake most clients still speak, rather than the newer
    protocol the client picks by itself.
    """
    env = {"BETTY_MCP_TOKEN": token, "JUPYTER_CONFIG_DIR": project["env"]["JUPYTER_CONFIG_DIR"], **variables}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    command = StdioServerParameters(command=sys.executable, args=["-m", "betty_jupyter.cli", "mcp", *args], env=env)
    return Client(command, client_info=CLIENT, mode="legacy" if handshake else "auto")


def test_a_client_lists_the_tools_and_its_reads_ask_once_per_session_in_confirm_mode(server: JupyterServer,
                                                                                    project: dict[str, Any],
                                                                                    credential: str) -> None:
    async def main() -> None:
        async with betty_mcp(project, "--mode", "confirm", token=credential, handshake=True) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"cluster_queue", "cluster_partitions", "cluster_submit", "cluster_run"} <= set(tools)
            submit = tools["cluster_submit"]
            assert "script" in submit.input_schema["properties"] and "script" in submit.input_schema["required"]
            assert "tier 2" in (submit.description or "") and "tier 1" in (tools["cluster_queue"].description or "")

            answers: list[CallToolResult] = []
            async with anyio.create_task_group() as tasks:
                async def first_read() -> None:
                    answers.append(await client.call_tool("cluster_partitions", {}))

                tasks.start_soon(first_read)
                card = await card_for(server, "cluster_partitions")  # tier 1, first time in this session: asked
                assert card["tier"] == 1
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
            assert not answers[0].is_error and "gpu" in text(answers[0])
            again = await client.call_tool("cluster_partitions", {})  # asked once: no card this time
            assert not again.is_error and "gpu" in text(again)
            record = await logged(server, card["call_id"])
            assert (record["decision"], record["task"]) == ("approved", TASK)
            assert record["approver"].endswith("(server API)")

    anyio.run(main)


def test_a_submission_waits_for_a_person_and_a_denied_cancel_does_not_run(server: JupyterServer, project: dict[str, Any],
                                                                         credential: str,
                                                                         dev_cluster: dict[str, str]) -> None:
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> str:
        async with betty_mcp(project, "--mode", "auto", token=credential) as client:
            answers: list[CallToolResult] = []
            async with anyio.create_task_group() as tasks:
                async def submit() -> None:
                    script = SCRIPT.format(name="mcp-submit", seconds=300)
                    answers.append(await client.call_tool("cluster_submit", {"script": script, "goal": "test MCP"},
                                                          progress_callback=on_progress))

                tasks.start_soon(submit)
                card = await card_for(server, "cluster_submit")  # tier 2 asks in auto mode too
                assert "#SBATCH --job-name=mcp-submit" in card["preview"]["text"]

                async def told() -> bool:
                    return any("waiting for a person to approve cluster_submit" in m for m in progress)

                await until("the client told it waits for a person", told)
                assert not answers  # still waiting
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
            assert not answers[0].is_error, text(answers[0])
            job_id = re.search(r"submitted job (\d+)", text(answers[0])).group(1)
            record = await logged(server, card["call_id"])
            assert (record["tool"], record["decision"], record["ok"]) == ("cluster_submit", "approved", True)
            assert record["approver"].endswith("(server API)") and record["task"] == TASK

            async with anyio.create_task_group() as tasks:
                async def cancel() -> None:
                    answers.append(await client.call_tool("cluster_cancel", {"job_id": job_id}))

                tasks.start_soon(cancel)
                card = await card_for(server, "cluster_cancel")
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "denied"})
            assert answers[1].is_error and "not run: denied" in text(answers[1])
            assert (await logged(server, card["call_id"]))["decision"] == "denied"
            return job_id

    job_id = anyio.run(main)
    try:
        assert job_state(dev_cluster, job_id) in ("PENDING", "RUNNING")  # submitted, and not cancelled
    finally:
        scancel(dev_cluster, job_id)


def test_a_client_that_goes_away_leaves_no_card_behind(server: JupyterServer, project: dict[str, Any],
                                                       credential: str) -> None:
    page = {"page": "notes/mcp-gone.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "Gone", "description": "a page nobody approved", "type": "note"}}

    async def main() -> dict[str, Any]:
        async with betty_mcp(project, "--mode", "auto", token=credential) as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "wiki_write", page)
                card = await card_for(server, "wiki_write")
                tasks.cancel_scope.cancel()  # the client gives up and closes betty mcp
        return card

    card = anyio.run(main)
    record = anyio.run(until, "the card cancelled", lambda: logged(server, card["call_id"]))
    assert (record["decision"], record["ok"]) == ("cancelled", None)
    assert card["approval_id"] not in {a["approval_id"] for a in server.request("GET", "approvals")["approvals"]}
    assert not (project["root"] / "wiki" / "notes" / "mcp-gone.md").exists()


@pytest.mark.parametrize("command", ["rm -rf /", "squeue; reboot"])
def test_a_command_outside_the_allowlist_is_an_error_naming_the_refusal(server: JupyterServer, project: dict[str, Any],
                                                                        credential: str, command: str) -> None:
    async def main() -> CallToolResult:
        async with betty_mcp(project, "--mode", "auto", token=credential) as client:
            return await client.call_tool("cluster_run", {"command": command})

    result = anyio.run(main)
    assert result.is_error and "error: refused: " in text(result), text(result)
    assert "Traceback" not in text(result) and len(text(result).splitlines()) == 1


def test_a_wrong_credential_and_bad_arguments_are_one_line_each(server: JupyterServer, project: dict[str, Any],
                                                                credential: str) -> None:
    async def main() -> None:
        wrong = "betty-mcp-" + "x" * 43
        async with betty_mcp(project, token=wrong, BETTY_SERVER_URL=server.url) as client:
            with pytest.raises(MCPError) as refused:
                await client.list_tools()
            assert refused.value.message == REFUSED
            call = await client.call_tool("cluster_queue", {})
            assert call.is_error and text(call) == REFUSED
        async with betty_mcp(project, "--mode", "auto", token=credential) as client:
            bad = await client.call_tool("gpu_estimate", {"model": "Llama-3.1-8B"})
            assert bad.is_error and "method: is required" in text(bad)
            with pytest.raises(MCPError) as unknown:  # a tool that is not there: the protocol's error, not a result
                await client.call_tool("cluster_submitt", {})
            assert "did you mean cluster_submit" in unknown.value.message

    anyio.run(main)


def test_without_the_mcp_package_betty_mcp_says_what_to_install() -> None:
    code = "import sys; sys.modules['mcp'] = None; from betty_jupyter.cli import main; sys.exit(main(['mcp']))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "BETTY_SERVER_URL": "http://127.0.0.1:9", "BETTY_MCP_TOKEN": "x"})
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr == "betty: error: betty mcp needs the MCP package: pip install 'betty-jupyter[mcp]'\n"
