"""Continuation chains on the real dev cluster: a loop longer than its time limit finishes through segments that
checkpoint and resume, recorded as one experiment; a chain stops at its cap."""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from betty_jupyter.agent.models import ToolOutcome
from betty_jupyter.agent.tools import ToolContext
from betty_jupyter.agent.tools.catalog import ClusterStatus, ClusterSubmit
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.watcher import JobWatcher
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace

from conftest import ssh_profile_in

pytestmark = pytest.mark.cluster

STEPS = 360
FAKE_NVIDIA_SMI = Path(__file__).parent / "data" / "fake-nvidia-smi"
"""Steps of half a second: three minutes of work, three times a segment's one-minute limit."""

LOOP = """\
import os, signal, sys, time
checkpoint, out = sys.argv[1], sys.argv[2]
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
step = int(open(checkpoint).read()) if os.path.exists(checkpoint) else 0
print(f"resuming at step {{step}}", flush=True)
while step < {steps}:
    if stop:
        print(f"checkpoint at step {{step}}", flush=True)
        sys.exit(0)
    time.sleep(0.5)
    with open(out, "a") as done:
        done.write(f"{{step}}\\n")
    step += 1
    with open(checkpoint + ".new", "w") as saved:
        saved.write(str(step))
    os.replace(checkpoint + ".new", checkpoint)
print("all steps done", flush=True)
"""


def open_context(profile, folder: Path) -> ToolContext:
    init_workspace(folder / "project")
    context = ToolContext.open(profile, Workspace.at(folder / "project"), "test-session")
    context.slurm.lookup_interval = 0.5
    return context


@pytest.fixture
def ctx(ssh_profile, tmp_path: Path):
    context = open_context(ssh_profile, tmp_path)
    yield context
    run_sync(context.close())


@dataclass
class Started:
    """A chain submitted when the module starts, so the chains run side by side while each test waits for its own."""

    ctx: ToolContext
    folder: Path
    args: dict
    outcome: ToolOutcome
    ledger_after_card: bool
    """Whether the project had a ledger once the card was shown (a card writes nothing)."""


@pytest.fixture(scope="module")
def chains(dev_cluster, tmp_path_factory):
    """The long chain (ten segments' cap, three minutes of work) and the capped one (two segments), both started."""
    started = {}
    for key, goal, segments in (("long", "Run a loop three times its limit", 10),
                                ("capped", "Stop at two segments", 2)):
        folder = tmp_path_factory.mktemp(key)
        context = open_context(ssh_profile_in(dev_cluster, folder), folder)
        args = {"script": loop_script(folder, f"{key}-{uuid.uuid4().hex[:6]}"), "goal": goal, "segments": segments,
                "checkpoint_seconds": 20}
        if key == "capped":  # each segment measures its GPU peak, against a stand-in nvidia-smi
            args.update(script=measured_loop_script(folder, args["script"]), measure_gpu_peak=True)
        card = run_sync(ClusterSubmit().dry_run(context, args)) if key == "long" else None
        shown = context.workspace.ledger_path.exists()
        started[key] = (Started(context, folder, args, run_sync(ClusterSubmit().execute(context, args)), shown), card)
    yield started
    for chain, _ in started.values():
        run_sync(chain.ctx.close())


def loop_script(folder: Path, name: str) -> str:
    (folder / "loop.py").write_text(LOOP.format(steps=STEPS))
    return (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=1\n#SBATCH --chdir={folder}\n"
            f"#SBATCH --output={folder}/segment-%j.out\n"
            f"betty_run python3 {folder}/loop.py {folder}/step {folder}/steps.txt\n")


def measured_loop_script(folder: Path, script: str) -> str:
    """``script`` run with the stand-in nvidia-smi first on its PATH, reporting 2048 MiB used."""
    tools = folder / "bin"
    tools.mkdir()
    shutil.copy(FAKE_NVIDIA_SMI, tools / "nvidia-smi")
    (tools / "memory-used").write_text("2048\n")
    first, _, rest = script.partition("\n")
    return f"{first}\n#SBATCH --export=ALL,PATH={tools}:/usr/local/bin:/usr/bin:/bin\n{rest}"


def watch_chain(ctx, limit: float) -> Ledger:
    """Tick a watcher until the chain's experiment has ended, within ``limit`` seconds."""
    watcher = JobWatcher(ctx.workspace, lambda cluster: ctx.slurm, min_interval=0.5)
    deadline = time.monotonic() + limit
    while not all(t.finished for t in watcher.ledger.all()):
        assert time.monotonic() < deadline, [(t.state, t.experiment.chain) for t in watcher.ledger.all()]
        run_sync(watcher.tick())
        time.sleep(1)  # a tick's pace, not a wait for the chain: the loop ends when the ledger says so
    return watcher.ledger


