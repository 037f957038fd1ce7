"""``delegate_tasks``: child sessions on real job logs (the dev cluster), answered by a scripted model over HTTP.

The scripted model answers the parent and its helpers alike; which one asks is told by the
tools its request offers. A helper's answer is computed from the manifest it was sent, so a
right answer shows that the manifest held the job's record and log.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from conftest import wait_for_job
from llm_server import ScriptedLLM, Step, call, from_betty, respond, say, stall

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.delegation import Delegation
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import WikiStore, init_workspace

pytestmark = pytest.mark.cluster

TOOL = "delegate_tasks"
SCHEMA = {"type": "object", "properties": {"job_id": {"type": "string"}, "oom": {"type": "boolean"}},
          "required": ["job_id", "oom"], "additionalProperties": False}
TRAINS = 'echo "config {name}"; echo "step=1 loss=1.9"; echo "step=2 loss=1.2"; echo "saved checkpoint"'
HOGS = 'echo "config {name}"; python3 -c "x = bytearray(400 * 1024 * 1024)"'
CUDA_OOM = ('echo "config {name}"; echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2;'
            ' exit 1')
NO_DATA = 'echo "config {name}"; echo "FileNotFoundError: data/train.jsonl" >&2; exit 1'
CONFIGS = [  # (configuration, what its job does, whether it ran out of memory)
    ("bs8-fp16", TRAINS, False), ("bs16-fp16", TRAINS, False), ("bs32-fp16", HOGS, True),
    ("bs64-fp16", HOGS, True), ("bs8-fp32", TRAINS, False), ("bs16-fp32", CUDA_OOM, True),
    ("bs32-fp32", HOGS, True), ("bs64-fp32", NO_DATA, False),
]


@dataclass(frozen=True)
class Run:
    """One finished job of the sweep."""

    job_id: str
    config: str
    oom: bool


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    init_workspace(tmp_path / "project")
    return Workspace.at(tmp_path / "project")


@pytest.fixture
def runs(ssh_profile, tmp_path) -> list[Run]:
    """Eight real jobs, ended: three killed by the cgroup's OOM killer, one CUDA OOM, one missing its data."""
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking, run_sync

    transport = ssh_profile.open_transport()
    client = SlurmClient(transport, work_dir=ssh_profile.work_dir)
    client.lookup_interval = 0.5
    slurm = Blocking(client)
    (tmp_path / "sweep").mkdir()
    try:
        submitted = []
        for name, body, oom in CONFIGS:
            script = "\n".join(["#!/bin/bash", f"#SBATCH --job-name={name}", "#SBATCH --mem=64M",
                                "#SBATCH --time=00:05:00", body.format(name=name)]) + "\n"
            submitted.append(Run(slurm.submit(script, extra_args=["--chdir", str(tmp_path / "sweep")]), name, oom))
        for run in submitted:
            wait_for_job(slurm, run.job_id)
    finally:
        run_sync(transport.close())
    return submitted


def config_for(llm: ScriptedLLM, ssh_profile, rules: dict[str, list[str]] | None = None) -> BettyConfig:
    profile = {**ssh_profile.to_dict(), "name": "betty-dev"}
    return BettyConfig(clusters=[profile], rules=rules or {},
                       llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1})


def oom_task(run: Run) -> dict[str, Any]:
    return {"title": f"job {run.job_id} {run.config}", "resources": [{"type": "job", "location": run.job_id}],
            "instructions": "Read this job's record and the end of its log: did the job exhaust its memory "
                            "(host or GPU)?", "tools": ["job_logs"], "result_schema": SCHEMA}


def prompt_for(runs: list[Run]) -> str:
    return f"compare the logs of jobs {runs[0].job_id}–{runs[-1].job_id} and tell me which configurations ran out " \
           "of memory"


def manifest(first_message: str) -> str:
    """The resources part of a helper's first message (not its instructions)."""
    return first_message.split("Resources (already loaded for you):", 1)[1].split("\n\nWhen you are done", 1)[0]


