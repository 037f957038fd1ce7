"""The agent loop with the real `openai` client over real HTTP (a scripted model) and the real dev cluster."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from conftest import REPO, run_betty
from llm_server import ScriptedLLM, call, fail, malformed_args, respond, say, stall

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.loop import Limits
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import WikiStore

pytestmark = pytest.mark.cluster

TRAIN = """#!/bin/bash
#SBATCH --job-name=llama3-lora
#SBATCH --partition=gpu
#SBATCH --gres=gpu:h100:1
#SBATCH --time=00:10:00
#SBATCH --mem=1G
echo "step=1 loss=1.9"; sleep 2; echo "step=2 loss=1.2"
"""


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def config_for(llm: ScriptedLLM, ssh_profile, **limits: Any) -> BettyConfig:
    profile = {**ssh_profile.to_dict(), "name": "betty-dev"}
    return BettyConfig(clusters=[profile], llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01,
                                                "max_retries": 3, **limits})


class Person:
    """Answers approval requests as the test says, and remembers what it was shown."""

    def __init__(self, broker: ApprovalBroker, answer: str | None = "approved") -> None:
        self.broker, self.answer, self.shown = broker, answer, []

    def __call__(self, event: Any) -> None:
        if event.type == "approval_request":
            self.shown.append(event.payload)
            if self.answer is not None:
                asyncio.get_running_loop().call_soon(self.broker.respond, event.payload.approval_id, self.answer, "tester")


async def converse(workspace, config, prompt: str, mode: str = "confirm", answer: str | None = "approved"):
    broker = ApprovalBroker(timeout=60)
    session = await open_session(workspace, config, SessionSpec(mode=mode, broker=broker))
    person = Person(broker, answer)
    events: list[Any] = []
    session.stream.subscribe(events.append)
    session.stream.subscribe(person)
    try:
        reason = await session.ask(prompt)
    finally:
        await session.context.slurm.transport.close()
    return session, events, person, reason


async def ask_twice(workspace, config, first: str, second: str, mode: str = "confirm"):
    """Two questions in one session; (first reason, second reason, events)."""
    session = await open_session(workspace, config, SessionSpec(mode=mode))
    events: list[Any] = []
    session.stream.subscribe(events.append)
    try:
        return await session.ask(first), await session.ask(second), events
    finally:
        await session.context.slurm.transport.close()


def last_tool_message(request: dict[str, Any]) -> str:
    return [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]


def test_the_dogfood_journey(llm_for_journey, ssh_profile, workspace):
    """The whole journey, with the model's calls native or written as text in each form open models use."""
    llm, submitted = llm_for_journey
    session, events, person, reason = asyncio.run(converse(
        workspace, config_for(llm, ssh_profile), "help me fine-tune Llama 3 8B with LoRA on 500 examples"))
    assert reason == "finished", [e.type for e in events]
    job_id = submitted["job_id"]
    read_as_text = [e.payload.reason for e in events if e.type == "replanning"]
    assert read_as_text == ([] if llm.calls_as == "native" else
                            ["read the model's reply: 1 tool call written as text"] * (len(llm.requests) - 1))
    if llm.calls_as != "native":  # the model sees its calls as calls in its history, never as an answer
        assert all(m.get("tool_calls") and not m["content"] for m in session.messages[2:-1] if m["role"] == "assistant")
    assert "<tool_call>" not in json.dumps([e.payload.model_dump() for e in events if e.type.startswith("message")])
    kinds = [e.type for e in events if e.type not in ("message_delta", "budget", "replanning")]
    # the prompt, then the partitions read (tier 1: asked once in confirm mode)
    assert kinds[:5] == ["message", "tool_call", "approval_request", "approval_resolved", "tool_result"]
    calls = [e.payload.tool for e in events if e.type == "tool_call"]
    assert calls[:3] == ["cluster_partitions", "gpu_estimate", "cluster_submit"] and set(calls[3:]) == {"cluster_status"}
    submit_at = kinds.index("approval_request")
    assert kinds[submit_at - 1] == "tool_call" and kinds[submit_at + 1:submit_at + 3] == ["approval_resolved", "tool_result"]
    assert kinds[-2:] == ["message", "done"] and events[-1].payload.reason == "finished"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # tier 1 tools ask once per session, the tier 2 submission always
    assert [(p.tool, p.tier) for p in person.shown] == [("cluster_partitions", 1), ("cluster_submit", 2),
                                                       ("cluster_status", 1)]
    assert TRAIN.strip() in person.shown[1].preview.text
    tracked = Ledger(workspace.ledger_path).all()
    assert [t.experiment.job_id for t in tracked] == [job_id]  # exactly once
    page = WikiStore(workspace.wiki).read(tracked[0].experiment.page)
    assert page.frontmatter["status"] == "COMPLETED" and "**COMPLETED**" in page.text
    assert (workspace.root / tracked[0].experiment.notebook).exists()
    records = ActionLog(workspace.root).read(session_id=session.session_id)
    assert [r.tool for r in records] == calls
    submit = [r for r in records if r.tool == "cluster_submit"][0]
    assert submit.decision == "approved" and submit.approver == "tester" and submit.ok
    assert submit.preview is not None and TRAIN.strip() in submit.preview.text
    assert [r.decision for r in records if r.tool == "gpu_estimate"] == ["auto"]
    assert [r.decision for r in records if r.tool == "cluster_status"][1:] == ["auto"] * (calls.count("cluster_status") - 1)
    # each tool_result carries how its call was decided and by whom, as the action log has it
    results = [e.payload for e in events if e.type == "tool_result"]
    assert [(p.tool, p.decision, p.approver) for p in results] == [(r.tool, r.decision, r.approver) for r in records]
    assert ("cluster_submit", "approved", "tester") in [(p.tool, p.decision, p.approver) for p in results]