@pytest.mark.usefixtures("chains")  # first, while the module's chains run beside it
def test_extend_queues_a_continuation_behind_a_running_job_and_says_what_it_cannot_do(ctx, tmp_path) -> None:
    from betty_jupyter.agent.tools.catalog import ClusterExtend

    name = f"extended-{uuid.uuid4().hex[:6]}"
    (tmp_path / "loop.py").write_text(LOOP.format(steps=160))  # 80 s: more than the job's one minute
    text = (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=1\n#SBATCH --chdir={tmp_path}\n"
            f"#SBATCH --output={tmp_path}/segment-%j.out\n"
            f"python3 {tmp_path}/loop.py {tmp_path}/step {tmp_path}/steps.txt\n")
    submitted = run_sync(ClusterSubmit().execute(ctx, {"script": text, "goal": "A run that needs more time"}))
    assert submitted.ok, submitted.summary
    job = submitted.data.job_id

    card = run_sync(ClusterExtend().dry_run(ctx, {"job_id": job, "segments": 2, "checkpoint_seconds": 20}))
    assert f"extend {submitted.data.slug} (job {job}" in card.title and "by up to 2 continuation(s)" in card.title
    honest = card.details["the running job"]
    assert f"job {job} keeps its own time limit" in honest and "started without a checkpoint signal" in honest
    assert "#SBATCH --signal=B:USR1@20" in card.text and "betty_run_script" in card.text
    assert card.details["command"] == f"sbatch --dependency=afterany:{job} …"
    extended = run_sync(ClusterExtend().execute(ctx, {"job_id": job, "segments": 2, "checkpoint_seconds": 20}))
    assert extended.ok, extended.summary

    ledger = watch_chain(ctx, limit=480)
    [tracked] = ledger.all()
    chain = tracked.experiment.chain
    assert chain["jobs"][0] == job and len(chain["jobs"]) == 3
    whys = [segment["why"] for segment in chain["segments"]]
    assert whys[0] == "time limit → continued" and "done" in whys[1:], whys
    assert chain["ended"] == "done"
    steps = [int(line) for line in (tmp_path / "steps.txt").read_text().split()]
    assert set(steps) == set(range(160))  # a step cut off by the limit (no signal) may run again: the card says so


def test_a_loop_three_times_its_limit_finishes_through_continuations_as_one_experiment(chains) -> None:
    started, card = chains["long"]
    ctx, tmp_path, outcome = started.ctx, started.folder, started.outcome
    assert "as a chain of up to 10 segments" in card.title
    assert "#SBATCH --signal=B:USR1@20" in card.text and "betty_run()" in card.text
    chain = card.details["chain"]
    assert chain["segments"].startswith("up to 10 jobs of 1 min each")
    assert chain["cap"].startswith("10 segments") and chain["at most"] == "10 min of wall time"
    assert "--signal=B:USR1@20" in chain["signal"]
    assert not started.ledger_after_card

    assert outcome.ok, outcome.summary
    experiment = outcome.data
    assert len(experiment.chain["jobs"]) == 10 and experiment.job_id == experiment.chain["jobs"][0]

    ledger = watch_chain(ctx, limit=900)
    [tracked] = ledger.all()
    assert tracked.state == "COMPLETED"
    segments = tracked.experiment.chain["segments"]
    whys = [segment["why"] for segment in segments]
    done = whys.index("done")
    assert done >= 2, whys  # three segments or more did the work
    assert whys[:done] == ["time limit → continued"] * done
    assert set(whys[done + 1:]) <= {"not needed"}
    assert tracked.experiment.chain["ended"] == "done"
    assert [int(line) for line in (tmp_path / "steps.txt").read_text().split()] == list(range(STEPS))

    page = (ctx.workspace.wiki / experiment.page).read_text()
    assert "### Segments" in page and "the chain ended: **done**" in page
    for segment in segments[:done + 1]:
        assert f"| {segment['job_id']} |" in page
    notebook = (ctx.workspace.root / experiment.notebook).read_text()
    assert "chain ended: done" in notebook and "segments(" in notebook

    later = segments[done]["job_id"]
    status = run_sync(ClusterStatus().execute(ctx, {"job_id": later}))
    assert status.ok and f"segment {done + 1} job {later} done" in status.summary
    assert all(not (tmp_path / f"segment-{s['job_id']}.out").exists()
               or "resuming" not in (tmp_path / f"segment-{s['job_id']}.out").read_text()
               for s in segments[done + 1:])  # cancelled, or exited at once


def test_a_chain_stops_at_its_cap(chains) -> None:
    started, _ = chains["capped"]
    ctx, tmp_path, outcome = started.ctx, started.folder, started.outcome
    assert outcome.ok, outcome.summary

    ledger = watch_chain(ctx, limit=480)
    [tracked] = ledger.all()
    assert [s["why"] for s in tracked.experiment.chain["segments"]] == ["time limit → continued", "cap reached"]
    assert tracked.experiment.chain["ended"] == "cap reached"
    steps = [int(line) for line in (tmp_path / "steps.txt").read_text().split()]
    assert steps == list(range(len(steps))) and 0 < len(steps) < STEPS
    jobs = tracked.experiment.chain["jobs"]
    peak = tracked.experiment.gpu_peak or {}
    assert list(peak.get("segments") or {}) == jobs and peak.get("peak_mib") == 2048, peak
    assert all(segment.get("peak_mib") == 2048 for segment in peak["segments"].values()), peak
    page = (ctx.workspace.wiki / tracked.experiment.page).read_text()
    assert f"per segment: job {jobs[0]} 2.0 GiB, job {jobs[1]} 2.0 GiB" in page