def judged(first_message: str) -> dict[str, Any]:
    """What a careful helper answers from its manifest alone."""
    text = manifest(first_message)
    job = re.search(r"### job (\d+)", text)
    assert job, text
    return {"job_id": job.group(1), "oom": "OUT_OF_MEMORY" in text or "out of memory" in text.lower()}


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


class Scene:
    """The scripted model's answers to the parent (delegate, then sum up) and to each helper."""

    def __init__(self, delegate: dict[str, Any], helper: Callable[[dict[str, Any], str, int], Step] | None = None):
        self.delegate, self.helper = delegate, helper or (lambda request, job, attempt: say(json.dumps(
            judged(request["messages"][1]["content"]))))
        self.parent: list[dict[str, Any]] = []
        self.helpers: list[dict[str, Any]] = []
        self.attempts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Step:
        if from_betty(request):
            self.parent.append(request)
            if request["messages"][-1]["role"] == "user":
                return call(TOOL, self.delegate)
            return say("Here is what the helpers found.")
        first = request["messages"][1]["content"]
        found = re.search(r"### job (\d+)", first)
        job = found.group(1) if found else ""
        with self._lock:
            self.helpers.append(request)
            if len(request["messages"]) == 2:
                self.attempts[job] += 1
            attempt = self.attempts[job]
        return self.helper(request, job, attempt)

    def steps(self, count: int = 80) -> list[Step]:
        return [respond(self) for _ in range(count)]


class Person:
    """Answers every approval request in the parent's stream, and remembers what it was shown."""

    def __init__(self, broker: ApprovalBroker, answer: str = "approved") -> None:
        self.broker, self.answer = broker, answer
        self.shown: list[Any] = []
        self.pending_when_shown: list[list[str]] = []

    def __call__(self, event: Any) -> None:
        if event.type == "approval_request":
            self.shown.append(event.payload)
            asyncio.get_running_loop().call_soon(self._answer, event.session_id, event.payload.approval_id)

    def _answer(self, session_id: str, approval_id: str) -> None:
        self.pending_when_shown.append([r.approval_id for r in self.broker.pending(session_id)])
        self.broker.respond(approval_id, self.answer, "tester")


async def converse(workspace: Workspace, config: BettyConfig, prompt: str, mode: str = "auto",
                   person: Callable[[ApprovalBroker], Any] = Person) -> tuple[Any, list[Any], Any, str]:
    """One question to a fresh session; waits for its background tasks too."""
    broker = ApprovalBroker(timeout=60)
    session = await open_session(workspace, config, SessionSpec(mode=mode, broker=broker))
    events: list[Any] = []
    answering = person(broker)
    session.stream.subscribe(events.append)
    session.stream.subscribe(answering)
    try:
        reason = await session.ask(prompt)
        await asyncio.wait_for(Delegation.of(session).wait(), timeout=300)
    finally:
        await session.context.close()
    return session, events, answering, reason


def task_results(events: list[Any]) -> dict[str, tuple[str, str]]:
    """Each task's end in the parent's stream: job id → (status, summary)."""
    ended = {}
    for event in events:
        if event.type == "tool_result" and event.payload.call_id.startswith("task_"):
            summary = event.payload.summary
            found = re.match(r"task_\w+ \(job (\d+) [^)]*\): (\S+)", summary)
            assert found, summary
            status = "ok" if event.payload.ok else found.group(2)
            ended[found.group(1)] = (status, summary)
    return ended


def answers(summary: str) -> dict[str, Any]:
    """Job id → the helper's checked answer, from the lines of a delegate_tasks summary."""
    found = re.findall(r"^- task_\w+ \(job (\d+) [^)]*\): (\{.*\})$", summary, re.MULTILINE)
    return {job: json.loads(answer) for job, answer in found}