@pytest.fixture(params=["native", "tool_call", "python_tag", "fenced", "bare"])
def llm_for_journey(request):
    submitted: dict[str, str] = {}

    def after_submit(request: dict[str, Any]):
        found = re.search(r"job (\d+)", last_tool_message(request))
        assert found, last_tool_message(request)
        submitted["job_id"] = found.group(1)
        return call("cluster_status", {"job_id": found.group(1)})

    def poll(request: dict[str, Any]):
        if "COMPLETED" in last_tool_message(request):
            return say(f"Job {submitted['job_id']} finished; its page and notebook are up to date.")
        time.sleep(1)
        return call("cluster_status", {"job_id": submitted["job_id"]})

    steps = [
        call("cluster_partitions", {}),
        call("gpu_estimate", {"model": "llama-3-8b", "method": "lora", "batch_size": 4, "seq_len": 512, "gpu": "h100"}),
        call("cluster_submit", {"script": TRAIN, "goal": "LoRA on 500 examples", "name": "llama3-lora"}),
        respond(after_submit),
        *[respond(poll) for _ in range(40)],
    ]
    with ScriptedLLM(steps, calls_as=request.param) as llm:
        yield llm, submitted


def test_a_denied_approval_runs_nothing_and_ends_the_turn(ssh_profile, workspace):
    """The person's "no" ends the turn in code: the model is not asked what to try instead."""
    with ScriptedLLM([call("cluster_submit", {"script": TRAIN, "goal": "x"}), say("let me try another way")]) as llm:
        session, events, person, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "submit it",
                                                               answer="denied"))
        asked = len(llm.requests)
    assert reason == "denied" and len(person.shown) == 1 and asked == 1
    assert [e.payload.reason for e in events if e.type == "done"] == ["denied"]
    assert "did not approve this call (denied)" in session.messages[-1]["content"], "told with the next prompt"
    assert Ledger(workspace.ledger_path).all() == [] if workspace.ledger_path.exists() else True
    assert not [e for e in events if e.type == "tool_result"]


