"""Pipelines on the real dev cluster: preprocess → train (a job array) → evaluate run in order, each step once,
recorded as one experiment; an array runs after an array task by task (aftercorr) and a step may ask singleton;
when a step fails or leaves a named output missing, the steps after it are cancelled, none left waiting."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path

import pytest

from betty_jupyter.agent.tools.catalog import ClusterPipeline, ClusterStatus
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.errors import BettyError
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.watcher import JobWatcher

from conftest import run_betty, ssh, ssh_profile_in
from test_long_runs_cluster import open_context

pytestmark = pytest.mark.cluster


def step_script(folder: Path, name: str, body: str, extra: str = "") -> str:
    return (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=2\n#SBATCH --chdir={folder}\n{extra}"
            f"#SBATCH --output={folder}/%x-%j.out\n{body}\n")


def pipeline_args(folder: Path, key: str, tag: str) -> dict:
    """The steps of each pipeline the module runs: ``whole`` and ``failing`` (prep → train array → eval), ``corr``
    (an array after an array task by task, then a singleton step) and ``missing`` (prep leaves one of its two named
    outputs out, and a symlink out of the person's folders)."""
    ran = f">> {folder}/ran.txt"
    if key == "corr":
        return {"goal": "pipeline corr", "name": tag, "steps": [
            {"name": "split", "script": step_script(folder, f"{tag}-split",  # task 1 ends well after task 0
                                                    f"sleep $((SLURM_ARRAY_TASK_ID * 20)); "
                                                    f"echo split-$SLURM_ARRAY_TASK_ID {ran}", "#SBATCH --array=0-1\n")},
            {"name": "train", "aftercorr": ["split"],
             "script": step_script(folder, f"{tag}-train", f"grep -q split-$SLURM_ARRAY_TASK_ID {folder}/ran.txt && "
                                                           f"echo train-$SLURM_ARRAY_TASK_ID {ran}",
                                   "#SBATCH --array=0-1\n")},
            {"name": "report", "singleton": True, "script": step_script(folder, f"{tag}-report", f"echo report {ran}")},
        ]}
    if key == "missing":
        return {"goal": "pipeline missing", "name": tag, "steps": [
            {"name": "prep", "outputs": ["made.txt", "missing.txt"],
             "script": step_script(folder, f"{tag}-prep", "echo x > made.txt; ln -s /etc/passwd link.txt")},
            {"name": "train", "script": step_script(folder, f"{tag}-train", f"sleep 100; echo train {ran}")},
            {"name": "eval", "script": step_script(folder, f"{tag}-eval", f"echo eval {ran}")},
        ]}
    first = "exit 3" if key == "failing" else f"echo prep {ran}"
    return {"goal": f"pipeline {key}", "name": tag, "steps": [
        {"name": "prep", "script": step_script(folder, f"{tag}-prep", first)},
        {"name": "train", "script": step_script(folder, f"{tag}-train", f"echo train-$SLURM_ARRAY_TASK_ID {ran}",
                                                "#SBATCH --array=0-1\n")},
        {"name": "eval", "script": step_script(folder, f"{tag}-eval", f"echo eval {ran}")},
    ]}


@pytest.fixture(scope="module")
def pipelines(dev_cluster, tmp_path_factory):
    """Every pipeline submitted at once, so they run side by side while each test waits for its own."""
    started = {}
    for key in ("whole", "failing", "corr", "missing"):
        folder = tmp_path_factory.mktemp(key)
        context = open_context(ssh_profile_in(dev_cluster, folder), folder)
        tag = f"{key}-{uuid.uuid4().hex[:6]}"
        args = pipeline_args(folder, key, tag)
        card = run_sync(ClusterPipeline().dry_run(context, args)) if key in ("whole", "corr") else None
        started[key] = (context, folder, run_sync(ClusterPipeline().execute(context, args)), card)
    yield started
    for context, _, outcome, _ in started.values():
        for ident in (outcome.data.chain or {}).get("jobs") or [] if outcome.ok else []:
            try:  # a test that failed early leaves nothing queued behind it
                run_sync(context.slurm.cancel(ident))
            except BettyError:
                pass  # ended already
        run_sync(context.close())


def watch(context, limit: float) -> Ledger:
    """Tick a watcher until the pipeline's experiment has ended, within ``limit`` seconds."""
    watcher = JobWatcher(context.workspace, lambda cluster: context.slurm, min_interval=0.5)
    deadline = time.monotonic() + limit
    while not all(t.finished for t in watcher.ledger.all()):
        assert time.monotonic() < deadline, [(t.state, t.experiment.chain) for t in watcher.ledger.all()]
        run_sync(watcher.tick())
        time.sleep(1)  # a tick's pace, not a wait for the jobs: the loop ends when the ledger says so
    return watcher.ledger


def test_every_step_runs_once_in_order_and_the_record_shows_each(pipelines) -> None:
    context, folder, outcome, card = pipelines["whole"]
    assert outcome.ok, outcome.summary
    preview = card
    assert "# ==== step train (after prep) ====" in preview.text and "#SBATCH --array=0-1" in preview.text
    assert preview.details["pipeline"]["edges"] == ("prep starts at once; train after prep (--dependency=afterok); "
                                                    "eval after train (--dependency=afterok)")
    assert preview.details["commands"]["eval"].startswith(
        "sbatch --dependency=afterok:$train_job --kill-on-invalid-dep=yes ")
    ledger = watch(context, 240)
    (tracked,) = ledger.all()
    chain = tracked.experiment.chain
    assert chain["ended"] == "done", chain
    assert [s["why"] for s in chain["segments"]] == ["done", "done", "done"]
    ran = (folder / "ran.txt").read_text().split()
    assert ran[0] == "prep" and ran[-1] == "eval" and sorted(ran[1:3]) == ["train-0", "train-1"] and len(ran) == 4
    page = (context.workspace.wiki / tracked.experiment.page).read_text()
    assert "### Steps" in page and "| eval | train |" in page
    eval_job = chain["jobs"][-1]
    assert ledger.of_segment(tracked.experiment.cluster, eval_job).experiment.slug == tracked.experiment.slug
    status = run_sync(ClusterStatus().execute(context, {"job_id": eval_job}))
    assert "step prep job" in status.summary and "step eval job" in status.summary, status.summary


def test_the_steps_after_a_failed_one_are_cancelled_not_left_waiting(pipelines) -> None:
    context, folder, outcome, _ = pipelines["failing"]
    assert outcome.ok, outcome.summary
    ledger = watch(context, 240)
    (tracked,) = ledger.all()
    chain = tracked.experiment.chain
    assert [s["why"] for s in chain["segments"]] == ["failed", "not run: prep failed",
                                                       "not run: train did not finish"], chain
    assert chain["ended"] == "failed"
    assert not (folder / "ran.txt").exists()
    queue = run_sync(context.slurm.snapshot(chain["jobs"]))
    assert all(queue.jobs[ident].state.finished for ident in chain["jobs"])

def test_an_array_runs_after_an_array_task_by_task_and_the_card_names_each_edges_kind(pipelines) -> None:
    context, folder, outcome, card = pipelines["corr"]
    assert outcome.ok, outcome.summary
    edges = card.details["pipeline"]["edges"]
    assert "train aftercorr split (--dependency=aftercorr: task by task" in edges and "report after train" in edges
    assert "singleton" in edges and "# ==== step report (after train; singleton) ====" in card.text
    assert card.details["commands"]["train"].startswith("sbatch --dependency=aftercorr:$split_job ")
    assert card.details["commands"]["report"].startswith("sbatch --dependency=afterok:$train_job,singleton ")
    ledger = watch(context, 240)
    (tracked,) = ledger.all()
    chain = tracked.experiment.chain
    assert [s["why"] for s in chain["segments"]] == ["done", "done", "done"], chain
    ran = (folder / "ran.txt").read_text().split()
    assert sorted(ran[:4]) == ["split-0", "split-1", "train-0", "train-1"] and ran[-1] == "report", ran
    assert ran.index("train-0") < ran.index("split-1"), ran  # task by task: train 0 did not wait for split 1
    page = (context.workspace.wiki / tracked.experiment.page).read_text()
    assert "| train | split (aftercorr) |" in page and "| report | train, singleton |" in page, page


def test_a_named_output_left_missing_stops_the_steps_after_it_with_the_path_named(pipelines) -> None:
    from betty_jupyter.cluster.step_outputs import first_missing

    context, folder, outcome, _ = pipelines["missing"]
    assert outcome.ok, outcome.summary
    ledger = watch(context, 240)
    (tracked,) = ledger.all()
    chain = tracked.experiment.chain
    missing = f"output {folder}/missing.txt is missing"
    assert chain["steps"][0]["missing"] == missing
    assert [s["why"] for s in chain["segments"]] == [f"done, but {missing}", f"not run: prep's {missing}",
                                                       "not run: train did not finish"], chain
    assert chain["ended"] == "failed" and not (folder / "ran.txt").exists()
    assert chain["jobs"][1] in chain["steps"][0]["stopped"]
    prep = run_sync(context.slurm.snapshot(chain["jobs"][:1])).jobs[chain["jobs"][0]]
    refused = run_sync(first_missing(context.slurm, prep, ["made.txt", "link.txt"]))
    assert refused.startswith(f"output {folder}/link.txt cannot be checked: ") and "/etc/passwd" in refused \
        and "outside the readable roots" in refused, refused


def test_betty_pipeline_names_steps_after_their_files_and_takes_edges_from_after(dev_cluster, tmp_path: Path) -> None:
    config = tmp_path / "betty.json"
    profile = {"name": "devssh", "transport": "ssh", "host": dev_cluster["BETTY_DEV_SSH_HOST"],
               "ssh_config": dev_cluster["BETTY_DEV_SSH_CONFIG"], "work_dir": str(tmp_path / "work")}
    config.write_text(json.dumps({"BettyConfig": {"clusters": [profile]}}))
    env = {**os.environ, "BETTY_CONFIG": str(config), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter")}
    project = tmp_path / "project"
    assert run_betty("init", str(project), env=env).returncode == 0
    tag = uuid.uuid4().hex[:6]
    files = []
    for name in ("prep", "train", "report"):
        (tmp_path / f"{name}.sbatch").write_text(step_script(tmp_path, f"cli-{tag}-{name}", "sleep 300"))
        files.append(str(tmp_path / f"{name}.sbatch"))
    wrong = run_betty("pipeline", *files, "--after", "nothing=prep", "--yes", "--dir", str(project), env=env)
    assert wrong.returncode != 0 and "--after 'nothing=prep': write STEP=A,B with STEP one of prep, train, report" \
        in wrong.stderr
    done = run_betty("pipeline", *files, "--after", "train=", "report=prep,train", "--singleton", "report", "--yes",
                     "--dir", str(project), env=env)
    assert done.returncode == 0, done.stderr
    assert "edges: prep starts at once; train starts at once; report after prep and train" in done.stderr
    assert "(--dependency=singleton" in done.stderr
    jobs = dict(re.findall(r"^step (\w+): job (\d+)$", done.stdout, re.MULTILINE))
    try:
        assert set(jobs) == {"prep", "train", "report"}, done.stdout
        report = ssh(dev_cluster, f"scontrol -o show job {jobs['report']}").stdout
        assert f"afterok:{jobs['prep']}" in report and f"afterok:{jobs['train']}" in report, report
        assert "Dependency=(null)" in ssh(dev_cluster, f"scontrol -o show job {jobs['train']}").stdout
    finally:
        ssh(dev_cluster, f"scancel {' '.join(jobs.values())}")
