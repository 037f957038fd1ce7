"""The job babysitter on the dev cluster, with no chat model at all: a real job runs out of memory (or time), the
watcher reports it, the babysitter writes its diagnosis into the page and proposes exactly one corrected
resubmission whose diff is the one line it must be; approving it submits exactly one job, and neither a second
delivery nor a restarted server proposes again. Out of time is denied, out of GPU memory moves to a bigger GPU
and the kill switch withdraws its card. Off until enabled."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import pytest

from betty_jupyter.agent import events as ev
from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.agent.automations.babysitter import BABYSITTER_ID
from betty_jupyter.agent.automations.runner import AutomationRunner
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.watcher import JobUpdate
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import AUTO_END, AUTO_START, init_workspace
from conftest import run_betty

pytestmark = pytest.mark.cluster

GUARD = 240.0  # a guard against a hang, not a measurement
# Without a measured peak above the request (a cgroup stops a job at its limit), the proposal rests on an earlier run
# of the same job, and says why; where Slurm polls and caught the peak, on that peak.
UNMEASURED = (r"((accounting measured no peak \(MaxRSS\) before it was killed|its measured peak, \d+ MiB \(MaxRSS of "
              r"step batch\), did not pass the 100 MiB it asked for: the limit stopped it before it showed what it "
              r"needs); job \d+, an earlier run of it, completed with 200 MiB; asking that|it peaked at \d+ MiB "
              r"\(MaxRSS of step batch\); asking \d+ MiB = peak \+ 25%, rounded up)")
T = TypeVar("T")
MEMORY_HOG = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --chdir={root}
#SBATCH --mem=100M
#SBATCH --time=00:05:00
python3 -c 'import time; x = bytearray(150 * 1024 * 1024); time.sleep(3); print("trained")'
"""
CUDA_CRASH = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --chdir={root}
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:1
#SBATCH --mem=100M
echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." >&2
exit 1
"""
BIG_HOG = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --chdir={root}
#SBATCH --mem=100M
#SBATCH --time=00:05:00
python3 -c 'import time; x = bytearray(600 * 2**20); x[::4096] = b"x" * len(x[::4096]); time.sleep(30)'
"""
SLEEPER = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --chdir={root}
#SBATCH --mem=100M
#SBATCH --time=1
for epoch in $(seq 1 40); do echo "epoch $epoch/40 loss=0.5"; sleep 5; done
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    init_workspace(tmp_path / "project")
    return Workspace.at(tmp_path / "project")


@pytest.fixture
def config(ssh_profile) -> BettyConfig:
    """The dev cluster over SSH and no chat model: the babysitter needs none."""
    return BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}])


async def until(what: str, check: Callable[[], T]) -> T:
    """Poll ``check`` until it returns something true; that value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while loop.time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.2)
    pytest.fail(f"{what} did not happen within the guard")


class Betty:
    """One server's worth of Betty in this process: the Assistant with its watcher and the automation runner."""

    def __init__(self, workspace: Workspace, config: BettyConfig) -> None:
        self.assistant = Assistant(workspace, config)
        self.assistant.watch(min_interval=0.5, max_interval=2.0)
        self.runner = AutomationRunner(self.assistant, lease_seconds=30.0)
        self.runner.start()
        self.ledger = Ledger(workspace.ledger_path)

    def cards(self, task: str | None = None) -> list[ev.ApprovalRequest]:
        """The approvals waiting now (GET /betty/api/approvals answers these), of one task when given."""
        return [card for card in self.assistant.pending() if task is None or card.task == task]

    def runs(self) -> list[Any]:
        return self.runner.store.runs(BABYSITTER_ID)

    async def submit(self, script: str, goal: str, **more: Any) -> Experiment:
        """A person's own cluster_submit through the desk session, approved by them."""
        desk = await self.assistant.session("test-desk")
        call = asyncio.ensure_future(desk.run_tool("cluster_submit", {"script": script, "goal": goal, **more},
                                                   "a test"))
        card = (await until("the submit card", lambda: self.cards(None)))[0]
        self.assistant.respond(card.approval_id, "approved", "the researcher")
        outcome = await call
        assert outcome.ok, outcome.summary
        assert isinstance(outcome.data, Experiment)
        return outcome.data

    def experiment(self, slug: str) -> Experiment:
        tracked = self.ledger.get(slug)
        assert tracked is not None
        return tracked.experiment

    async def close(self) -> None:
        await self.runner.close()
        await self.assistant.close()


