"""Tools from another package: registered in the ``betty_jupyter.tools`` entry-point group, found on ``sys.path``
(``tests/plugins/*``: a package and its ``*.dist-info``, never installed), offered to the scripted model over HTTP,
called, and decided by the same tiers, cards and action log as Betty's own; on MCP too. A broken entry or a name
Betty already has is skipped with one logged line and never stops Betty."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, say
from test_scripted_transport import ROW

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.registry import BETTY_ENTRY, TOOLS_GROUP, default_registry, discovered_tools, registry_of
from betty_jupyter.agent.tools import ToolError
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.tools.catalog import BETTY_TOOLS
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace

PLUGINS = Path(__file__).parent / "plugins"
REPO = Path(__file__).parent.parent


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's package (``betty_lab_quota``: ``lab_quota`` tier 0, ``lab_archive`` tier 2) on ``sys.path``."""
    monkeypatch.syspath_prepend(str(PLUGINS / "lab"))


@pytest.fixture
def project(tmp_path: Path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    (workspace.root / "lab-quota.tsv").write_text("chem\t10\t100\nphysics\t120\t500\n")
    return workspace


def test_betty_s_own_tools_are_the_one_entry_its_pyproject_registers_in_their_order() -> None:
    entries = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][TOOLS_GROUP]
    assert entries == {"betty": BETTY_ENTRY}
    assert discovered_tools() == BETTY_TOOLS, "with no other package, the tools are Betty's, in its table's order"
    assert default_registry().names()[:3] == ["cluster_run", "cluster_queue", "cluster_partitions"]


def test_betty_s_table_names_each_tool_as_its_class_does_and_one_tool_loads_alone() -> None:
    from betty_jupyter.agent.tools.catalog import TOOL_CLASSES

    assert [tool.name for tool in BETTY_TOOLS] == list(TOOL_CLASSES)
    code = ("import sys\nfrom betty_jupyter.agent.registry import registry_of, tool_class\n"
            "print(registry_of(['cluster_queue']).names(), tool_class('cluster_queue').__name__)\n"
            "print(sorted(m for m in sys.modules if m.startswith('betty_jupyter.agent.tools.')))")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert ran.returncode == 0, ran.stderr
    names, modules = ran.stdout.splitlines()
    assert names == "['cluster_queue'] ClusterQueue"
    assert "betty_jupyter.agent.tools.cluster" in modules and "betty_jupyter.agent.tools.advise" not in modules
    assert "betty_jupyter.agent.tools.jobs" not in modules


def test_a_lab_package_adds_its_tools_after_betty_s(lab: None) -> None:
    names = default_registry().names()
    assert names[:len(BETTY_TOOLS)] == [tool.name for tool in BETTY_TOOLS]
    assert names[len(BETTY_TOOLS):] == ["lab_quota", "lab_archive"]
    assert registry_of(["lab_archive", "cluster_queue"]).names() == ["lab_archive", "cluster_queue"]
    with pytest.raises(ToolError, match="there is no tool 'lab_quotas'; did you mean lab_quota"):
        registry_of(["lab_quotas"])


def test_a_broken_entry_and_a_name_betty_has_are_skipped_with_one_line_each(
        lab: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS / "broken"))
    with caplog.at_level(logging.WARNING, logger="betty_jupyter.agent.registry"):
        registry = default_registry()
    assert registry.names()[len(BETTY_TOOLS):] == ["lab_quota", "lab_archive"], "the lab's tools are still there"
    assert "Run any command at all." not in registry.get("cluster_run").description, "Betty's own is kept"
    lines = [record.getMessage() for record in caplog.records]  # in the order of the entries' names
    assert len(lines) == 4 and all("\n" not in line for line in lines), lines
    clash, fussy, gone, odd = lines
    assert clash.startswith("betty: tool 'cluster_run' of entry point clash is refused: Betty already has a tool "
                            "of that name"), clash
    assert fussy == ("betty: tool 'lab_fussy' of entry point fussy is skipped: it cannot be made: RuntimeError: "
                     "no lab configuration second line"), fussy
    assert gone.startswith("betty: tool entry point gone = betty_lab_missing:TOOLS is skipped: "
                           "ModuleNotFoundError"), gone
    assert odd == ("betty: tool 'cluster_status' of entry point odd is skipped: cluster_status is not a subclass "
                   "of betty_jupyter.agent.tools.base.Tool"), odd


async def _turn(workspace: Workspace, llm: ScriptedLLM, answers: dict[str, str],
                events: list[Any]) -> tuple[str, str]:
    broker = ApprovalBroker(timeout=60)

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id,
                                                 answers[event.payload.tool], "tester")

    config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}],
                         llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
    cluster = ScriptedTransport().on("squeue", stdout=ROW + "\n").on("id", "-un", stdout="alice\n")
    session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(person,),
                                                                transport=cluster))
    return await session.ask("how full is our storage? then archive run7"), session.session_id


