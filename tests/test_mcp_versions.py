"""Betty's MCP faces on each release of the ``mcp`` package that people have beside it: the one this environment has
(2.x), and 1.30 — what jupyter-ai 3.2 pulls in (jupyter-server-mcp → FastMCP 3 → ``mcp<2``) — installed in an overlay
placed first on ``PYTHONPATH`` (tests/mcp_releases.py, kept between runs). On each, a real Jupyter server with Betty
answers real MCP clients over streamable HTTP and through ``betty mcp`` over stdio: the tools carry MCP's
annotations and a description for every argument, Betty's chat-only tools are not offered, a tool that is not there
is a JSON-RPC error, and a tier-2 call waits for a person while the client hears why. A release Betty does not
support is one line on stdio and the documented 501 over HTTP. And a JupyterLab with jupyter-ai 3 and
jupyter-collaboration installed beside Betty starts with all three, and Betty's routes and MCP answer there."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from jupyter_server_proc import JupyterServer
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_releases import environment, overlay
from mcp_support import CLIENT, api, text, until
from mcp_types import CallToolResult
from notebook_support import SCRIPT, llm, new_project  # noqa: F401 (fixtures)
from panel_support import open_the_panel, page, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page
from test_server_support import scancel

pytestmark = pytest.mark.cluster

JUPYTER_AI = "mcp==1.30.0"
"""The mcp release jupyter-ai 3.2 resolves to today (the newest 1.x): the one checked beside the installed one."""
RELEASES = ["installed", JUPYTER_AI]
UNSUPPORTED = "mcp==1.0.0"
CHAT_ONLY = {"scratchpad", "propose_plan", "delegate_tasks", "cell_run", "cell_run_status", "notebook_read",
             "notebook_edit", "notebook_run_cell", "node_kernel", "node_kernel_status", "node_kernel_stop"}
CLIENT_V1 = Path(__file__).with_name("mcp_client_v1.py")


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: Any) -> dict[str, Any]:
    """A project with the dev cluster, and a Jupyter configuration directory of its own for the MCP credentials."""
    made = new_project(tmp_path_factory.mktemp("mcp-versions"), dev_cluster, llm)
    made["env"]["JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("mcp-versions-config"))
    return made


@pytest.fixture(scope="module", params=RELEASES)
def release(request: pytest.FixtureRequest, project: dict[str, Any]) -> dict[str, str]:
    """The environment a release runs in: this one, or this one under the release's overlay."""
    env = dict(project["env"]) if request.param == "installed" else environment(overlay([request.param]),
                                                                                    project["env"])
    found = subprocess.run([sys.executable, "-c", "from betty_jupyter.mcp_package import installed; print(installed())"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert found.stdout.strip() == (importlib.metadata.version("mcp") if request.param == "installed"
                                    else request.param.split("==")[1]), found
    return env


@pytest.fixture(scope="module")
def server(project: dict[str, Any], release: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    running = JupyterServer(project["root"], release, tmp_path_factory.mktemp("runtime"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def credential(server: JupyterServer) -> tuple[str, str]:
    """A credential of its own for this server's client: its name and the token."""
    name = f"client-{server.port}"
    return name, str(server.request("POST", "mcp/credentials", {"name": name})["token"])


def over_http(server: JupyterServer, http: httpx2.AsyncClient, mode: str = "legacy") -> Client:
    return Client(streamable_http_client(f"{server.url}betty/mcp?mode=auto", http_client=http), client_info=CLIENT,
                  mode=mode)


def betty_mcp(env: dict[str, str], token: str) -> Client:
    """The client spawning ``betty mcp`` in ``env`` (the release's) with the credential."""
    command = StdioServerParameters(command=sys.executable, args=["-m", "betty_jupyter.cli", "mcp", "--mode", "auto"],
                                    env={**env, "BETTY_MCP_TOKEN": token})
    return Client(command, client_info=CLIENT, mode="legacy")


def check_tools(tools: dict[str, Any]) -> None:
    """What a host needs of every tool: a title, annotations from Betty's tiers, a description for each argument;
    and none of Betty's chat-only tools."""
    assert {"cluster_queue", "cluster_submit", "cluster_cancel", "gpu_estimate", "wiki_read"} <= set(tools)
    assert not CHAT_ONLY & set(tools), CHAT_ONLY & set(tools)
    for name, tool in tools.items():
        hints = tool["annotations"]
        assert tool.get("title") and hints["title"] == tool["title"], name
        assert set(hints) >= {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}, name
        assert hints["readOnlyHint"] == ("tier 2" not in tool["description"] and name != "notebook_collect"), name
    assert tools["gpu_estimate"]["annotations"]["openWorldHint"] is False
    assert tools["cluster_queue"]["annotations"]["openWorldHint"] is True
    assert (tools["cluster_submit"]["annotations"]["destructiveHint"], tools["cluster_cancel"]["annotations"][
        "destructiveHint"]) == (False, True)


def wire(tools: list[Any]) -> dict[str, Any]:
    return {tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools}


def test_over_http_the_tools_are_annotated_and_an_unknown_one_is_a_protocol_error(server: JupyterServer,
                                                                                 credential: tuple[str, str]) -> None:
    async def main() -> None:
        headers = {"Authorization": f"Bearer {credential[1]}"}
        for mode in ("legacy", "auto"):
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
                    over_http(server, http, mode) as client:
                check_tools(wire((await client.list_tools()).tools))
                read = await client.call_tool("cluster_partitions", {})
                assert not read.is_error and "gpu" in text(read), text(read)
                for name, said in (("cluster_submitt", "did you mean cluster_submit"), ("scratchpad", "no tool")):
                    with pytest.raises(MCPError) as unknown:
                        await client.call_tool(name, {})
                    assert said in unknown.value.message and unknown.value.code == -32602, unknown.value.message

    anyio.run(main)


def test_over_stdio_a_submission_waits_for_a_person_and_its_answer_says_each_thing_once(
        server: JupyterServer, release: dict[str, str], credential: tuple[str, str],
        dev_cluster: dict[str, str]) -> None:
    name, token = credential
    progress: list[str] = []

    async def heard(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> str:
        async with betty_mcp(release, token) as client:
            check_tools(wire((await client.list_tools()).tools))
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("propose_plan", {})
            assert "there is no tool 'propose_plan'" in unknown.value.message
            answers: list[CallToolResult] = []
            async with anyio.create_task_group() as tasks:
                async def submit() -> None:
                    script = SCRIPT.format(name=f"mcp-release-{server.port}", seconds=300)
                    answers.append(await client.call_tool("cluster_submit", {"script": script, "goal": "check a release"},
                                                          progress_callback=heard))

                tasks.start_soon(submit)

                async def open_card() -> dict[str, Any] | None:
                    assert not answers, f"answered before a card: {text(answers[0])}"
                    return next((a for a in (await api(server, "GET", "approvals"))["approvals"]
                                 if a["tool"] == "cluster_submit" and a["task"].endswith(f"(mcp:{name})")), None)

                card = await until("the card", open_card)

                async def told() -> bool:
                    return any(f"card {card['approval_id']}" in message for message in progress)

                await until("the client told it waits for a person", told)
                await api(server, "POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
        said = text(answers[0])
        assert not answers[0].is_error, said
        lines = said.splitlines()
        assert len(lines) == len(set(lines)), f"a line said twice: {said}"
        return re.search(r"submitted job (\d+)", said).group(1)

    scancel(dev_cluster, anyio.run(main))


@pytest.mark.parametrize("release", [JUPYTER_AI], indirect=True)  # the installed one is the other tests' client
def test_a_client_made_with_the_release_s_own_library_works_over_both_transports(
        server: JupyterServer, release: dict[str, str], credential: tuple[str, str]) -> None:
    assert "mcp==" in release.get("PYTHONPATH", ""), "the release's overlay is first on the path"
    calls = json.dumps([["cluster_partitions", {}], ["cluster_submitt", {}]])
    env = {**release, "BETTY_MCP_TOKEN": credential[1]}
    for how in (["--url", f"{server.url}betty/mcp?mode=auto"], ["--stdio", "--", "--mode", "auto"]):
        ran = subprocess.run([sys.executable, str(CLIENT_V1), "--calls", calls, *how], env=env, capture_output=True,
                             text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr[-3000:]
        heard = json.loads(ran.stdout)
        assert heard["mcp"].startswith(release["PYTHONPATH"].split(os.pathsep)[0]), heard["mcp"]
        check_tools({tool["name"]: tool for tool in heard["tools"]})
        assert not heard["calls"][0]["error"] and "gpu" in heard["calls"][0]["text"], heard["calls"][0]
        assert "did you mean cluster_submit" in heard["calls"][1]["protocol_error"], heard["calls"][1]


def test_an_unsupported_mcp_release_is_one_line_on_stdio_and_501_over_http(
        project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    env = environment(overlay([UNSUPPORTED]), project["env"])
    said = ("needs mcp >=1.24,<3, and this environment has mcp 1.0.0: pip install 'betty-jupyter[mcp]' "
            "(or pip install 'mcp>=1.24,<3')")
    stdio = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "mcp"], capture_output=True, text=True,
                           timeout=120, env={**env, "BETTY_MCP_TOKEN": "betty-mcp-" + "x" * 43,
                                             "BETTY_SERVER_URL": "http://127.0.0.1:9/"}, stdin=subprocess.DEVNULL)
    assert (stdio.returncode, stdio.stdout, stdio.stderr) == (1, "", f"betty: error: betty mcp {said}\n")
    server = JupyterServer(project["root"], env, tmp_path_factory.mktemp("runtime"))
    try:
        token = server.request("POST", "mcp/credentials", {"name": f"old-{server.port}"})["token"]
        request = urllib.request.Request(f"{server.url}betty/mcp", method="POST",
                                         data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json",
                                                  "Accept": "application/json, text/event-stream"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 501
        assert json.loads(refused.value.read()) == {
            "error": f"Betty's MCP endpoint {said} in the Jupyter server's environment, then restart Jupyter"}
        refused.value.close()
    finally:
        server.stop()


JUPYTER_AI_BESIDE = ["jupyter-ai==3.2.0", "jupyter-collaboration"]
"""jupyter-ai 3 (its MCP stack on mcp 1.x) and real-time collaboration, as a researcher's JupyterLab has them."""
SERVER_EXTENSIONS = ("betty_jupyter", "jupyter_ai_router", "jupyter_ai_persona_manager", "jupyter_server_mcp",
                     "jupyterlab_chat", "jupyter_server_ydoc")
LAB_EXTENSIONS = ("betty-jupyter", "@jupyter-ai/persona-manager", "@jupyter-ai/router",
                  "@jupyter/collaboration-extension", "@jupyter/docprovider-extension")


def test_a_jupyterlab_with_jupyter_ai_and_collaboration_runs_betty_and_its_mcp_beside_them(
        project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, page: Page) -> None:
    site = overlay(JUPYTER_AI_BESIDE)
    config = tmp_path_factory.mktemp("jupyter-ai-config")
    # jupyter-ai's own MCP server listens on 3001 unless told otherwise: a free port, as several servers may run
    (config / "jupyter_server_config.json").write_text(json.dumps({"MCPExtensionApp": {"mcp_port": 0},
                                                                   "LabApp": {"expose_app_in_browser": True}}))
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = environment(site, project["env"])
    env.update(JUPYTER_CONFIG_PATH=os.pathsep.join([str(config), str(site / "etc" / "jupyter")]),
               JUPYTER_PATH=os.pathsep.join(p for p in (str(site / "share" / "jupyter"), env.get("JUPYTER_PATH", ""))
                                            if p),
               JUPYTER_DATA_DIR=str(tmp_path_factory.mktemp("jupyter-ai-data")), JUPYTER_CONFIG_DIR=str(config))
    lab = JupyterServer(project["root"], env, tmp_path_factory.mktemp("runtime"), app="jupyterlab")
    try:
        log = Path(lab.log.name).read_text()
        for extension in SERVER_EXTENSIONS:
            assert f"{extension} | extension was successfully loaded" in log, f"{extension} not loaded:\n{log[-3000:]}"
        html = urllib.request.urlopen(urllib.request.Request(f"{lab.url}lab", headers={
            "Authorization": f"token {lab.token}"}), timeout=60).read().decode()
        data = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html,
                                    re.S).group(1))
        federated = {extension["name"] for extension in data["federated_extensions"]}
        assert set(LAB_EXTENSIONS) <= federated, set(LAB_EXTENSIONS) - federated
        failed: list[str] = []
        page.on("console", lambda message: failed.append(message.text) if "failed to activate" in message.text
                else None)
        with screenshot_on_failure(page, "beside-jupyter-ai", prefix="mcp"):
            open_the_panel(page, lab)  # Betty's panel opens and connects in that JupyterLab
            activated = page.evaluate("""prefixes => prefixes.map(prefix => window.jupyterapp.listPlugins()
                .filter(id => id.startsWith(prefix) && window.jupyterapp.isPluginActivated(id)).length)""",
                                      ["betty-jupyter", "@jupyter-ai/", "@jupyter/collaboration-extension",
                                       "jupyterlab-chat-extension"])
        assert all(activated), activated
        assert not failed, failed
        assert lab.request("GET", "approvals") == {"approvals": []}  # Betty's own routes answer
        token = lab.request("POST", "mcp/credentials", {"name": "jupyter-ai"})["token"]
        calls = json.dumps([["cluster_partitions", {}], ["wiki_search", {"query": "partition"}], ["scratchpad", {}]])
        for how in (["--url", f"{lab.url}betty/mcp?mode=auto"], ["--stdio", "--", "--mode", "auto"]):
            ran = subprocess.run([sys.executable, str(CLIENT_V1), "--calls", calls, *how], capture_output=True,
                                 text=True, env={**env, "BETTY_MCP_TOKEN": token}, timeout=300)
            assert ran.returncode == 0, ran.stderr[-3000:]
            heard = json.loads(ran.stdout)
            assert heard["mcp"].startswith(str(site)), heard["mcp"]  # the mcp 1.x jupyter-ai brought
            check_tools({tool["name"]: tool for tool in heard["tools"]})
            read, search, chat_only = heard["calls"]
            assert not read["error"] and "gpu" in read["text"], read
            assert not search["error"], search
            assert "there is no tool 'scratchpad'" in chat_only["protocol_error"], chat_only
    finally:
        lab.stop()