def test_a_disconnected_approver_means_denied(ssh_profile, workspace):
    async def scenario(llm):
        broker = ApprovalBroker(timeout=60)
        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(broker=broker))
        session.stream.subscribe(lambda e: e.type == "approval_request" and asyncio.get_running_loop().call_soon(
            broker.cancel_all, "the panel disconnected", session.session_id))
        events: list[Any] = []
        session.stream.subscribe(events.append)
        await session.ask("submit it")
        await session.context.slurm.transport.close()
        return events

    with ScriptedLLM([call("cluster_submit", {"script": TRAIN, "goal": "x"}), respond(lambda r: say("not run"))]) as llm:
        events = asyncio.run(scenario(llm))
        assert "did not approve this call (cancelled)" in last_tool_message(llm.requests[-1])
    resolved = [e.payload for e in events if e.type == "approval_resolved"]
    assert [r.decision for r in resolved] == ["cancelled"]


def test_auto_mode_still_asks_before_submitting(ssh_profile, workspace):
    steps = [call("cluster_queue", {}), call("cluster_submit", {"script": TRAIN, "goal": "x"}), respond(lambda r: say("ok"))]
    with ScriptedLLM(steps) as llm:
        _, events, person, _ = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "go", mode="auto",
                                                    answer="denied"))
    assert [p.tool for p in person.shown] == ["cluster_submit"]  # the queue read (tier 1) did not ask in auto
    assert [e.payload.tool for e in events if e.type == "tool_result"] == ["cluster_queue"]


def test_a_hostile_command_is_refused_before_the_transport_sees_it(ssh_profile, workspace):
    async def scenario(llm):
        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(mode="auto"))
        seen: list[Any] = []
        real = session.context.slurm.transport.run

        async def spy(argv, timeout=60.0, *, idempotent=True):
            seen.append(tuple(argv))
            return await real(argv, timeout, idempotent=idempotent)

        session.context.slurm.transport.run = spy  # type: ignore[method-assign]
        await session.ask("clean up")
        await session.context.slurm.transport.close()
        return seen

    with ScriptedLLM([call("cluster_run", {"command": "squeue; rm -rf ~"}), respond(lambda r: say("refused"))]) as llm:
        seen = asyncio.run(scenario(llm))
        told = last_tool_message(llm.requests[-1])
    assert seen == []
    assert "';' is a shell metacharacter" in told


def test_429_twice_then_success(ssh_profile, workspace):
    with ScriptedLLM([fail(429, times=2), say("hello")]) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "hi"))
        assert len(llm.requests) == 3
    assert reason == "finished"
    assert [e.type for e in events].count("replanning") == 2
    assert [e.payload.text for e in events if e.type == "message" and e.payload.role == "assistant"] == ["hello"]


def test_a_server_error_forever_ends_in_one_clean_error(ssh_profile, workspace):
    with ScriptedLLM([fail(500, times=None)]) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "hi"))
        assert len(llm.requests) == 4  # the first try and 3 retries
    errors = [e.payload for e in events if e.type == "error"]
    assert reason == "error" and len(errors) == 1 and errors[0].code == "model" and "500" in errors[0].message
    assert events[-1].type == "done" and events[-1].payload.reason == "error"


def test_the_iteration_breaker_trips_and_the_session_can_go_on(ssh_profile, workspace):
    steps = [call("scratchpad", {"action": "read"}) for _ in range(3)] + [say("back again")]
    with ScriptedLLM(steps) as llm:
        first, second, events = asyncio.run(ask_twice(
            workspace, config_for(llm, ssh_profile, max_iterations=3), "loop", "try again", mode="auto"))
    assert first == "breaker" and second == "finished"
    assert [e.payload.code for e in events if e.type == "error"] == ["iteration_limit"]