def test_eight_helpers_read_real_logs_and_find_the_runs_out_of_memory(ssh_profile, workspace, runs):
    scene = Scene({"tasks": [oom_task(run) for run in runs], "sync": True, "on_error": "continue",
                   "max_parallel": 4})
    with ScriptedLLM(scene.steps()) as llm:
        session, events, person, reason = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile), prompt_for(runs), mode="confirm"))
    assert llm.errors == [] and reason == "finished", llm.errors
    # Reading job logs is tier 1: the delegation itself asks once; the helpers' cards would carry their task.
    assert [(card.tool, card.tier, card.task) for card in person.shown] == [(TOOL, 1, None)]
    assert all(f"job {run.job_id} {run.config}" in person.shown[0].preview.text for run in runs)
    result = [e.payload for e in events if e.type == "tool_result" and e.payload.tool == TOOL
              and not e.payload.call_id.startswith("task_")]
    assert len(result) == 1 and result[0].ok and result[0].summary.startswith("8 of 8 task(s) answered")
    truth = {run.job_id: {"job_id": run.job_id, "oom": run.oom} for run in runs}
    assert answers(result[0].summary) == truth
    told = [m["content"] for m in scene.parent[-1]["messages"] if m["role"] == "tool"][-1]
    assert answers(told) == truth, "the parent's model gets every checked answer back"
    assert {job: status for job, (status, _) in task_results(events).items()} == {r.job_id: "ok" for r in runs}
    # Each helper got its own task, only its tools and only its manifest: never the parent's history.
    assert len(scene.helpers) == 8
    for request in scene.helpers:
        assert tool_names(request) == ["job_logs"]
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
        assert "compare the logs" not in json.dumps(request["messages"])
    firsts = [request["messages"][1]["content"] for request in scene.helpers]
    by_job = {judged(first)["job_id"]: manifest(first) for first in firsts}
    for run in runs:
        assert f"config {run.config}" in by_job[run.job_id], "the manifest holds the end of the job's log"
    assert all(re.search(r"oom[-_]kill", by_job[run.job_id]) for run in runs if run.config in ("bs32-fp16", "bs64-fp16"))
    assert "CUDA out of memory" in by_job[runs[5].job_id] and "FAILED" in by_job[runs[5].job_id]
    records = ActionLog(workspace.root).read(session_id=session.session_id)
    assert [(r.tool, r.decision, r.ok) for r in records] == [(TOOL, "approved", True)]


def test_in_the_background_task_ids_come_at_once_and_results_as_events_and_notes(ssh_profile, workspace, runs):
    scene = Scene({"tasks": [oom_task(run) for run in runs], "sync": False, "max_parallel": 8})
    with ScriptedLLM(scene.steps()) as llm:
        session, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), prompt_for(runs)))
    assert llm.errors == [] and reason == "finished", llm.errors
    call_result = next(e for e in events if e.type == "tool_result" and not e.payload.call_id.startswith("task_"))
    ids = re.findall(r"task_[0-9a-f]{10}", call_result.payload.summary)
    assert len(set(ids)) == 8 and call_result.payload.summary.startswith("started 8 task(s) in the background")
    ended = [e for e in events if e.type == "tool_result" and e.payload.call_id.startswith("task_")]
    assert sorted(e.payload.call_id for e in ended) == sorted(ids)
    assert all(call_result.seq < e.seq for e in ended), "the call returned before any task ended"
    told = [m["content"] for m in scene.parent[-1]["messages"] if m["role"] == "tool"][-1]
    assert all(task_id in told for task_id in ids), "the model was given the task ids"
    notes = session.context.scratchpad.read_text()
    for run, task_id in zip(runs, ids):
        section = re.search(rf"^## Delegated task {task_id}: job {run.job_id} {run.config} \(ok\)\n(.*)$", notes,
                            re.MULTILINE)
        assert section, notes
        assert json.loads(section.group(1)) == {"job_id": run.job_id, "oom": run.oom}


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "background"])
@pytest.mark.parametrize("on_error", ["fail_fast", "continue", "retry"])
def test_one_failing_helper_under_each_error_strategy(ssh_profile, workspace, runs, on_error, sync):
    failing = runs[2].job_id

    def helper(request: dict[str, Any], job: str, attempt: int) -> Step:
        if job == failing and attempt == 1:
            return say("It ran out of memory, I am fairly sure.")  # prose, not the JSON asked for
        answer = say(json.dumps(judged(request["messages"][1]["content"])))
        # Under fail_fast the others are still thinking when the failure lands.
        return stall(30, answer) if on_error == "fail_fast" else answer

    scene = Scene({"tasks": [oom_task(run) for run in runs], "sync": sync, "on_error": on_error,
                   "max_parallel": 8}, helper)
    with ScriptedLLM(scene.steps()) as llm:
        session, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), prompt_for(runs)))
    assert llm.errors == [] and reason == "finished", llm.errors
    ended = task_results(events)
    statuses = {job: status for job, (status, _) in ended.items()}
    others = {run.job_id for run in runs} - {failing}
    if on_error == "fail_fast":
        assert statuses == {failing: "failed", **{job: "cancelled" for job in others}}
        assert "on_error is fail_fast" in ended[runs[0].job_id][1]
    elif on_error == "continue":
        assert statuses == {failing: "failed", **{job: "ok" for job in others}}
    else:
        assert statuses == {run.job_id: "ok" for run in runs}
        retried = [r for r in scene.helpers if f"### job {failing}\n" in r["messages"][1]["content"]]
        assert len(retried) == 2 and "An earlier attempt at this task failed: the helper's answer is not JSON" \
            in retried[1]["messages"][1]["content"]
    if on_error != "retry":
        assert "the helper's answer is not JSON" in ended[failing][1]
        assert scene.attempts[failing] == 1
    if on_error != "fail_fast":
        for run in runs:
            if statuses[run.job_id] == "ok":
                assert json.loads(ended[run.job_id][1].split(": ", 1)[1]) == {"job_id": run.job_id, "oom": run.oom}
    if not sync:
        notes = session.context.scratchpad.read_text()
        assert notes.count("## Delegated task ") == 8 and f"job {failing} " in notes


