"""Preemption on the real dev cluster: a job submitted with ``--requeue`` (the person agreed) is preempted by a job
of a QOS allowed to preempt it, goes back in the queue under the same id, resumes from its checkpoint and finishes
with every step run once; its record lists the interruption."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from advisor_support import BusyCluster
from betty_jupyter.agent.tools.catalog import ClusterStatus, ClusterSubmit
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.experiments.watcher import JobWatcher

from conftest import ssh_profile_in
from test_long_runs_cluster import open_context

pytestmark = pytest.mark.cluster

STEPS = 60
"""Steps of half a second: half a minute of work."""

LOOP = """\
import os, signal, sys, time
checkpoint, out = sys.argv[1], sys.argv[2]
stop = []
for stopped_by in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(stopped_by, lambda *_: stop.append(1))
step = int(open(checkpoint).read()) if os.path.exists(checkpoint) else 0
print(f"resuming at step {step}", flush=True)
while step < STEPS:
    if stop:
        print(f"checkpoint at step {step}", flush=True)
        sys.exit(0)
    time.sleep(0.5)
    with open(out, "a") as done:
        done.write(f"{step}\\n")
    step += 1
    with open(checkpoint + ".new", "w") as saved:
        saved.write(str(step))
    os.replace(checkpoint + ".new", checkpoint)
print("all steps done", flush=True)
""".replace("STEPS", str(STEPS))


@pytest.fixture
def admin(dev_cluster):
    busy = BusyCluster(dev_cluster)
    yield busy
    busy.close()


def preempting_qos(admin: BusyCluster) -> tuple[str, str]:
    """A QOS whose jobs may be preempted (requeued) and one whose jobs preempt them, both granted to the person."""
    tag = uuid.uuid4().hex[:6]
    low, high = f"betty-low-{tag}", f"betty-high-{tag}"
    admin.run("sacctmgr", "-i", "add", "qos", low, "PreemptMode=requeue")
    admin.run("sacctmgr", "-i", "add", "qos", high, f"Preempt={low}")
    for name in (high, low):  # undone last to first: the QOS that names the other goes first
        admin._undo.append(lambda name=name: admin.run("sacctmgr", "-i", "delete", "qos", name, check=False))
    admin.run("sacctmgr", "-i", "modify", "user", "where", f"name={admin.user}", "set", f"qos+={low},{high}")
    return low, high


def more_than_half_the_memory(admin: BusyCluster) -> int:
    """MB of memory two jobs cannot both have at once: the second needs the first's."""
    node = admin.run("scontrol", "show", "node", "-o")
    real = int(node.split("RealMemory=", 1)[1].split()[0])
    return real // 2 + 256


def tick_until(watcher: JobWatcher, done, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not done():
        assert time.monotonic() < deadline, f"{what}: {[t.experiment.chain for t in watcher.ledger.all()]}"
        run_sync(watcher.tick())
        time.sleep(0.5)  # a tick's pace, not a wait for the job: the loop ends when `done` says so


def test_a_preempted_job_is_requeued_resumes_from_its_checkpoint_and_runs_every_step_once(
        dev_cluster, admin, tmp_path: Path) -> None:
    low, high = preempting_qos(admin)
    memory = more_than_half_the_memory(admin)
    context = open_context(ssh_profile_in(dev_cluster, tmp_path), tmp_path)
    try:
        (tmp_path / "loop.py").write_text(LOOP)
        script = (f"#!/bin/bash\n#SBATCH --job-name=preempted-{low[-6:]}\n#SBATCH --time=3\n#SBATCH --qos={low}\n"
                  f"#SBATCH --mem={memory}M\n#SBATCH --chdir={tmp_path}\n#SBATCH --output={tmp_path}/run-%j.out\n"
                  f"betty_run python3 {tmp_path}/loop.py {tmp_path}/step {tmp_path}/steps.txt\n")
        args = {"script": script, "goal": "resume after preemption", "requeue": True, "checkpoint_seconds": 20}
        card = run_sync(ClusterSubmit().dry_run(context, args))
        assert "#SBATCH --requeue" in card.text and "the record lists each interruption" in card.details["chain"][
            "requeue"]
        outcome = run_sync(ClusterSubmit().execute(context, args))
        assert outcome.ok, outcome.summary
        ident = outcome.data.job_id
        admin.jobs.append(ident)  # cancelled when the test ends, however it ends: no job of it stays queued
        watcher = JobWatcher(context.workspace, lambda cluster: context.slurm, min_interval=0.5)
        steps = tmp_path / "steps.txt"
        tick_until(watcher, lambda: steps.exists() and len(steps.read_text().split()) >= 6, 120, "never ran")

        urgent = admin.submit(f"--qos={high}", f"--mem={memory}M", "--time=1", "--wrap", "sleep 3")
        admin.wait_for(ident, lambda state, reason: state == "PENDING", timeout=60)
        # Slurm holds a requeued job back for two minutes (its BeginTime); the test lets it start now instead
        admin.wait_for(urgent, lambda state, reason: state in ("RUNNING", ""), timeout=60)
        admin.run("scontrol", "update", f"JobId={ident}", "StartTime=now")
        tick_until(watcher, lambda: all(t.finished for t in watcher.ledger.all()), 150, "never finished")

        (tracked,) = watcher.ledger.all()
        (segment,) = tracked.experiment.chain["segments"]
        assert segment["why"] == "done" and len(segment["interruptions"]) == 1, segment
        assert [int(n) for n in steps.read_text().split()] == list(range(STEPS))
        log = (tmp_path / f"run-{ident}.out").read_text()
        assert "starts again after an interruption (restart 1)" in log and "all steps done" in log, log
        page = (context.workspace.wiki / tracked.experiment.page).read_text()
        assert "interrupted 1× (preempted and requeued" in page
        status = run_sync(ClusterStatus().execute(context, {"job_id": ident}))
        assert "interrupted 1×" in status.summary, status.summary
    finally:
        run_sync(context.close())