def test_malformed_arguments_go_back_to_the_model_which_recovers(ssh_profile, workspace):
    steps = [malformed_args("gpu_estimate", '{"model": "llama-3-8b", "method": '),
             call("gpu_estimate", {"model": "llama-3-8b", "method": "sideways"}),
             call("no_such_tool", {}),
             call("gpu_estimate", {"model": "llama-3-8b", "method": "inference"}),
             respond(lambda r: say("It needs about 16 GiB."))]
    with ScriptedLLM(steps) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "size it"))
        told = [last_tool_message(r) for r in llm.requests[1:]]
    assert reason == "finished"
    assert told[0].startswith("error:") and "json" in told[0].lower()
    assert told[1].startswith("error:") and "method" in told[1]
    assert told[2].startswith("error:") and "no_such_tool" in told[2]
    assert "GiB" in told[3] and not told[3].startswith("error:")


def test_propose_mode_shows_the_preview_and_runs_nothing(ssh_profile, workspace):
    with ScriptedLLM([call("cluster_submit", {"script": TRAIN, "goal": "x"}), respond(lambda r: say("proposed"))]) as llm:
        _, _, person, _ = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "go", mode="propose"))
        told = last_tool_message(llm.requests[-1])
    assert person.shown == [] and "proposed, not run" in told and "#SBATCH --job-name=llama3-lora" in told
    assert not workspace.ledger_path.exists() or Ledger(workspace.ledger_path).all() == []


def test_betty_ask_in_a_script_prints_one_event_per_line(ssh_profile, workspace, tmp_path):
    with ScriptedLLM([call("cluster_partitions", {}), say("There are two partitions.")]) as llm:
        config = tmp_path / "betty.json"
        profile = {**ssh_profile.to_dict(), "name": "betty-dev"}
        config.write_text(json.dumps({"BettyConfig": {"clusters": [profile],
                                                      "llm": {"base_url": llm.base_url, "model": "scripted"}}}))
        result = subprocess.run(
            [sys.executable, "-m", "betty_jupyter.cli", "ask",
             "which partitions?", "--json", "--approve", "tier1", "--dir", str(workspace.root)],
            capture_output=True, text=True, timeout=120, cwd=REPO,
            env={**os.environ, "BETTY_CONFIG": str(config)}, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events if e["type"] not in ("message_delta", "budget")] == [
        "message", "tool_call", "approval_request", "approval_resolved", "tool_result", "message", "done"]
    assert events[-1]["payload"]["reason"] == "finished"
    result = next(e["payload"] for e in events if e["type"] == "tool_result")
    assert (result["decision"], result["approver"]) == ("approved", f"{getpass.getuser()} (betty ask --approve tier1)")


def test_a_stalled_stream_is_cut_off_and_asked_again(ssh_profile, workspace):
    from llm_server import stall

    with ScriptedLLM([stall(5), say("after the stall")]) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile, timeout=1.0), "hi"))
    assert reason == "finished"
    assert [e.type for e in events].count("replanning") == 1
    assert [e.payload.text for e in events if e.type == "message" and e.payload.role == "assistant"] == ["after the stall"]


def test_a_long_history_is_summarised_and_the_scratchpad_stays_exact(ssh_profile, workspace):
    steps = [say("A" * 4000), say("second answer"), say("SUMMARY: the person trains Llama; job 4242 failed"),
             say("third answer")]
    with ScriptedLLM(steps) as llm:
        async def scenario():
            probe = await open_session(workspace, config_for(llm, ssh_profile))
            await probe.context.close()
            limits = Limits(history_chars=len(probe.messages[0]["content"]) + 3000, keep_recent=2)
            session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(limits=limits))
            await session.ask("first question")
            await session.ask("second question")
            session.context.scratchpad.parent.mkdir(parents=True, exist_ok=True)
            session.context.scratchpad.write_text("job 4242 at /scratch/alice/run7")
            await session.ask("third question")
            await session.context.slurm.transport.close()
            return session

        session = asyncio.run(scenario())
        summary_request, final_request = llm.requests[2], llm.requests[3]
    assert "first question" in json.dumps(summary_request["messages"]) and not summary_request.get("stream")
    note = session.messages[1]["content"]
    assert note.startswith("Summary of the earlier conversation:\nSUMMARY: the person trains Llama; job 4242 failed")
    assert "Pinned notes (exact, from the scratchpad):\njob 4242 at /scratch/alice/run7" in note
    sent = json.dumps(final_request["messages"])
    assert "A" * 4000 not in sent and "SUMMARY: the person trains Llama" in sent and "third question" in sent