def test_a_tool_the_parent_lacks_or_delegation_itself_is_refused(ssh_profile, workspace):
    task = {"title": "read the how-to", "instructions": "summarise it", "resources": [
        {"type": "wiki", "location": "index.md"}]}
    steps = [call(TOOL, {"tasks": [{**task, "tools": ["wiki_read", "cluster_cancel"]}]}),
             call(TOOL, {"tasks": [{**task, "tools": [TOOL]}]}),
             call(TOOL, {"tasks": [{**task, "tools": ["cluster_shell"]}]}),
             say("I cannot delegate that.")]

    async def scenario(llm: ScriptedLLM) -> list[Any]:
        tools = tuple(name for name in default_registry().names() if name != "cluster_cancel")
        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(mode="auto", tools=tools))
        events: list[Any] = []
        session.stream.subscribe(events.append)
        try:
            assert await session.ask("get helpers to read the index") == "finished"
        finally:
            await session.context.close()
        return [e.payload for e in events if e.type == "tool_result"]

    with ScriptedLLM(steps) as llm:
        results = asyncio.run(scenario(llm))
    assert len(llm.requests) == 4, "no helper ever asked the model anything"
    assert [r.ok for r in results] == [False, False, False]
    assert "task 'read the how-to': refused: cluster_cancel not among this session's tools" in results[0].summary
    assert "a helper cannot delegate further" in results[1].summary
    assert "cluster_shell not among this session's tools" in results[2].summary