def region(workspace: Workspace, experiment: Experiment) -> str:
    return (workspace.wiki / experiment.page).read_text().split(AUTO_START, 1)[1].split(AUTO_END, 1)[0]


def changed(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]


def run_scenario(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())


def test_an_out_of_memory_job_gets_a_diagnosis_and_one_resubmission_that_runs_once(workspace, config):
    name = f"babysat-{uuid.uuid4().hex[:6]}"
    script = MEMORY_HOG.format(name=name, root=workspace.root)

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            assert betty.runner.store.get(BABYSITTER_ID).status == "paused"
            assert betty.runner.resume(BABYSITTER_ID).status == "idle"
            # an earlier run of the same job completed with 200M: what the proposal rests on when no peak is known
            first = await betty.submit(script.replace("--mem=100M", "--mem=200M"), "train within 200M")
            assert await until("the earlier run to end", lambda: betty.ledger.get(first.slug).finished)
            assert betty.ledger.get(first.slug).state == "COMPLETED"
            original = await betty.submit(script, "train within 100M")
            task = f"job babysitter: job {original.job_id}"
            card = (await until("the babysitter's card", lambda: betty.cards(task)))[0]
            run = (await until("the babysitter's run to end", lambda: [r for r in betty.runs() if r.status == "done"]))[0]

            # the diagnosis, on the page and in the record
            shown = region(workspace, original)
            assert "## Diagnosis" in shown and "**Out of memory**" in shown
            assert "state OUT_OF_MEMORY" in shown and re.search(r"oom[-_]kill", shown)  # 22.05 and 24.11 wordings
            proposed = re.search(rf"- --mem 100M → (\d+)M: {UNMEASURED}", shown)
            assert proposed and task in shown, shown
            new = f"--mem={proposed.group(1)}M"
            recorded = betty.experiment(original.slug).diagnosis
            assert recorded["cause"] == "out_of_memory" and recorded["resubmission"]["state"] == "proposed"
            assert run.trigger == "job" and run.delivery_id == f"job:betty-dev:{original.job_id}:OUT_OF_MEMORY"
            assert "proposed a resubmission" in run.result

            # exactly one card, labelled, whose diff is the --mem line and nothing else
            assert betty.cards() == [card]
            assert (card.tool, card.tier, card.preview.kind) == ("cluster_submit", 2, "diff")
            assert changed(card.preview.text) == ["-#SBATCH --mem=100M", f"+#SBATCH {new}"]
            assert card.args["script"] == script.replace("--mem=100M", new)
            assert card.args["replaces"] == original.job_id
            assert card.preview.details["replaces"]["experiment"] == original.slug

            # the same change delivered again, and the run done again (as a resumed run would be): nothing new
            job = await betty.assistant.opened("test-desk").context.slurm.job(original.job_id)
            betty.runner.job_changed(JobUpdate(betty.experiment(original.slug), "RUNNING", "OUT_OF_MEMORY", job))
            betty.runner.run_now(BABYSITTER_ID, "job", run.payload)
            await until("the second run", lambda: len([r for r in betty.runs() if r.status == "done"]) == 2)
            assert len(betty.runs()) == 2 and betty.cards() == [card]

            # approving it submits exactly one job, linked to the original both ways
            betty.assistant.respond(card.approval_id, "approved", "the researcher")
            settled = await until("the resubmission", lambda: (betty.experiment(original.slug).diagnosis or {})
                                  .get("resubmission", {}).get("state") == "submitted")
            assert settled
            step = betty.experiment(original.slug).diagnosis["resubmission"]
            assert step["approver"] == "the researcher"
            tracked = betty.ledger.all()
            assert [t.experiment.slug for t in tracked] == [first.slug, original.slug, step["slug"]]
            again = tracked[2].experiment
            assert again.job_id == step["job_id"] and again.script == card.args["script"]
            assert again.replaces == {"slug": original.slug, "job_id": original.job_id}
            assert f"Resubmits [{original.slug}]({original.slug}.md) (job {original.job_id})." in \
                (workspace.wiki / again.page).read_text()
            assert f"Resubmitted as job {again.job_id}: [{again.slug}]({again.slug}.md)" in region(workspace, original)
            finished = await until("the resubmission to end", lambda: betty.ledger.get(again.slug).finished)
            assert finished and betty.ledger.get(again.slug).state == "COMPLETED"
            history = await betty.assistant.opened("test-desk").context.slurm.history(since="now-1hours")
            assert sorted(history.loc[history["name"] == name, "job_id"]) == sorted([first.job_id, original.job_id,
                                                                                    again.job_id])
        finally:
            await betty.close()

        # a restarted server: the same delivery and a fresh run of the job find it done and propose nothing
        betty = Betty(workspace, config)
        try:
            original = betty.ledger.all()[1].experiment
            assert betty.runner.store.get(BABYSITTER_ID).status == "idle"
            job = await (await betty.assistant.session("test-desk")).context.slurm.job(original.job_id)
            betty.runner.job_changed(JobUpdate(original, "RUNNING", "OUT_OF_MEMORY", job))
            betty.runner.run_now(BABYSITTER_ID, "job", betty.runs()[0].payload, "replayed by a test")
            await until("the run after the restart", lambda: len([r for r in betty.runs() if r.status == "done"]) == 3)
            assert "resubmission submitted" in betty.runs()[0].result
            assert betty.cards() == [] and len(betty.ledger.all()) == 3
        finally:
            await betty.close()

    run_scenario(scenario)