def test_the_token_breaker_stops_a_session_cleanly(ssh_profile, workspace):
    with ScriptedLLM([say("a fairly long first answer " * 20), say("never sent")]) as llm:
        first, second, events = asyncio.run(ask_twice(workspace, config_for(llm, ssh_profile, max_tokens=50), "one", "two"))
        assert len(llm.requests) == 1
    assert (first, second) == ("finished", "breaker")
    assert [e.payload.code for e in events if e.type == "error"] == ["token_limit"]


def test_parallel_tool_calls_all_run_and_all_answers_go_back(ssh_profile, workspace):
    from llm_server import calls

    both = calls([("gpu_estimate", {"model": "llama-3-8b", "method": "inference"}),
                  ("scratchpad", {"action": "append", "text": "sized llama-3-8b"})])
    with ScriptedLLM([both, respond(lambda r: say("done"))]) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "size it and note it"))
        answers = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        asked = [c["id"] for c in llm.requests[-1]["messages"][-3]["tool_calls"]]
    assert reason == "finished"
    assert [a["tool_call_id"] for a in answers] == asked and len(asked) == 2
    assert "GiB" in answers[0]["content"] and not answers[1]["content"].startswith("error:")
    assert sorted(e.payload.tool for e in events if e.type == "tool_result") == ["gpu_estimate", "scratchpad"]


def test_betty_ask_on_a_terminal_asks_and_takes_the_answer(ssh_profile, workspace, tmp_path):
    import pty
    import select

    with ScriptedLLM([call("cluster_partitions", {}), say("Two partitions: cpu and gpu.")]) as llm:
        config = tmp_path / "betty.json"
        profile = {**ssh_profile.to_dict(), "name": "betty-dev"}
        config.write_text(json.dumps({"BettyConfig": {"clusters": [profile],
                                                      "llm": {"base_url": llm.base_url, "model": "scripted"}}}))
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            [sys.executable, "-m", "betty_jupyter.cli", "ask", "which partitions?", "--dir", str(workspace.root)],
            stdin=terminal, stdout=terminal, stderr=terminal, cwd=REPO,
            env={**os.environ, "BETTY_CONFIG": str(config)})
        os.close(terminal)
        screen = b""
        answered = False
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    screen += os.read(controller, 4096)
                except OSError:
                    break
            if not answered and b"Approve? [y]es / [s]ession / [N]o:" in screen:
                os.write(controller, b"y\n")
                answered = True
        process.wait(timeout=30)
        os.close(controller)
    text = screen.decode(errors="replace")
    assert process.returncode == 0, text
    assert "cluster_partitions (tier 1) needs your approval" in text and "Two partitions: cpu and gpu." in text
    assert "✓" in text


def test_a_kept_session_resumes_with_its_history_and_its_token_budget(ssh_profile, workspace):
    from betty_jupyter.agent.session import save

    with ScriptedLLM([say("the queue is quiet"), say("still quiet")]) as llm:
        config = config_for(llm, ssh_profile)

        async def scenario():
            first = await open_session(workspace, config, SessionSpec(session_id="s-resume-1"))
            await first.ask("how is the queue?")
            save(first, workspace)
            await first.context.slurm.transport.close()
            second = await open_session(workspace, config, SessionSpec(session_id="s-resume-1"))
            await second.ask("and now?")
            await second.context.slurm.transport.close()
            return first, second

        first, second = asyncio.run(scenario())
        resumed_request = json.dumps(llm.requests[1]["messages"])
    assert "how is the queue?" in resumed_request and "the queue is quiet" in resumed_request
    assert second.tokens > first.tokens > 0