def test_a_helpers_card_reaches_the_same_person_labelled_with_its_task(ssh_profile, workspace):
    title = "note the OOM threshold"
    page = {"page": "howto/oom-threshold.md", "mode": "create", "body": "batch 32 needs more than 64M\n",
            "frontmatter": {"name": "oom-threshold", "description": "where runs run out of memory", "type": "howto"}}

    def helper(request: dict[str, Any]) -> Step:
        done = [m for m in request["messages"] if m["role"] == "tool"]
        if not done:
            return call("cluster_cancel", {"job_id": "1"})  # not among its tools
        if len(done) == 1:
            assert "there is no tool 'cluster_cancel'" in done[0]["content"]
            return call("wiki_write", page)
        raise AssertionError("a denial ends the helper's turn: its model is not asked again")

    def model(request: dict[str, Any]) -> Step:
        if not from_betty(request):
            assert tool_names(request) == ["wiki_write"]
            return helper(request)
        if request["messages"][-1]["role"] == "user":
            return call(TOOL, {"tasks": [{"title": title, "instructions": "write down the threshold",
                                          "resources": [{"type": "wiki", "location": "index.md"}],
                                          "tools": ["wiki_write"], "result_schema": {"type": "object"}}],
                                "on_error": "retry"})  # a denial is still never retried
        return say("The helper was not allowed to write the page.")

    with ScriptedLLM([respond(model) for _ in range(8)]) as llm:
        session, events, person, reason = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile), "note the OOM threshold", mode="auto",
            person=lambda broker: Person(broker, "denied")))
    assert llm.errors == [] and reason == "finished", llm.errors
    assert [(card.tool, card.tier, card.task) for card in person.shown] == [("wiki_write", 2, title)]
    assert person.pending_when_shown == [[person.shown[0].approval_id]], "listed among the session's approvals"
    resolved = [e.payload for e in events if e.type == "approval_resolved"]
    assert [(r.approval_id, r.decision) for r in resolved] == [(person.shown[0].approval_id, "denied")]
    assert not WikiStore(workspace.wiki).exists("howto/oom-threshold.md")
    assert [e.type for e in events].count("done") == 1, "a helper's own turn never ends the parent's"
    ended = [e.payload for e in events if e.type == "tool_result" and e.payload.call_id.startswith("task_")]
    assert len(ended) == 1 and not ended[0].ok and "a person denied one of its calls; not retried" in ended[0].summary
    records = ActionLog(workspace.root).read(session_id=session.session_id)
    assert [(r.tool, r.decision) for r in records] == [("cluster_cancel", "refused"), ("wiki_write", "denied"),
                                                       (TOOL, "auto")]


def test_a_helper_never_holds_a_looser_mode_than_its_parent(ssh_profile, workspace):
    def model(request: dict[str, Any]) -> Step:
        if from_betty(request):
            if request["messages"][-1]["role"] == "user":
                return call(TOOL, {"tasks": [{"title": "tidy the index", "instructions": "add a line",
                                              "resources": [{"type": "wiki", "location": "index.md"}],
                                              "tools": ["wiki_write"]}]})
            return say("done")
        if request["messages"][-1]["role"] == "user":
            return call("wiki_write", {"page": "index.md", "mode": "append", "text": "- a line from a helper"})
        return say("proposed only")

    with ScriptedLLM([respond(model) for _ in range(6)]) as llm:
        session, _, person, reason = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile), "tidy the index", mode="propose"))
    assert llm.errors == [] and reason == "finished" and person.shown == []
    assert "a line from a helper" not in WikiStore(workspace.wiki).read("index.md").text
    records = ActionLog(workspace.root).read(session_id=session.session_id)
    assert [(r.tool, r.decision) for r in records] == [("wiki_write", "proposed"), (TOOL, "auto")]


def test_two_helpers_never_write_the_same_page_at_once(ssh_profile, workspace):
    store = WikiStore(workspace.wiki)
    store.create("howto/findings.md", {"name": "findings", "description": "what the sweep found", "type": "howto"},
                 "# Findings\n")
    asked: list[str] = []

    def model(request: dict[str, Any]) -> Step:
        if from_betty(request):
            if request["messages"][-1]["role"] == "user":
                return call(TOOL, {"tasks": [
                    {"title": f"finding {n}", "instructions": f"append finding {n}", "tools": ["wiki_write"],
                     "resources": [{"type": "wiki", "location": "howto/findings.md"}]} for n in (1, 2)]})
            return say("both findings are written")
        if request["messages"][-1]["role"] == "user":
            number = re.search(r"append finding (\d)", request["messages"][1]["content"]).group(1)
            asked.append(number)
            return call("wiki_write", {"page": "howto/findings.md", "mode": "append", "text": f"- finding {number}"})
        return say("written")

    class SlowPerson(Person):
        """Answers only once both helpers have asked to write (and had time to show a card)."""

        def __call__(self, event: Any) -> None:
            if event.type != "approval_request":
                return
            self.shown.append(event.payload)
            asyncio.get_running_loop().create_task(self._slowly(event.payload.approval_id))

        async def _slowly(self, approval_id: str) -> None:
            await asyncio.sleep(0)
            self.pending_when_shown.append([r.tool for r in self.broker.pending()])
            for _ in range(600):
                if len(asked) == 2:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            self.broker.respond(approval_id, "approved", "tester")

    rules = {"ask": ["wiki_write(page=howto/findings.md)"]}  # every write of the page shows a card
    with ScriptedLLM([respond(model) for _ in range(10)]) as llm:
        _, _, person, reason = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile, rules), "write both findings", person=SlowPerson))
    assert llm.errors == [] and reason == "finished", llm.errors
    assert [card.tool for card in person.shown] == ["wiki_write", "wiki_write"]
    assert person.pending_when_shown == [["wiki_write"], ["wiki_write"]], "one write of the page open at a time"
    first = re.search(r"^\+- finding (\d)$", person.shown[0].preview.text, re.MULTILINE).group(1)
    assert f"\n - finding {first}\n" in person.shown[1].preview.text, "the second diff starts from the first write"
    text = store.read("howto/findings.md").text
    assert text.count("- finding 1\n") == 1 and text.count("- finding 2\n") == 1


