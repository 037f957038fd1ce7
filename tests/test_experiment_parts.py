"""Pieces of the experiment record that need no cluster: names, numbers, pages, the watcher's pace."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import date

import pytest

from betty_jupyter.cluster.slurm import Snapshot
from betty_jupyter.errors import TransportError
from betty_jupyter.experiments import content
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.metrics_table import parse_metrics
from betty_jupyter.experiments.record import new_slug, slugify
from betty_jupyter.experiments.watcher import JobWatcher
from betty_jupyter.experiments.workspace import Workspace


def experiment(slug: str = "2026-11-22-lora", job_id: str = "42") -> Experiment:
    return Experiment(slug=slug, job_id=job_id, cluster="betty-dev", submitted="2026-11-22T10:00:00",
                      goal="Fine-tune Llama 3 8B with LoRA", script="#!/bin/bash\necho hi\n",
                      script_path="/home/u/.betty/scripts/2026-11-22-lora.sbatch", partition="gpu",
                      resources={"gpus": "1 × h100"})


@pytest.mark.parametrize(
    ("text", "slug"),
    [("Fine-tune Llama 3 (LoRA)", "fine-tune-llama-3-lora"), ("Ünïcödé run", "unicode-run"), ("Ø-test", "test"),
     ("../../etc/passwd", "etc-passwd"), ("", "job"), ("💥", "job"), ("a" * 100, "a" * 48)],
)
def test_slugs_are_plain_and_safe(text, slug):
    assert slugify(text) == slug


def test_a_second_experiment_of_the_same_name_that_day_gets_a_number(tmp_path):
    workspace = Workspace.at(tmp_path)
    ledger = Ledger(workspace.ledger_path)
    day = date(2026, 11, 22)
    first = new_slug(workspace, ledger, "lora", day)
    ledger.add(experiment(slug=first))
    (workspace.notebooks).mkdir(parents=True)
    workspace.notebook_path(f"{first}-2").write_text("{}")  # a stray notebook also counts as taken
    assert first == "2026-11-22-lora"
    assert new_slug(workspace, ledger, "lora", day) == "2026-11-22-lora-3"


def test_numbers_the_job_printed_become_columns():
    frame = parse_metrics("step=1 loss=0.5 lr=3e-4\nloading data\nstep=2 loss=0.25 acc: 0.9\nhost=node01 version=2.1.0\n")
    assert list(frame.columns) == ["step", "loss", "lr"]  # `acc: 0.9` and `version=2.1.0` are no NAME=NUMBER
    assert frame["loss"].tolist() == [0.5, 0.25] and frame["lr"].iloc[0] == pytest.approx(3e-4)


def test_the_notebook_is_valid_and_its_cells_name_the_job():
    import nbformat

    book = content.notebook(experiment())
    nbformat.validate(nbformat.from_dict(book))
    sources = "\n".join(cell["source"] for cell in book["cells"])
    assert 'status("42", cluster="betty-dev")' in sources and "echo hi" in sources
    tagged = [cell for cell in book["cells"] if content.STATUS_TAG in cell["metadata"].get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"


def test_the_auto_region_shows_the_log_only_for_failures():
    failed = content.auto_region(experiment(), None, "FAILED", log_tail="Traceback: boom")
    done = content.auto_region(experiment(), None, "COMPLETED", log_tail="all good")
    assert "**FAILED**" in failed and "Traceback: boom" in failed
    assert "**COMPLETED**" in done and "all good" not in done
    assert failed.startswith("## Status") and "## Runtime" in failed


def test_the_watcher_backs_off_when_nothing_changes_and_more_on_errors(tmp_path):
    workspace = Workspace.at(tmp_path)
    Ledger(workspace.ledger_path).add(experiment())

    def broken(cluster: str):
        raise TransportError("the link is down")

    watcher = JobWatcher(workspace, broken, min_interval=2.0, max_interval=60.0)
    asyncio.run(watcher.tick())
    assert watcher.interval == 8.0  # an error: four times slower
    watcher._adjust_interval(changed=False, troubled=False)
    assert watcher.interval == 16.0
    watcher._adjust_interval(changed=True, troubled=False)
    assert watcher.interval == 2.0
    for _ in range(10):
        watcher._adjust_interval(changed=False, troubled=False)
    assert watcher.interval == 60.0


class QuietSlurm:
    """A cluster on which no watched job changes."""

    async def snapshot(self, job_ids):
        return Snapshot({}, "", ())


def test_a_submission_is_checked_after_2_4_8_seconds_then_every_interval(tmp_path):
    workspace = Workspace.at(tmp_path)
    ledger = Ledger(workspace.ledger_path)
    ledger.add(experiment())
    watcher = JobWatcher(workspace, lambda cluster: QuietSlurm())  # type: ignore[arg-type, return-value]
    paces = []
    for _ in range(7):
        asyncio.run(watcher.tick())
        paces.append(watcher.interval)
    assert paces == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    ledger.add(experiment(slug="2026-11-22-second", job_id="43"))
    asyncio.run(watcher.tick())
    assert watcher.interval == 2.0, "a new submission starts the fast checks again"


def test_a_waiting_watcher_wakes_for_a_new_submission(tmp_path):
    workspace = Workspace.at(tmp_path)
    ledger = Ledger(workspace.ledger_path)
    ledger.add(experiment())
    watcher = JobWatcher(workspace, lambda cluster: QuietSlurm(), min_interval=0.05,  # type: ignore[arg-type, return-value]
                         max_interval=60.0)

    async def wait_then_submit() -> float:
        await watcher.tick()
        watcher.interval = 60.0
        began = time.monotonic()
        waiting = asyncio.ensure_future(watcher._wait(asyncio.Event()))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        ledger.add(experiment(slug="2026-11-22-second", job_id="43"))
        await asyncio.wait_for(waiting, timeout=30)
        return time.monotonic() - began

    assert asyncio.run(wait_then_submit()) < 30


def test_a_change_is_one_line_and_the_same_as_data():
    from betty_jupyter.cluster.jobs import Job, JobState
    from betty_jupyter.experiments.watcher import JobUpdate

    job = Job(job_id="42", name="lora", user="ada", partition="gpu", state=JobState.COMPLETED)
    update = JobUpdate(experiment(), "RUNNING", "COMPLETED", job, ("page", "notebook"))
    assert update.line() == "job 42 (2026-11-22-lora): RUNNING → COMPLETED; page and notebook updated"
    assert update.record() == {"job_id": "42", "experiment": "2026-11-22-lora", "cluster": "betty-dev",
                               "previous": "RUNNING", "state": "COMPLETED", "page": "wiki/experiments/2026-11-22-lora.md",
                               "notebook": "notebooks/experiments/2026-11-22-lora.ipynb",
                               "updated": ["page", "notebook"], "notebook_open": False}
    assert "betty experiments repair" in JobUpdate(experiment(), "RUNNING", "FAILED", job).line()
    held = JobUpdate(experiment(), "RUNNING", "COMPLETED", job, ("page",), notebook_open=True).line()
    assert held == ("job 42 (2026-11-22-lora): RUNNING → COMPLETED; page updated; the notebook is open in JupyterLab: "
                    "Betty's panel puts the status in it, your next save writes it")


def test_leases_go_to_one_watcher_until_they_expire(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add(experiment())
    assert [t.experiment.job_id for t in ledger.claim("first", lease_seconds=60)] == ["42"]
    assert ledger.claim("second", lease_seconds=60) == []
    assert not ledger.set_state("2026-11-22-lora", "second", "RUNNING", False)
    assert ledger.set_state("2026-11-22-lora", "first", "RUNNING", False)
    ledger.claim("first", lease_seconds=-1)  # its heartbeat stopped long ago
    assert [t.state for t in ledger.claim("second", lease_seconds=60)] == ["RUNNING"]
    ledger.set_state("2026-11-22-lora", "second", "COMPLETED", True)
    assert ledger.claim("third", lease_seconds=60) == []  # finished jobs are nobody's


def test_a_goal_that_starts_blank_still_describes_the_page():
    from dataclasses import replace

    assert content.page_frontmatter(replace(experiment(), goal="\n\n  Sweep the learning rate\nmore"))["description"] == \
        "Sweep the learning rate"
    assert content.page_frontmatter(replace(experiment(), goal=""))["description"] == "Slurm job 42"


def test_an_end_without_an_exit_code_waits_for_accounting_then_is_taken(tmp_path):
    from betty_jupyter.cluster.jobs import Job, JobState
    from betty_jupyter.experiments.ledger import Tracked

    watcher = JobWatcher(Workspace.at(tmp_path), lambda cluster: None)  # type: ignore[arg-type, return-value]
    tracked = Tracked(experiment(), "RUNNING", False)
    ended = Job(job_id="42", name="lora", user="ada", partition="gpu", state=JobState.FAILED)
    assert watcher._unsettled_end(tracked, ended), "FAILED with no exit code yet: wait for accounting"
    settled = Job(job_id="42", name="lora", user="ada", partition="gpu", state=JobState.FAILED, exit_code="3:0")
    assert not watcher._unsettled_end(tracked, settled)
    watcher.settle_seconds = 0.0
    assert not watcher._unsettled_end(tracked, ended), "after the grace, the end is recorded without one"
    running = Job(job_id="42", name="lora", user="ada", partition="gpu", state=JobState.RUNNING)
    assert not watcher._unsettled_end(tracked, running)


def test_the_submission_table_says_what_was_asked_in_a_persons_units():
    asked = dataclasses.replace(experiment(), resources={"time_minutes": 1505, "memory_bytes": 104857600,
                                                         "gpus": "1 × h100", "cpus_per_task": "4"})
    table = next(cell["source"] for cell in content.notebook(asked)["cells"] if cell["source"].startswith("## Submission"))
    rows = dict(line.strip("| ").split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line
                and line != "| | |")
    assert rows["time limit"] == "1-01:05:00" and rows["memory"] == "100 MiB"
    assert rows["gpus"] == "1 × h100" and rows["cpus per task"] == "4" and rows["submitted"] == "2026-11-22 10:00:00"
    assert "104857600" not in table and "minutes" not in table and "bytes" not in table


def test_the_notebook_holds_what_its_kernel_writes_so_it_opens_clean():
    """JupyterLab writes the kernel's kernelspec and language_info into a notebook when the kernel starts; Betty's
    notebook already holds the same, so it does not open marked unsaved. Compared with a real python3 kernel."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    metadata = content.notebook(experiment())["metadata"]
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert metadata["kernelspec"] == {"name": "python3", "display_name": spec.display_name, "language": spec.language}
    kernel = KernelManager(kernel_name="python3")
    kernel.start_kernel()
    try:
        client = kernel.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        client.kernel_info()
        reply = client.get_shell_msg(timeout=120)
        while reply["msg_type"] != "kernel_info_reply":
            reply = client.get_shell_msg(timeout=120)
        client.stop_channels()
    finally:
        kernel.shutdown_kernel(now=True)
    assert metadata["language_info"] == reply["content"]["language_info"]