def memory_enforcement() -> str:
    """How the dev cluster holds jobs to --mem: ``polling`` lets a job grow past it until Slurm's next sample."""
    status = run_betty("dev-cluster", "status", "--json")
    assert status.returncode == 0, status.stderr
    return json.loads(status.stdout)["memory_enforcement"]


def test_the_memory_proposal_rests_on_the_measured_peak(workspace, config):
    """A job takes 600 MiB with --mem=100M. Where Slurm polls, it is killed once sampled over its limit and
    accounting keeps that peak: the proposal is the peak + 25%, saying so. Where a cgroup stops it at the
    limit, no peak above it exists and no earlier run says more: the diagnosis says how much it needs is not
    known, and nothing is proposed (no blind multiple of the request)."""
    name = f"babysat-{uuid.uuid4().hex[:6]}"
    polling = memory_enforcement() == "polling"

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            betty.runner.resume(BABYSITTER_ID)
            original = await betty.submit(BIG_HOG.format(name=name, root=workspace.root), "600 MiB in 100M")
            task = f"job babysitter: job {original.job_id}"
            if not polling:
                run = (await until("the babysitter's run to end",
                                   lambda: [r for r in betty.runs() if r.status == "done"]))[0]
                assert "no safe correction, nothing proposed" in run.result
                record = betty.experiment(original.slug).diagnosis
                assert record["changes"] == [] and record["resubmission"] is None and betty.cards(task) == []
                assert record["summary"].endswith("how much it needs is not known")
                assert record["suggestions"][0].startswith("Betty does not know how much memory it needs: ")
                shown = region(workspace, original)
                assert "how much it needs is not known" in shown and "200M" not in shown
                return
            card = (await until("the babysitter's card", lambda: betty.cards(task)))[0]
            change = betty.experiment(original.slug).diagnosis["changes"][0]
            shown = region(workspace, original)
            if polling:
                found = re.fullmatch(r"--mem 100M → (\d+)M: it peaked at (\d+) MiB \(MaxRSS of step batch\); "
                                     r"asking (\d+) MiB = peak \+ 25%, rounded up", change)
                assert found, change
                new, peak, asked = (int(value) for value in found.groups())
                # what the job took (600 MiB and Python), plus a quarter, up to the next 64 MiB
                assert 600 <= peak < 700 and new == asked and new % 64 == 0
                assert 1.25 * peak - 1 <= new < 1.25 * peak + 65
                assert f"peak memory (MaxRSS of step batch) {peak} MiB of the 100 MiB asked" in shown
            assert changed(card.preview.text) == ["-#SBATCH --mem=100M", f"+#SBATCH --mem={new}M"]
            assert f"Resubmission of {original.slug}: out of memory — {change}" == card.args["goal"]
            betty.assistant.respond(card.approval_id, "denied", "the researcher")
            await until("the denial to be recorded", lambda: "Not resubmitted: denied by the researcher" in
                        region(workspace, original))
        finally:
            await betty.close()

    run_scenario(scenario)