def test_wiki_pages_files_and_experiments_go_into_the_manifest(ssh_profile, workspace, tmp_path):
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.experiments.record import submit_experiment

    log = tmp_path / "train.log"
    log.write_text("".join(f"line {n}\n" for n in range(1, 101)))
    script = "#!/bin/bash\n#SBATCH --job-name=oom-sweep\n#SBATCH --mem=64M\ntrue\n"

    async def recorded() -> str:
        slurm = SlurmClient(ssh_profile.open_transport(), work_dir=ssh_profile.work_dir)
        try:
            experiment = await submit_experiment(slurm, workspace, "betty-dev", script,
                                                 goal="find where batch size runs out of memory")
        finally:
            await slurm.transport.close()
        return experiment.slug

    slug = asyncio.run(recorded())
    tasks = [{"title": "the index", "instructions": "x", "resources": [{"type": "wiki", "location": "index.md"}]},
             {"title": "the log", "instructions": "x", "resources": [{"type": "file", "location": str(log)}]},
             {"title": "the sweep", "instructions": "x", "resources": [{"type": "experiment", "location": slug}]},
             {"title": "a secret", "instructions": "x", "resources": [{"type": "file", "location": "/etc/shadow"}]}]
    seen: dict[str, str] = {}

    def model(request: dict[str, Any]) -> Step:
        if from_betty(request):
            return call(TOOL, {"tasks": tasks}) if request["messages"][-1]["role"] == "user" else say("read")
        first = request["messages"][1]["content"]
        seen[first.split("\n", 1)[0].removeprefix("Task: ")] = manifest(first)
        return say("read it")

    with ScriptedLLM([respond(model) for _ in range(8)]) as llm:
        _, events, _, reason = asyncio.run(converse(workspace, config_for(llm, ssh_profile), "read these"))
    assert llm.errors == [] and reason == "finished", llm.errors
    assert sorted(seen) == ["the index", "the log", "the sweep"], "a resource that cannot be read asks no model"
    assert "### wiki index.md" in seen["the index"] and "# Index" in seen["the index"]
    assert "line 100" in seen["the log"] and "line 20\n" not in seen["the log"], "the end of the file"
    assert f"experiment {slug}: job " in seen["the sweep"] and "find where batch size runs out" in seen["the sweep"]
    assert f"wiki/experiments/{slug}.md" in seen["the sweep"]
    ended = {e.payload.summary.split(" (", 1)[1].split(")", 1)[0]: e.payload for e in events
             if e.type == "tool_result" and e.payload.call_id.startswith("task_")}
    assert ended["the index"].ok and ended["the index"].summary.endswith(': "read it"')
    assert not ended["a secret"].ok and "could not load its resources: file /etc/shadow: refused" \
        in ended["a secret"].summary and "outside the readable roots" in ended["a secret"].summary


