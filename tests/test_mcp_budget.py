"""An MCP client's answer about a 20,000-job queue holds to the one budget (``agent/budget.py``) over both transports:
the ``mcp`` package's own client, over streamable HTTP on ``/betty/mcp`` and over stdio through ``betty mcp``, in a real
Jupyter server whose cluster is Betty's scripted one: its ``squeue`` answers as :class:`ScriptedTransport` does (Slurm's
format, with the delimiter Betty asked for). No Slurm is needed."""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx2
import pytest
from jupyter_server_proc import JupyterServer
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_support import CLIENT, text
from test_condense import queue_text

from betty_jupyter.agent.budget import ANSWER_CHARS
from conftest import run_betty

JOBS = 20_000
ME = getpass.getuser()
SCRIPTED_SQUEUE = """#!{python}
import asyncio, sys
from betty_jupyter.cluster.scripted import ScriptedTransport
with open({queue!r}) as written:
    cluster = ScriptedTransport().on("squeue", stdout=written.read())
answer = asyncio.run(cluster.run(["squeue", *sys.argv[1:]]))
sys.stdout.write(answer.stdout)
sys.stderr.write(answer.stderr)
sys.exit(answer.exit_code)
"""


@pytest.fixture(scope="module")
def scripted_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, dict[str, str]]]:
    """A Jupyter server with Betty, its one cluster local with the scripted programs first on PATH."""
    base = tmp_path_factory.mktemp("mcp-budget")
    queue = base / "squeue.txt"
    queue.write_text(queue_text(JOBS, set(range(0, JOBS, 2))).replace("| alice |", f"| {ME} |").replace(
        "\x1falice\x1f", f"\x1f{ME}\x1f"))
    programs = base / "bin"
    programs.mkdir()
    (programs / "squeue").write_text(SCRIPTED_SQUEUE.format(python=sys.executable, queue=str(queue)))
    (programs / "squeue").chmod(0o755)
    root = base / "project"
    assert run_betty("init", str(root)).returncode == 0
    config = root / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{"name": "scripted", "transport": "local"}]}}))
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "BETTY_CONFIG": str(config), "PATH": f"{programs}:{os.environ['PATH']}",
           "JUPYTER_CONFIG_DIR": str(base / "jupyter-config"),
           "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    running = JupyterServer(root, env, tmp_path_factory.mktemp("runtime"))
    try:
        yield running, env
    finally:
        running.stop()


def bounded(answer: str) -> None:
    """The budget's promises, read off an answer."""
    assert len(answer.encode()) <= ANSWER_CHARS * 4 and len(answer) <= ANSWER_CHARS, len(answer)
    assert answer.startswith(f"{JOBS} job(s): ") and f"all {JOBS // 2} jobs of {ME}:" in answer
    assert answer.count(f"| {ME} |") == 40
    assert answer.endswith(f"[rows 1–40 of {JOBS} shown; call again with offset=40 for the next ones, or narrow "
                           "with states, partition or user]")


def test_an_mcp_client_gets_a_page_of_a_20000_job_queue_over_both_transports(
        scripted_server: tuple[JupyterServer, dict[str, str]]) -> None:
    server, env = scripted_server
    made: dict[str, Any] = server.request("POST", "mcp/credentials", {"name": "budget"})
    token = str(made["token"])

    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, Client(
                streamable_http_client(f"{server.url}betty/mcp?mode=auto", http_client=http),
                client_info=CLIENT) as client:
            over_http = await client.call_tool("cluster_queue", {})
            assert not over_http.is_error, text(over_http)
            bounded(text(over_http))
            second = await client.call_tool("cluster_queue", {"offset": 40})
            assert "[rows 41–80 of 20000 shown; call again with offset=80" in text(second)
        stdio = StdioServerParameters(command=sys.executable, args=["-m", "betty_jupyter.cli", "mcp", "--mode", "auto"],
                                      env={**env, "BETTY_MCP_TOKEN": token})
        async with Client(stdio, client_info=CLIENT) as client:
            over_stdio = await client.call_tool("cluster_queue", {})
            assert not over_stdio.is_error, text(over_stdio)
            bounded(text(over_stdio))

    anyio.run(main)
