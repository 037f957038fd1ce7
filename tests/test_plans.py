"""Plans on the real dev cluster: the scripted model over real HTTP proposes read, estimate, submit and status;
one card answers the plan per step, and the submission that reaches Slurm is exactly the approved one."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from conftest import REPO, run_betty
from llm_server import ScriptedLLM, call, respond, say

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import ToolError
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace

pytestmark = pytest.mark.cluster

TRAIN = """#!/bin/bash
#SBATCH --job-name=plan-lora
#SBATCH --partition=gpu
#SBATCH --gres=gpu:h100:1
#SBATCH --time=00:10:00
#SBATCH --mem=1G
echo "step=1 loss=1.9"
"""
EDITED = TRAIN.replace("--time=00:10:00", "--time=00:05:00")
UNKNOWN_YET = "99999999"
"""The model cannot know the job id when it plans: a number above Slurm's largest job id stands in for it."""
ESTIMATE = {"model": "Llama-3.1-8B", "method": "lora", "batch_size": 4, "seq_len": 512, "gpu": "h100"}


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def plan_call(steps: list[tuple[str, dict[str, Any], list[int]]]) -> Any:
    return call("propose_plan", {"goal": "fine-tune Llama 3.1 8B with LoRA", "steps": [
        {"tool": tool, "args": args, "depends_on": needs} for tool, args, needs in steps]})


def test_a_four_step_plan_runs_the_edited_submission_exactly_and_a_changed_call_asks_again(
        ssh_profile, workspace, tmp_path) -> None:
    config_file = tmp_path / "train.yaml"
    config_file.write_text("lr: 1e-4\n")
    read = {"command": f"cat {config_file}"}
    submit = {"script": TRAIN, "goal": "LoRA on 500 examples", "name": "plan-lora"}
    edited = {**submit, "script": EDITED}
    submitted: dict[str, str] = {}

    def status_of_the_real_job(request: dict[str, Any]) -> Any:
        told = [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]
        submitted["job_id"] = told.split("job ", 1)[1].split()[0].strip(".,;:")
        return call("cluster_status", {"job_id": submitted["job_id"]})

    broker = ApprovalBroker(timeout=120)
    shown: list[Any] = []
    events: list[Any] = []
    answers: set[asyncio.Task[Any]] = set()

    async def person(session: Any, request: Any) -> None:
        shown.append(request)
        if request.tool != "propose_plan":
            broker.respond(request.approval_id, "approved", "tester")
            return
        wrong = {"steps": [{"decision": "approved"}, {"decision": "approved"},
                           {"decision": "edited", "args": {**submit, "script": TRAIN.replace("=gpu", "=no-such")}},
                           {"decision": "approved"}]}
        with pytest.raises(ToolError) as refused:
            await session.repreview(request.tool, request.args, wrong)
        assert "step 3 (cluster_submit): the edited call is refused" in str(refused.value)
        assert "no-such" in str(refused.value) and "\n" not in str(refused.value)
        right = {"steps": [{"decision": "approved"}, {"decision": "approved"},
                           {"decision": "edited", "args": edited}, {"decision": "approved"}]}
        assert "--time=00:05:00" in (await session.repreview(request.tool, request.args, right)).text
        broker.respond(request.approval_id, "edited", "tester", right)

    async def converse(llm: ScriptedLLM) -> tuple[str, str]:
        config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01})
        session = await open_session(workspace, config, SessionSpec(broker=broker))

        def listen(event: Any) -> None:
            events.append(event)
            if event.type == "approval_request":
                answers.add(asyncio.get_running_loop().create_task(person(session, event.payload)))

        session.stream.subscribe(listen)
        try:
            reason = await session.ask("fine-tune it")
        finally:
            await session.context.slurm.transport.close()
        for task in answers:
            await task
        return reason, session.session_id

    with ScriptedLLM([
        plan_call([("cluster_run", read, []), ("gpu_estimate", ESTIMATE, []), ("cluster_submit", submit, [1, 2]),
                   ("cluster_status", {"job_id": UNKNOWN_YET}, [3])]),
        call("cluster_run", read), call("gpu_estimate", ESTIMATE), call("cluster_submit", edited),
        respond(status_of_the_real_job), say("Submitted; it is in the queue."),
    ]) as llm:
        reason, session_id = asyncio.run(converse(llm))
    assert reason == "finished", [(e.type, e.payload) for e in events if e.type in ("error", "tool_result")]
    # One card for the plan; the status call carries the real job id, not the planned one, so it asked again.
    assert [(r.tool, r.tier) for r in shown] == [("propose_plan", 2), ("cluster_status", 1)]
    assert shown[1].args == {"job_id": submitted["job_id"]}
    (plan,) = [e.payload for e in events if e.type == "plan"]
    assert [(s.tool, s.tier, s.depends_on) for s in plan.calls] == [
        ("cluster_run", 1, []), ("gpu_estimate", 0, []), ("cluster_submit", 2, [1, 2]), ("cluster_status", 1, [3])]
    assert TRAIN.strip() in plan.calls[2].preview.text and str(config_file) in plan.calls[0].preview.text
    steps = [(e.payload.index, e.payload.status) for e in events if e.type == "plan_step"]
    assert steps == [(1, "approved"), (2, "approved"), (3, "edited"), (4, "approved"),
                     (1, "running"), (1, "done"), (2, "running"), (2, "done"), (3, "running"), (3, "done"),
                     (4, "not_run")]
    # What reached Slurm is the edited script, exactly, once.
    (tracked,) = Ledger(workspace.ledger_path).all()
    assert tracked.experiment.job_id == submitted["job_id"]
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.decision, r.approver) for r in records] == [
        ("propose_plan", "edited", "tester"), ("cluster_run", "approved", "tester"), ("gpu_estimate", "auto", None),
        ("cluster_submit", "edited", "tester"), ("cluster_status", "approved", "tester")]
    run = records[3]
    assert run.args["script"] == EDITED and run.ok and "--time=00:05:00" in run.preview.text
    assert tracked.experiment.script == EDITED