def test_the_model_is_offered_a_lab_s_tools_and_they_run_under_betty_s_tiers(lab: None, project: Workspace) -> None:
    events: list[Any] = []
    with ScriptedLLM() as llm:
        llm.add(call("more_tools", {"tools": ["lab_quota", "lab_archive"]}),
                call("lab_quota", {"group": "physics"}),
                call("lab_archive", {"dataset": "run7"}),
                say("physics uses 120 of 500 GiB; run7 is archived."))
        reason, session_id = asyncio.run(_turn(project, llm, {"lab_archive": "approved"}, events))
        offered = [[tool["function"]["name"] for tool in request["tools"]] for request in llm.requests]
        first_more = next(tool for tool in llm.requests[0]["tools"] if tool["function"]["name"] == "more_tools")
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        described = {tool["function"]["name"]: tool["function"]["description"] for tool in llm.requests[1]["tools"]}
    assert reason == "finished"
    more = first_more["function"]["parameters"]["properties"]["tools"]["items"]["enum"]
    assert {"lab_quota", "lab_archive"} <= set(more), "the first request offers them through more_tools"
    assert "lab_quota" not in offered[0] and {"lab_quota", "lab_archive"} <= set(offered[1])
    assert described["lab_archive"].endswith("Always asks the person first."), described["lab_archive"]
    assert "physics uses 120 of its 500 GiB" in told[1]
    # Tier 0 ran without a card; tier 2 waited for the person's answer, exactly as for Betty's own tools.
    cards = [event.payload for event in events if event.type == "approval_request"]
    assert [(card.tool, card.tier, card.preview.text) for card in cards] == [
        ("lab_archive", 2, "move run7 to the lab archive")]
    assert (project.root / "lab-archive.log").read_text() == "run7\n"
    records = ActionLog(project.root).read(session_id=session_id)
    assert [(r.tool, r.tier, r.decision, r.approver, r.ok) for r in records] == [
        ("lab_quota", 0, "auto", None, True), ("lab_archive", 2, "approved", "tester", True)]


def test_a_denied_card_of_a_lab_s_tool_runs_nothing(lab: None, project: Workspace) -> None:
    events: list[Any] = []
    with ScriptedLLM() as llm:
        llm.add(call("lab_archive", {"dataset": "run7"}), say("not archived"))
        reason, session_id = asyncio.run(_turn(project, llm, {"lab_archive": "denied"}, events))
    assert reason == "denied" and not (project.root / "lab-archive.log").exists()
    records = ActionLog(project.root).read(session_id=session_id)
    assert [(r.tool, r.tier, r.decision, r.ok) for r in records] == [("lab_archive", 2, "denied", None)]


def test_mcp_lists_a_lab_s_tools_with_their_tiers_and_calls_them_through_the_policy(lab: None, project: Workspace,
                                                                                    tmp_path: Path) -> None:
    """The MCP face (an in-process client of Betty's MCP server, on the server's own services) lists a session's
    tools: the lab's are among them, each with the tier it declares, and a call of one is decided and logged as the
    client's. No cluster is reached: its commands are not even found (``PATH`` is an empty folder)."""
    from mcp import Client

    from betty_jupyter.mcp_server import BettyFace, SessionOptions, mcp_server
    from betty_jupyter.server.mcp_http import ServerBetty
    from betty_jupyter.server.services import BettyServices

    nothing = tmp_path / "no-programs"
    nothing.mkdir()
    config = BettyConfig(clusters=[{"name": "nowhere", "transport": "local", "env": {"PATH": str(nothing)}}])

    async def main() -> tuple[dict[str, str], str]:
        services = BettyServices(project, config)
        try:
            face = BettyFace(ServerBetty(services), lambda ctx: SessionOptions(caller="mcp:lab"))
            async with Client(mcp_server(face)) as client:
                listed = {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}
                answer = await client.call_tool("lab_quota", {"group": "physics"})
                return listed, " ".join(getattr(part, "text", "") for part in answer.content)
        finally:
            await services.close()

    tools, told = asyncio.run(main())
    assert list(tools)[-2:] == ["lab_quota", "lab_archive"] and "cluster_run" in tools
    assert tools["lab_quota"].endswith("Betty runs it (tier 0).")
    assert tools["lab_archive"].endswith("every call waits until a person approves its exact preview in Betty.")
    assert "physics uses 120 of its 500 GiB" in told, told
    (record,) = ActionLog(project.root).read()
    assert (record.tool, record.tier, record.decision, record.ok) == ("lab_quota", 0, "auto", True)
    assert str(record.task).endswith("(mcp:lab)"), "logged as the MCP client's call, as for Betty's own tools"