def test_fail_fast_closes_the_open_card_of_a_cancelled_helper(ssh_profile, workspace):
    page = {"page": "howto/never.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "never", "description": "never written", "type": "howto"}}
    card_asked = threading.Event()

    def model(request: dict[str, Any]) -> Step:
        if from_betty(request):
            if request["messages"][-1]["role"] == "user":
                return call(TOOL, {"on_error": "fail_fast", "tasks": [
                    {"title": "writer", "instructions": "write the page", "tools": ["wiki_write"],
                     "result_schema": {"type": "object"}},
                    {"title": "talker", "instructions": "answer in JSON", "result_schema": {"type": "object"}}]})
            return say("stopped")
        if "Task: writer" in request["messages"][1]["content"]:
            card_asked.set()
            return call("wiki_write", page)
        card_asked.wait(30)
        time.sleep(0.5)  # the writer's card is open by now
        return say("not JSON")

    class Watcher:
        def __init__(self, broker: ApprovalBroker) -> None:
            self.broker, self.shown, self.pending_at_end = broker, [], None

        def __call__(self, event: Any) -> None:
            if event.type == "approval_request":
                self.shown.append(event.payload)  # and never answered

    with ScriptedLLM([respond(model) for _ in range(6)]) as llm:
        _, events, watcher, reason = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile), "write it", person=Watcher))
    assert llm.errors == [] and reason == "finished", llm.errors
    assert [(card.tool, card.task) for card in watcher.shown] == [("wiki_write", "writer")]
    resolved = [e.payload for e in events if e.type == "approval_resolved"]
    assert [(r.approval_id, r.decision) for r in resolved] == [(watcher.shown[0].approval_id, "cancelled")]
    assert watcher.broker.pending() == [] and not WikiStore(workspace.wiki).exists("howto/never.md")
    ended = {e.payload.summary.split(" (", 1)[1].split(")", 1)[0]: e.payload.summary for e in events
             if e.type == "tool_result" and e.payload.call_id.startswith("task_")}
    assert "talker): failed — the helper's answer is not JSON" in ended["talker"]
    assert "writer): cancelled — another task failed" in ended["writer"]


def test_cancelling_background_tasks_closes_their_cards_and_notes_it(ssh_profile, workspace):
    page = {"page": "howto/later.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "later", "description": "written later", "type": "howto"}}

    def model(request: dict[str, Any]) -> Step:
        if from_betty(request):
            if request["messages"][-1]["role"] == "user":
                return call(TOOL, {"sync": False, "tasks": [{"title": "writer", "instructions": "write the page",
                                                             "tools": ["wiki_write"]}]})
            return say("started")
        return call("wiki_write", page)

    async def scenario(llm: ScriptedLLM) -> tuple[Any, list[Any], int]:
        broker = ApprovalBroker(timeout=60)
        session = await open_session(workspace, config_for(llm, ssh_profile), SessionSpec(mode="auto", broker=broker))
        events: list[Any] = []
        session.stream.subscribe(events.append)
        try:
            assert await session.ask("write it later") == "finished"
            for _ in range(600):
                if broker.pending(session.session_id):
                    break
                await asyncio.sleep(0.05)
            cancelled = Delegation.of(session).cancel()
            await asyncio.wait_for(Delegation.of(session).wait(), timeout=30)
        finally:
            await session.context.close()
        return session, events, cancelled

    with ScriptedLLM([respond(model) for _ in range(4)]) as llm:
        session, events, cancelled = asyncio.run(scenario(llm))
    assert llm.errors == [] and cancelled == 1
    cards = [e.payload for e in events if e.type == "approval_request"]
    resolved = [e.payload for e in events if e.type == "approval_resolved"]
    assert [(c.tool, c.task) for c in cards] == [("wiki_write", "writer")]
    assert [(r.approval_id, r.decision) for r in resolved] == [(cards[0].approval_id, "cancelled")]
    ended = [e.payload for e in events if e.type == "tool_result" and e.payload.call_id.startswith("task_")]
    assert len(ended) == 1 and not ended[0].ok and ended[0].summary.endswith("(writer): cancelled — stopped")
    assert "## Delegated task task_" in session.context.scratchpad.read_text()
    assert not WikiStore(workspace.wiki).exists("howto/later.md")