def test_a_damaged_kept_session_is_one_clear_error(ssh_profile, workspace):
    from betty_jupyter.errors import UsageError

    kept = workspace.state / "sessions" / "s-broken.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("{not json")
    with ScriptedLLM([]) as llm, pytest.raises(UsageError, match="session s-broken cannot be resumed"):
        asyncio.run(open_session(workspace, config_for(llm, ssh_profile), SessionSpec(session_id="s-broken")))
    with ScriptedLLM([]) as llm, pytest.raises(UsageError, match="is not a session id"):
        asyncio.run(open_session(workspace, config_for(llm, ssh_profile), SessionSpec(session_id="../../etc")))


def test_a_gate_before_each_tool_call_can_hold_and_stop_a_run(ssh_profile, workspace):
    """What automations use to pause a run before its next tool call, and to kill it."""
    async def scenario(llm: ScriptedLLM) -> tuple[list[str], str, list[str]]:
        gate_log: list[str] = []
        opened = asyncio.Event()

        async def gate(tool: str) -> None:
            gate_log.append(tool)
            if len(gate_log) == 1:
                await opened.wait()  # paused: the first call waits here
            else:
                raise asyncio.CancelledError  # killed before the second call

        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(mode="auto", gate=gate))
        events: list[Any] = []
        session.stream.subscribe(events.append)
        task = asyncio.get_running_loop().create_task(session.ask("two reads"))
        await asyncio.sleep(0.5)
        held = [e.type for e in events if e.type == "tool_call"]
        opened.set()
        try:
            await task
            ended = "finished"
        except asyncio.CancelledError:
            ended = "killed"
        finally:
            await session.context.close()
        return held, ended, [e.payload.tool for e in events if e.type == "tool_call"]

    with ScriptedLLM([call("gpu_estimate", {"model": "Llama-3.1-8B", "method": "lora"}),
                      call("wiki_search", {"query": "gpu"}), say("done")]) as llm:
        held, ended, calls = asyncio.run(scenario(llm))
    assert held == [], "nothing is called while the gate holds"
    assert ended == "killed" and calls == ["gpu_estimate"], "the second call never started"


def test_the_wall_time_breaker_and_the_task_label_on_cards(ssh_profile, workspace):
    async def scenario(llm: ScriptedLLM) -> tuple[str, list[Any]]:
        broker = ApprovalBroker(timeout=60)
        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(
            broker=broker, task="babysit job 42", limits=Limits(max_seconds=0.5)))
        events: list[Any] = []
        session.stream.subscribe(events.append)
        session.stream.subscribe(Person(broker, "approved"))
        try:
            return await session.ask("go"), events
        finally:
            await session.context.close()

    page = {"page": "howto/night-shift.md", "mode": "create", "body": "notes",
            "frontmatter": {"name": "night-shift", "description": "what ran overnight", "type": "howto"}}
    estimate = call("gpu_estimate", {"model": "Llama-3.1-8B", "method": "lora"})
    with ScriptedLLM([call("wiki_write", page), stall(1.0, estimate), say("never")]) as llm:
        reason, events = asyncio.run(scenario(llm))
    cards = [e.payload for e in events if e.type == "approval_request"]
    assert [(c.tool, c.task) for c in cards] == [("wiki_write", "babysit job 42")]
    errors = [e.payload for e in events if e.type == "error"]
    assert reason == "breaker" and errors[-1].code == "time_limit" and "0.5 s of wall time" in errors[-1].message