def test_a_timed_out_job_gets_the_time_its_progress_asks_for_and_a_denied_proposal_submits_nothing(workspace,
                                                                                                      config):
    """The job prints epoch n/40 every 5 s and is stopped at its 1-minute limit: the proposal is the time the
    whole run takes at that pace, plus a quarter, and says what it rests on."""
    name = f"babysat-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            betty.runner.resume(BABYSITTER_ID)
            original = await betty.submit(SLEEPER.format(name=name, root=workspace.root), "sleep past the limit")
            card = (await until("the babysitter's card", lambda: betty.cards(f"job babysitter: job {original.job_id}")))[0]
            change = betty.experiment(original.slug).diagnosis["changes"][0]
            found = re.fullmatch(r"--time 1 → 00:(\d\d):00: it printed epoch (\d+)/40 after 00:(\d\d):(\d\d), so "
                                 r"the whole run takes about 00:(\d\d):(\d\d); asking 00:\1:00 = that \+ 25%, "
                                 r"rounded up", change)
            assert found, change
            minutes, epoch, *clocks = (int(value) for value in found.groups())
            ran, whole = 60 * clocks[0] + clocks[1], 60 * clocks[2] + clocks[3]
            assert 60 <= ran < 240 and 1 <= epoch <= 40 and abs(whole - ran * 40 / epoch) <= 1
            assert minutes == -(-(1.25 * whole) // 60) and minutes > 2  # more than twice the limit: the pace asks it
            assert changed(card.preview.text) == ["-#SBATCH --time=1", f"+#SBATCH --time=00:{minutes:02d}:00"]
            shown = region(workspace, original)
            assert f"the last progress it printed: epoch {epoch}/40" in shown
            assert "**Out of time**" in shown and "DUE TO TIME LIMIT" in shown
            betty.assistant.respond(card.approval_id, "denied", "the researcher")
            await until("the denial to be recorded", lambda: "Not resubmitted: denied by the researcher" in
                        region(workspace, original))
            assert len(betty.ledger.all()) == 1 and betty.cards() == []
            assert betty.experiment(original.slug).diagnosis["resubmission"]["state"] == "not submitted"
        finally:
            await betty.close()

    run_scenario(scenario)


def test_a_gpu_out_of_memory_moves_to_a_bigger_gpu_and_the_kill_switch_withdraws_the_card(workspace, config):
    name = f"babysat-{uuid.uuid4().hex[:6]}"
    estimate = {"peak_gib": 31.4, "model": "Llama-3.1-8B", "method": "lora"}

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            betty.runner.resume(BABYSITTER_ID)
            original = await betty.submit(CUDA_CRASH.format(name=name, root=workspace.root), "fit on an A100",
                                          gpu_estimate=estimate)
            card = (await until("the babysitter's card", lambda: betty.cards(f"job babysitter: job {original.job_id}")))[0]
            assert changed(card.preview.text) == ["-#SBATCH --gres=gpu:a100:1", "+#SBATCH --gres=gpu:h100:1"]
            assert card.args["gpu_estimate"] == estimate
            shown = region(workspace, original)
            assert "**Out of GPU memory**" in shown and "log: torch.OutOfMemoryError: CUDA out of memory." in shown
            assert "Betty's estimate before it was submitted: 31.4 GiB per GPU, under the 40 GiB of a A100-40GB" in shown
            betty.runner.kill(BABYSITTER_ID)
            await until("the withdrawal to be recorded", lambda: "Not resubmitted: the card was withdrawn" in
                        region(workspace, original))
            assert betty.cards() == [] and len(betty.ledger.all()) == 1
        finally:
            await betty.close()

    run_scenario(scenario)


def test_the_babysitter_is_off_until_enabled(workspace, config):
    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            original = await betty.submit(MEMORY_HOG.format(name="unwatched", root=workspace.root), "no babysitter")
            await until("the watcher to record the end", lambda: betty.ledger.get(original.slug).finished)
            for _ in range(3):  # ticks that would have queued and claimed a run
                betty.runner.tick()
                await asyncio.sleep(0.2)
            assert betty.runner.store.get(BABYSITTER_ID).status == "paused"
            assert betty.runs() == [] and betty.cards() == []
            assert betty.experiment(original.slug).diagnosis is None
            assert "## Diagnosis" not in region(workspace, original)
        finally:
            await betty.close()

    run_scenario(scenario)


def test_a_resubmission_names_a_job_betty_recorded(workspace, config):
    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            desk = await betty.assistant.session("test-desk")
            script = MEMORY_HOG.format(name="never", root=workspace.root)
            outcome = await desk.run_tool("cluster_submit", {"script": script, "goal": "g", "replaces": "999999"},
                                          "a test")
            assert not outcome.ok and betty.cards() == []
            assert "replaces: job 999999 was not submitted through Betty on betty-dev" in outcome.summary
            assert "\n" not in outcome.summary
        finally:
            await betty.close()

    run_scenario(scenario)


def test_a_failed_pipeline_step_is_proposed_again_with_the_steps_after_it_only(workspace, config):
    """prep → train (out of time) → eval: Slurm cancels eval, the record says so, and the one card runs train again
    with the time its progress asks for, then eval; prep, which succeeded, is not run again."""
    tag = f"babysat-{uuid.uuid4().hex[:6]}"
    root = workspace.root

    def step(name: str, body: str) -> str:
        return f"#!/bin/bash\n#SBATCH --job-name={tag}-{name}\n#SBATCH --chdir={root}\n#SBATCH --time=2\n{body}\n"

    train = SLEEPER.format(name=f"{tag}-train", root=root)
    steps = [{"name": "prep", "script": step("prep", f"echo prep >> {root}/ran.txt")},
             {"name": "train", "script": train},
             {"name": "eval", "script": step("eval", f"echo eval >> {root}/ran.txt")}]

    async def scenario() -> None:
        betty = Betty(workspace, config)
        slurm = None
        again = None
        try:
            betty.runner.resume(BABYSITTER_ID)
            desk = await betty.assistant.session("test-desk")
            slurm = desk.context.slurm
            call = asyncio.ensure_future(desk.run_tool("cluster_pipeline", {"steps": steps, "goal": "prep, train, eval",
                                                                            "name": tag}, "a test"))
            first = (await until("the pipeline's card", lambda: betty.cards(None)))[0]
            betty.assistant.respond(first.approval_id, "approved", "the researcher")
            outcome = await call
            assert outcome.ok, outcome.summary
            original = outcome.data
            prep_job, train_job, eval_job = original.chain["jobs"]
            run = (await until("the babysitter's run", lambda: [r for r in betty.runs()
                                                               if r.status not in ("queued", "running")]))[0]
            assert "proposed a resubmission" in (run.result or ""), (run.status, run.result)
            card = (await until("the babysitter's card", lambda: betty.cards(f"job babysitter: job {train_job}")))[0]
            chain = betty.experiment(original.slug).chain
            assert [s["why"] for s in chain["segments"]] == ["done", "failed", "not run: train failed"], chain
            recorded = betty.experiment(original.slug).diagnosis
            assert recorded["cause"] == "timeout" and recorded["step"] == {"name": "train", "job_id": train_job}
            assert card.tool == "cluster_pipeline" and card.args["replaces"] == train_job
            assert [s["name"] for s in card.args["steps"]] == ["train", "eval"], card.args
            assert card.args["steps"][0]["script"] == recorded["corrected_script"] != train
            shown = card.args["steps"][1]
            assert (shown["name"], shown["script"], shown["after"], shown["aftercorr"]) == (
                "eval", steps[2]["script"], ["train"], [])
            assert card.preview.details["replaces"]["experiment"] == original.slug
            assert "## Diagnosis" in region(workspace, original)
            betty.assistant.respond(card.approval_id, "approved", "the researcher")
            await until("the resubmission", lambda: (betty.experiment(original.slug).diagnosis or {})
                        .get("resubmission", {}).get("state") == "submitted")
            again = betty.experiment(betty.experiment(original.slug).diagnosis["resubmission"]["slug"])
            assert [s["name"] for s in again.chain["steps"]] == ["train", "eval"]
            assert [s["after"] for s in again.chain["steps"]] == [[], ["train"]]
            assert again.replaces == {"slug": original.slug, "job_id": train_job}
            assert (root / "ran.txt").read_text().split() == ["prep"]
        finally:
            for ident in (again.chain or {}).get("jobs") or [] if again is not None and slurm is not None else []:
                await slurm.cancel(ident)  # the rerun of a 200 s step is not waited for
            await betty.close()

    run_scenario(scenario)
