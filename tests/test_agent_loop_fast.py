"""The agent loop with no cluster at all: Betty's scripted transport under the real loop, policy, approvals
and action log, and the scripted model over real HTTP. The same journeys against the real cluster are in
``test_agent_loop.py``; these run in the fast tier (``pytest -m "not cluster"``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import run_betty
from llm_server import ScriptedLLM, call, say
from test_scripted_transport import ROW

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace

PAGE = {"page": "notes/plan.md", "mode": "create", "body": "the plan\n",
        "frontmatter": {"name": "Plan", "description": "a page the person refuses", "type": "note"}}


async def turn(workspace: Workspace, llm: ScriptedLLM, cluster: ScriptedTransport,
               answers: dict[str, str], *prompts: str) -> tuple[list[str], list[Any], str]:
    """A turn per prompt in one session, confirm mode; each card is answered by its tool's entry in ``answers``."""
    broker = ApprovalBroker(timeout=60)
    events: list[Any] = []

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            answer = answers[event.payload.tool]
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, answer, "tester")

    config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}],
                         llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
    session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(person,),
                                                                transport=cluster))
    reasons = [await session.ask(prompt) for prompt in prompts]
    return reasons, events, session.session_id


def test_a_turn_asks_runs_denies_and_records_each_call_by_its_decision(tmp_path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    cluster = ScriptedTransport().on("squeue", stdout=ROW + "\n").on("id", "-un", stdout="alice\n")
    with ScriptedLLM() as llm:
        llm.add(call("cluster_queue", {"states": ["RUNNING"]}), call("wiki_write", PAGE), say("One job runs."))
        reasons, events, session_id = asyncio.run(turn(
            workspace, llm, cluster, {"cluster_queue": "approved", "wiki_write": "denied"},
            "what runs, and write the plan down", "then just tell me"))
        asked = len(llm.requests)
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reasons == ["denied", "finished"] and asked == 3, "the denial ended the first turn"
    kinds = [e.type for e in events if e.type not in ("message_delta", "budget")]
    assert kinds == ["message", "tool_call", "approval_request", "approval_resolved", "tool_result",
                     "tool_call", "approval_request", "approval_resolved", "done", "message", "message", "done"]
    # The read ran once, through the policy's allowlist, with the filter as argv; nothing else touched Slurm.
    (squeue,) = cluster.ran("squeue")
    assert squeue[squeue.index("--states") + 1] == "RUNNING" and not cluster.ran("scancel") and not cluster.files
    result = next(e.payload for e in events if e.type == "tool_result")
    assert (result.tool, result.ok, result.decision, result.approver) == ("cluster_queue", True, "approved", "tester")
    assert "train <b>x</b>" in told[0] and "did not run" in told[1]
    assert not (workspace.wiki / "notes" / "plan.md").exists()
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.tier, r.decision, r.approver, r.ok) for r in records] == [
        ("cluster_queue", 1, "approved", "tester", True), ("wiki_write", 2, "denied", "tester", None)]


def test_an_edited_card_is_decided_again_by_the_rules_that_deny(tmp_path) -> None:
    """The person's edit moves the page into a folder the rules deny: the edited call is refused, nothing written,
    and the log keeps who approved which card."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    denied_page = {**PAGE, "page": "private/plan.md"}

    async def scenario() -> tuple[list[Any], str]:
        broker = ApprovalBroker(timeout=60)
        events: list[Any] = []

        def person(event: Any) -> None:
            events.append(event)
            if event.type == "approval_request":
                asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "edited", "tester",
                                                     denied_page)

        config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}],
                             rules={"deny": ["wiki_write(page=private/*)"]},
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
        session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(person,),
                                                                    transport=ScriptedTransport()))
        await session.ask("write the plan down")
        return events, session.session_id

    with ScriptedLLM() as llm:
        llm.add(call("wiki_write", PAGE), say("Written."))
        events, session_id = asyncio.run(scenario())
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    result = next(e.payload for e in events if e.type == "tool_result")
    assert not result.ok and "refused by Betty's policy" in result.summary, result.summary
    assert "refused by Betty's policy" in told[0]
    assert not (workspace.wiki / "private" / "plan.md").exists()
    assert not (workspace.wiki / "notes" / "plan.md").exists()
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.decision, r.approver, r.ok) for r in records] == [("wiki_write", "refused", "tester", False)]


def test_a_tool_only_the_person_calls_is_never_offered_to_the_model_and_refused_when_it_calls_it(tmp_path) -> None:
    """``node_kernel_stop`` cancels an allocation without a card of its own, so only the person's notebook calls it:
    the model is not shown it (not even by name among the tools it may ask for) and its call is refused."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    cluster = ScriptedTransport()
    with ScriptedLLM() as llm:
        llm.add(call("node_kernel_stop", {"kernel": "0" * 32, "job_id": "12"}), say("Stopped."))
        reasons, events, _ = asyncio.run(turn(workspace, llm, cluster, {}, "stop my node kernel"))
        offered = json.dumps(llm.requests[0]["tools"])
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "node_kernel_stop" not in offered and "more_tools" in offered
    result = next(e.payload for e in events if e.type == "tool_result")
    assert not result.ok and result.summary == "only the person calls node_kernel_stop (from the notebook)"
    assert "only the person calls node_kernel_stop" in told[0]
    assert not cluster.ran("scancel") and not [e for e in events if e.type == "approval_request"]
