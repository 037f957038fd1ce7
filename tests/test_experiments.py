"""The full experiment record against the real dev cluster: submit, page, notebook, watcher, repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from betty_jupyter.cluster.job_efficiency import summary_line
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.sync import Blocking, run_sync
from betty_jupyter.errors import ExperimentError, SlurmError
from betty_jupyter.experiments.efficiency import page_section
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.record import submit_experiment
from betty_jupyter.experiments.watcher import JobWatcher
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import AUTO_END, AUTO_START, WikiStore
from conftest import REPO, run_betty

pytestmark = pytest.mark.cluster

CLUSTER = "betty-dev"  # the name the dev cluster's own config gives it


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    made = run_betty("init", str(tmp_path / "project"))
    assert made.returncode == 0, made.stderr
    return Workspace.at(tmp_path / "project")


@pytest.fixture
def slurm(ssh_profile):
    transport = ssh_profile.open_transport()
    yield SlurmClient(transport, work_dir=ssh_profile.work_dir)
    run_sync(transport.close())


def script(body: str, name: str, chdir: Path) -> str:
    return f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --chdir={chdir}\n{body}\n"


def submit(slurm, workspace, body: str, name: str = "lora-run", goal: str = "Fine-tune with LoRA"):
    return run_sync(submit_experiment(slurm, workspace, CLUSTER, script(body, name, workspace.root), goal=goal))


def watch_until_finished(workspace, slurm, timeout: float = 120) -> JobWatcher:
    """Tick the watcher until every watched job has ended. ``timeout`` guards against a hang from the moment all
    have started: before that the shared queue decides (an earlier test's jobs may hold the node), under a longer
    guard whose failure names what the queue held."""
    watcher = JobWatcher(workspace, lambda cluster: slurm, min_interval=0.5)
    queued_by = time.monotonic() + 420
    deadline = None
    while any(not t.finished for t in watcher.ledger.all()):
        started = all(t.state not in ("PENDING", None) for t in watcher.ledger.all())
        if started and deadline is None:
            deadline = time.monotonic() + timeout
        if deadline is None:
            assert time.monotonic() < queued_by, queue_now(slurm)
        else:
            assert time.monotonic() < deadline, [(t.experiment.job_id, t.state) for t in watcher.ledger.all()]
        run_sync(watcher.tick())
        time.sleep(0.5)
    return watcher


def queue_now(slurm) -> list[tuple[object, ...]]:
    """Every job in the queue, whoever's: id, user, state, reason, name."""
    return [(row.get("job_id"), row.get("user"), row.get("state"), row.get("reason"), row.get("name"))
            for row in run_sync(slurm.queue_rows())]


def outside_markers(text: str) -> tuple[str, str]:
    """The body before and after Betty's region (the frontmatter's `status` is Betty's too)."""
    body = text.split("\n---\n", 1)[1]
    before, rest = body.split(AUTO_START, 1)
    return before, rest.split(AUTO_END, 1)[1]


def test_a_submission_writes_page_notebook_log_and_index(slurm, workspace):
    import nbformat

    experiment = submit(slurm, workspace, "echo step=1 loss=0.5")
    store = WikiStore(workspace.wiki)
    page = store.read(experiment.page)
    assert page.frontmatter["job_id"] == experiment.job_id and page.frontmatter["type"] == "experiment"
    assert page.frontmatter["cluster"] == CLUSTER and "Fine-tune with LoRA" in page.body
    book = nbformat.read(workspace.root / experiment.notebook, as_version=4)
    nbformat.validate(book)
    assert book.metadata["betty"]["job_id"] == experiment.job_id
    log = store.read("log.md").text
    assert log.count(f"job {experiment.job_id} ") == 1
    assert f"({experiment.page})" in store.read("index.md").text
    assert experiment.slug.endswith("-lora-run")


def test_nothing_is_written_when_sbatch_refuses(slurm, workspace):
    before = sorted(p.relative_to(workspace.root) for p in workspace.root.rglob("*") if p.is_file())
    log = (workspace.wiki / "log.md").read_text()
    with pytest.raises(SlurmError, match="Requested node configuration is not available"):
        run_sync(submit_experiment(slurm, workspace, CLUSTER,
                                   "#!/bin/bash\n#SBATCH -p gpu --gres=gpu:h100:9\ntrue\n", goal="too big"))
    after = sorted(p.relative_to(workspace.root) for p in workspace.root.rglob("*")
                   if p.is_file() and ".betty" not in p.parts)
    assert after == [p for p in before if ".betty" not in p.parts]
    assert (workspace.wiki / "log.md").read_text() == log
    assert Ledger(workspace.ledger_path).all() == []


def test_the_watcher_completes_the_page_and_leaves_the_persons_text_alone(slurm, workspace):
    import nbformat

    experiment = submit(slurm, workspace, "echo step=1 loss=0.5; sleep 2; echo step=2 loss=0.25")
    page_path = workspace.wiki / experiment.page
    edited = page_path.read_text().replace("Fine-tune with LoRA", "Fine-tune with LoRA — rank 16, *my* notes")
    edited = edited.replace("_What did this run teach you? Betty never changes this section._",
                            "Loss halves by step 2.\n\n## Status (my own heading, not Betty's)\nkeep me")
    page_path.write_text(edited)
    watch_until_finished(workspace, slurm)
    final = page_path.read_text()
    assert outside_markers(final) == outside_markers(edited)
    status = final.split(AUTO_START, 1)[1].split(AUTO_END, 1)[0]
    assert "**COMPLETED**" in status and "elapsed 00:00:0" in status and "exit code 0:0" in status
    assert WikiStore(workspace.wiki).read(experiment.page).frontmatter["status"] == "COMPLETED"
    book = nbformat.read(workspace.root / experiment.notebook, as_version=4)
    outputs = [c.outputs for c in book.cells if "betty-status" in c.metadata.get("tags", [])][0]
    assert outputs[0]["text"].startswith(f"job {experiment.job_id} on {CLUSTER}: COMPLETED")


def test_a_failed_job_shows_failed_with_the_end_of_its_log(slurm, workspace):
    experiment = submit(slurm, workspace, "echo 'Traceback: CUDA out of memory' >&2; exit 3", name="crash")
    watch_until_finished(workspace, slurm)
    status = (workspace.wiki / experiment.page).read_text().split(AUTO_START, 1)[1].split(AUTO_END, 1)[0]
    assert "**FAILED**" in status and "exit code 3:0" in status
    assert "Traceback: CUDA out of memory" in status


def test_an_array_experiment_ends_when_all_its_tasks_have_and_shows_the_failed_tasks_log(slurm, workspace):
    import nbformat

    body = ('#SBATCH --array=0-2\necho "task $SLURM_ARRAY_TASK_ID"\n'
            'if [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then echo "task 1: loss is NaN" >&2; exit 3; fi')
    experiment = submit(slurm, workspace, body, name="sweep")
    watch_until_finished(workspace, slurm)
    status = (workspace.wiki / experiment.page).read_text().split(AUTO_START, 1)[1].split(AUTO_END, 1)[0]
    assert "**FAILED**" in status and "exit code 3:0" in status and "3 tasks: 2 COMPLETED, 1 FAILED" in status
    assert "task 1: loss is NaN" in status  # the log shown is the failed task's
    assert [t.state for t in Ledger(workspace.ledger_path).all()] == ["FAILED"]
    accounting = Blocking(slurm).history([experiment.job_id])
    assert sorted(accounting["state"].astype(str)) == ["COMPLETED", "COMPLETED", "FAILED"]  # as Slurm has them
    book = nbformat.read(workspace.root / experiment.notebook, as_version=4)
    outputs = [c.outputs for c in book.cells if "betty-status" in c.metadata.get("tags", [])][0]
    assert "3 tasks: 2 COMPLETED, 1 FAILED" in outputs[0]["text"]


def test_one_sacct_per_tick_for_all_watched_jobs(slurm, workspace):
    seen: list[tuple[str, ...]] = []
    real_run = slurm.transport.run

    async def recording_run(argv, timeout=60.0, *, idempotent=True):
        seen.append(tuple(argv))
        return await real_run(argv, timeout, idempotent=idempotent)

    for number in range(3):
        submit(slurm, workspace, "sleep 30", name=f"batch-{number}")
    slurm.transport.run = recording_run
    watcher = JobWatcher(workspace, lambda cluster: slurm)
    run_sync(watcher.tick())
    assert [argv[0] for argv in seen].count("sacct") == 1
    for tracked in watcher.ledger.all():
        Blocking(slurm).cancel(tracked.experiment.job_id)


def test_the_tick_that_records_ended_jobs_reads_their_efficiency_from_its_one_sacct(slurm, workspace):
    # Jobs that hold 50 MiB for longer than accounting's sampling interval, so each has a recorded peak.
    body = ("#SBATCH --mem=200M\npython3 -c 'import time; x = bytearray(50 * 2**20); "
            "x[::4096] = b\"x\" * len(x[::4096]); time.sleep(5)'")
    ended = [submit(slurm, workspace, body, name=f"ended-{number}") for number in range(2)]
    # Accounting has both ended, with their steps' peaks, before the watcher looks (as after a night away).
    deadline = time.monotonic() + 180  # a guard against a hang, not a measurement
    figures: dict = {}
    while not (len(figures) == 2 and all(job.memory_peak_bytes is not None for job in figures.values())):
        assert time.monotonic() < deadline, figures
        time.sleep(0.5)
        figures = {job.job_id: job for job in Blocking(slurm).efficiency([run.job_id for run in ended])}
    seen: list[tuple[str, ...]] = []
    real_run = slurm.transport.run

    async def recording_run(argv, timeout=60.0, *, idempotent=True):
        seen.append(tuple(argv))
        return await real_run(argv, timeout, idempotent=idempotent)

    slurm.transport.run = recording_run
    watcher = JobWatcher(workspace, lambda cluster: slurm)
    updates = run_sync(watcher.tick())
    assert sorted(update.experiment.job_id for update in updates) == sorted(figures)
    assert [argv[0] for argv in seen].count("sacct") == 1, seen
    for run in ended:
        record = watcher.ledger.get(run.slug).experiment.efficiency
        assert record is not None and record["line"] == summary_line(figures[run.job_id])
        assert record["job"] == figures[run.job_id].as_dict()
        assert page_section(record) in (workspace.wiki / run.page).read_text()


def test_a_record_that_failed_after_sbatch_names_the_job_and_repair_rebuilds_it(slurm, workspace):
    blocker = workspace.wiki / "experiments"
    for page in blocker.iterdir():
        page.unlink()
    blocker.rmdir()
    blocker.write_text("a file where the experiments folder should be")
    with pytest.raises(ExperimentError, match=r"job \d+ was submitted, but its record could not be written") as failed:
        submit(slurm, workspace, "echo repaired")
    job_id = failed.value.args[0].split()[1]
    assert [t.experiment.job_id for t in Ledger(workspace.ledger_path).all()] == [job_id]
    blocker.unlink()
    repaired = run_betty("experiments", "repair", "--dir", str(workspace.root))
    assert repaired.returncode == 0 and f"job {job_id}: wrote experiments/" in repaired.stdout
    watch_until_finished(workspace, slurm)
    tracked = Ledger(workspace.ledger_path).get(job_id)
    assert tracked is not None and tracked.state == "COMPLETED"
    assert "**COMPLETED**" in (workspace.wiki / tracked.experiment.page).read_text()


def test_a_killed_watcher_is_taken_over_and_every_change_is_applied_once(slurm, workspace, dev_cluster):
    # The job runs until the test releases it, so the first watcher sees it run however slowly it starts.
    release = workspace.root / "release-the-job"
    experiment = submit(slurm, workspace, f"while [ ! -e {release} ]; do sleep 0.2; done; echo done", name="takeover")
    env = {**os.environ, "BETTY_CONFIG": dev_cluster["BETTY_CONFIG"]}
    watch = [sys.executable, "-m", "betty_jupyter.cli", "watch", "--dir", str(workspace.root),
             "--interval", "0.5", "--lease", "3"]
    first = subprocess.Popen(watch, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    deadline = time.monotonic() + 120
    try:
        while Ledger(workspace.ledger_path).get(experiment.job_id).state != "RUNNING":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the first watcher never saw the job run"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first_lines = first.communicate()[0].splitlines()
    release.touch()
    second = subprocess.Popen(watch, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        while not Ledger(workspace.ledger_path).get(experiment.job_id).finished:  # type: ignore[union-attr]
            assert time.monotonic() < deadline + 60, "the second watcher never finished the job"
            time.sleep(0.2)
    finally:
        second.send_signal(signal.SIGINT)  # Ctrl-C stops `betty watch` between two checks
        try:
            second_lines = second.communicate(timeout=30)[0].splitlines()
        except subprocess.TimeoutExpired:
            second.kill()
            second.communicate()
            raise AssertionError("`betty watch` went on after Ctrl-C") from None
    assert second.returncode == 0
    assert [line for line in first_lines + second_lines if f"({experiment.slug})" in line] == [
        f"job {experiment.job_id} ({experiment.slug}): {change}; page and notebook updated"
        for change in ("PENDING → RUNNING", "RUNNING → COMPLETED")]
    assert "**COMPLETED**" in (workspace.wiki / experiment.page).read_text()


def test_the_experiment_notebook_runs_top_to_bottom(slurm, workspace, dev_cluster, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    experiment = submit(slurm, workspace, "for i in 1 2 3; do echo step=$i loss=0.$((9 - i)); done")
    watch_until_finished(workspace, slurm)
    monkeypatch.setenv("BETTY_CONFIG", dev_cluster["BETTY_CONFIG"])
    path = workspace.root / experiment.notebook
    book = nbformat.read(path, as_version=4)
    NotebookClient(book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    printed = "".join(o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.outputs)
    assert f"job {experiment.job_id}" in printed and "COMPLETED" in printed
    assert "step=3 loss=0.6" in printed
    analysis = book.cells[-1].outputs
    table = [o["data"]["text/plain"] for o in analysis if o["output_type"] == "execute_result"][0]
    assert "loss" in table and "0.6" in table
    assert any("image/png" in o.get("data", {}) for o in analysis)  # the plot of the numbers


def test_a_job_that_ends_while_its_notebook_is_open_leaves_the_file_and_betty_watch_says_so(slurm, workspace,
                                                                                            dev_cluster):
    import nbformat

    from betty_jupyter.experiments.editors import OpenNotebooks
    from betty_jupyter.experiments.status_cell import shown_state

    experiment = submit(slurm, workspace, "echo done", name="open-notebook")
    path = workspace.root / experiment.notebook
    book = nbformat.read(path, as_version=4)
    book.cells[0].source = "# my notes, saved before the job ended"
    nbformat.write(book, path)
    OpenNotebooks(workspace.ledger_path).hold("page-one", [experiment.notebook], seconds=600)
    before = path.read_bytes()
    env = {**os.environ, "BETTY_CONFIG": dev_cluster["BETTY_CONFIG"]}
    once = ("watch", "--once", "--dir", str(workspace.root))

    changes: list[dict[str, object]] = []
    deadline = time.monotonic() + 180
    while not any(change["state"] == "COMPLETED" for change in changes):
        assert time.monotonic() < deadline, changes
        checked = run_betty(*once, "--json", env=env)
        assert checked.returncode == 0, checked.stderr
        changes += [change for change in json.loads(checked.stdout) if "previous" in change]
    [ended] = [change for change in changes if change["state"] == "COMPLETED"]
    assert ended["notebook_open"] and ended["updated"] == ["page"]
    assert path.read_bytes() == before, "the open notebook's file is the person's"
    assert "**COMPLETED**" in (workspace.wiki / experiment.page).read_text()

    told = run_betty(*once, env=env).stdout
    assert f"job {experiment.job_id} ({experiment.slug}): the notebook is open in JupyterLab" in told, told
    OpenNotebooks(workspace.ledger_path).hold("page-one", [])
    caught = run_betty(*once, env=env).stdout
    assert f"({experiment.slug}): notebook's status brought up to COMPLETED" in caught, caught
    book = nbformat.read(path, as_version=4)
    assert book.cells[0].source == "# my notes, saved before the job ended"
    assert shown_state(book, experiment) == "COMPLETED"
    assert run_betty(*once, env=env).stdout.strip() == "nothing changed"