def test_betty_ask_prints_the_plan_and_approve_plan_grants_it(ssh_profile, workspace, tmp_path) -> None:
    def page(name: str) -> dict[str, Any]:
        return {"page": f"notes/{name}.md", "mode": "create", "body": f"<script>{name}</script>\n",
                "frontmatter": {"name": name, "description": "a note", "type": "note"}}

    def ask(llm: ScriptedLLM, *flags: str) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "betty.json"
        config.write_text(json.dumps({"BettyConfig": {"clusters": [{**ssh_profile.to_dict(), "name": "betty-dev"}],
                                                      "llm": {"base_url": llm.base_url, "model": "scripted"}}}))
        return subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "ask", "write two notes", *flags,
                               "--dir", str(workspace.root)], capture_output=True, text=True, timeout=180, cwd=REPO,
                              env={**os.environ, "BETTY_CONFIG": str(config)}, stdin=subprocess.DEVNULL)

    script = [call("propose_plan", {"goal": "two notes", "steps": [
        {"tool": "wiki_write", "args": page("a")}, {"tool": "wiki_write", "args": page("b")}]}),
        call("wiki_write", page("a")), call("wiki_write", page("b")), say("Both written.")]
    with ScriptedLLM(list(script)) as llm:
        denied = ask(llm)
    assert denied.returncode == 1 and "── plan: two notes (2 steps)" in denied.stdout
    assert not (workspace.wiki / "notes").exists() or not any((workspace.wiki / "notes").iterdir())
    with ScriptedLLM(list(script)) as llm:
        granted = ask(llm, "--approve-plan")
    assert granted.returncode == 0, granted.stderr
    out = granted.stdout
    assert "1. wiki_write (tier 2): " in out and "2. wiki_write (tier 2): " in out
    assert "     <script>a</script>" in out, "each step's own preview, as its card would show it"
    assert "step 1 wiki_write: approved" in out and "step 2 wiki_write: done" in out
    assert (workspace.wiki / "notes" / "b.md").exists()
    records = [r for r in ActionLog(workspace.root).read() if r.tool == "wiki_write" and r.ok]
    assert {r.approver for r in records} == {f"{getpass.getuser()} (betty ask --approve-plan)"}


def test_on_a_terminal_each_step_of_a_plan_is_asked_in_turn(ssh_profile, workspace, tmp_path) -> None:
    from test_cli_terminal import OnTerminal

    def page(name: str) -> dict[str, Any]:
        return {"page": f"notes/{name}.md", "mode": "create", "body": f"{name}\n",
                "frontmatter": {"name": name, "description": "a note", "type": "note"}}

    with ScriptedLLM([call("propose_plan", {"goal": "two notes", "steps": [
            {"tool": "wiki_write", "args": page("a")}, {"tool": "wiki_write", "args": page("b")}]}),
            call("wiki_write", page("a")), call("wiki_write", page("b")), say("Done.")]) as llm:
        config = tmp_path / "betty.json"
        config.write_text(json.dumps({"BettyConfig": {"clusters": [{**ssh_profile.to_dict(), "name": "betty-dev"}],
                                                      "llm": {"base_url": llm.base_url, "model": "scripted"}}}))
        person = OnTerminal(f"import os, sys; os.environ['BETTY_CONFIG'] = {str(config)!r}; "
                            "from betty_jupyter.cli import main; "
                            f"sys.exit(main(['ask', 'write two notes', '--dir', {str(workspace.root)!r}]))")
        try:
            person.wait_for("[e]ach step / [N]o: ", timeout=120)
            os.write(person.screen, b"e\n")
            person.wait_for("step 1 wiki_write? [y]es / [N]o: ")
            os.write(person.screen, b"y\n")
            person.wait_for("step 2 wiki_write? [y]es / [N]o: ")
            os.write(person.screen, b"n\n")
            person.wait_for("step 2 wiki_write: denied")
            person.wait_for("continue it with --session", timeout=120)
        except BaseException:
            person.process.kill()
            raise
        assert person.ended() == 0
    assert (workspace.wiki / "notes" / "a.md").exists() and not (workspace.wiki / "notes" / "b.md").exists()
    records = [(r.tool, r.decision) for r in ActionLog(workspace.root).read()]
    assert records == [("propose_plan", "edited"), ("wiki_write", "approved"),
                       ("wiki_write", "refused")]
