"""A job that keeps being preempted, on the real dev cluster: a job submitted with ``--requeue`` is preempted three
times by jobs of a QOS allowed to; the job babysitter then proposes, on one card, moving the waiting job to the
partition where the advisor's ``sbatch --test-only`` says it starts soonest, moves nothing by itself, and approving
the card moves it (same job id)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from betty_jupyter.agent.automations.babysitter import BABYSITTER_ID
from betty_jupyter.experiments.chain import interruption_count
from test_babysitter import Betty, config, until, workspace  # noqa: F401 (fixtures)
from test_preemption_cluster import admin, more_than_half_the_memory, preempting_qos  # noqa: F401 (fixture)

pytestmark = pytest.mark.cluster


def test_a_job_preempted_three_times_gets_one_card_moving_it_to_another_partition(workspace, config, admin):
    low, high = preempting_qos(admin)
    memory = more_than_half_the_memory(admin)
    script = (f"#!/bin/bash\n#SBATCH --job-name=preempted-{uuid.uuid4().hex[:6]}\n#SBATCH --partition=cpu\n"
              f"#SBATCH --time=5\n#SBATCH --qos={low}\n#SBATCH --mem={memory}M\n#SBATCH --chdir={workspace.root}\n"
              "betty_run sleep 280\n")

    async def preempt(ident: str) -> None:
        """One preemption by a job of the preempting QOS; the requeued job let start again at once unless asked."""
        urgent = admin.submit(f"--qos={high}", f"--mem={memory}M", "--time=1", "--wrap", "sleep 2")
        await asyncio.to_thread(admin.wait_for, ident, lambda state, reason: state == "PENDING", 60)
        await asyncio.to_thread(admin.wait_for, urgent, lambda state, reason: state in ("RUNNING", ""), 60)

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            betty.runner.resume(BABYSITTER_ID)
            experiment = await betty.submit(script, "keeps being preempted", requeue=True, checkpoint_seconds=20)
            ident = experiment.job_id
            admin.jobs.append(ident)
            for count in (1, 2, 3):
                await until(f"run {count}", lambda: betty.ledger.get(experiment.slug).state == "RUNNING")
                await preempt(ident)
                await until(f"interruption {count} recorded",
                            lambda: interruption_count(betty.experiment(experiment.slug)) == count)
                if count < 3:  # Slurm holds a requeued job back for two minutes; the first two start again now
                    assert betty.cards() == []  # fewer than three interruptions: nothing proposed
                    admin.run("scontrol", "update", f"JobId={ident}", "StartTime=now")

            task = f"job babysitter: job {ident} keeps being preempted"
            (card,) = await until("the move card", lambda: betty.cards(task))
            assert (card.tool, card.args) == ("cluster_move", {"job_id": ident, "partition": "gpu"})
            assert card.preview.details["from"] == "cpu" and card.preview.details["interrupted"].startswith("3×")
            assert card.preview.text == f"scontrol update JobId={ident} Partition=gpu"
            record = betty.experiment(experiment.slug).preemption
            assert record["state"] == "proposed" and record["to"] == "gpu" and record["count"] == 3
            assert record["estimate"].startswith("starts"), record
            assert "partition=cpu" in admin.run("squeue", "-h", "-j", ident, "-o", "partition=%P")  # nothing moved yet

            betty.assistant.respond(card.approval_id, "approved", "the researcher")
            await until("the move", lambda: (betty.experiment(experiment.slug).preemption or {}).get("state")
                        == "moved")
            assert "partition=gpu" in admin.run("squeue", "-h", "-j", ident, "-o", "partition=%P")
            assert betty.experiment(experiment.slug).preemption["approver"] == "the researcher"
            log = (workspace.wiki / "log.md").read_text()
            assert f"job {ident} ({experiment.slug}) was preempted 3× on cpu; proposes moving it to gpu" in log
            assert f"moved job {ident} ({experiment.slug}) from cpu to gpu" in log

            # Slurm moves only a waiting job: asked again once it runs, the tool says so before any card
            desk = await betty.assistant.session("test-desk")
            again = await desk.run_tool("cluster_move", {"job_id": ident, "partition": "gpu"}, "a test")
            assert not again.ok and f"job {ident} is on gpu already" in again.summary
            admin.run("scontrol", "update", f"JobId={ident}", "StartTime=now")
            await asyncio.to_thread(admin.wait_for, ident, lambda state, reason: state == "RUNNING", 60)
            running = await desk.run_tool("cluster_move", {"job_id": ident, "partition": "cpu"}, "a test")
            assert not running.ok and f"job {ident} is RUNNING, not waiting" in running.summary
            assert betty.cards() == []
        finally:
            await betty.close()

    asyncio.run(scenario())
