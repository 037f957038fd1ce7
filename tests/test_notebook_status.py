"""Betty never races a person's editor: an experiment notebook open in JupyterLab keeps its file as the person has it.

The panel's word that a notebook is open is a lease any process reads; the watcher leaves such a
file alone and marks it behind, writes it once it is closed, and ``betty experiments repair`` finds
and fixes a notebook whose status cell says another state than its job's. A real job on the dev
cluster: ``tests/test_experiments.py``; the browser's side: ``tests/test_panel_notebook_status.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import nbformat

from betty_jupyter.experiments import content
from betty_jupyter.experiments.editors import OpenNotebooks
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.record import write_record
from betty_jupyter.experiments.status_cell import Outcome, repair_status, shown_state
from betty_jupyter.experiments.watcher import JobWatcher
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki.seed import init_workspace
from conftest import REPO, run_betty
from watcher_support import EndedSlurm

NOTEBOOK = "notebooks/experiments/2026-11-25-lora.ipynb"
EDIT = "# 2026-11-25-lora\n\nMy own notes: the loss plateaued at step 40."


def experiment(job_id: str = "42", cluster: str = "betty-dev") -> Experiment:
    return Experiment(slug="2026-11-25-lora", job_id=job_id, cluster=cluster, submitted="2026-11-25T10:00:00",
                      goal="Fine-tune with LoRA", script="#!/bin/bash\necho hi\n",
                      script_path="/home/u/.betty/scripts/2026-11-25-lora.sbatch", partition="debug")


def recorded(root: Path, job_id: str = "42", cluster: str = "betty-dev") -> tuple[Workspace, Ledger, Experiment]:
    """A workspace with one recorded experiment: its page, its notebook (with the person's edit), the ledger."""
    init_workspace(root)
    workspace = Workspace.at(root)
    ledger = Ledger(workspace.ledger_path)
    record = experiment(job_id, cluster)
    ledger.add(record)
    write_record(workspace, record)
    path = workspace.root / record.notebook
    book = nbformat.read(path, as_version=4)
    book.cells[0].source = EDIT
    nbformat.write(book, path)
    return workspace, ledger, record


def notebook(workspace: Workspace) -> nbformat.NotebookNode:
    return nbformat.read(workspace.root / NOTEBOOK, as_version=4)


def test_a_lease_is_seen_by_every_process_until_it_runs_out_or_the_page_closes_the_notebook(tmp_path):
    leases = OpenNotebooks(tmp_path / "ledger.sqlite")
    leases.hold("page-one", [NOTEBOOK])
    asked = [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from betty_jupyter.experiments.editors import OpenNotebooks; "
             "print(OpenNotebooks(Path(sys.argv[1])).is_open(sys.argv[2]))", str(tmp_path / "ledger.sqlite"), NOTEBOOK]
    assert subprocess.run(asked, capture_output=True, text=True, check=True, cwd=REPO).stdout.strip() == "True"
    leases.hold("page-two", [NOTEBOOK])
    leases.hold("page-one", [])  # one page closed it; the other still has it open
    assert leases.is_open(NOTEBOOK)
    leases.hold("page-two", [NOTEBOOK], seconds=-1)  # that page went away without a word long ago
    assert not leases.is_open(NOTEBOOK)
    assert subprocess.run(asked, capture_output=True, text=True, check=True, cwd=REPO).stdout.strip() == "False"


def test_the_watcher_leaves_an_open_notebook_alone_and_writes_it_once_it_is_closed(tmp_path):
    workspace, ledger, record = recorded(tmp_path)
    OpenNotebooks(workspace.ledger_path).hold("page-one", [NOTEBOOK])
    before = (workspace.root / NOTEBOOK).read_bytes()
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    watcher.settle_seconds = 0
    [update] = asyncio.run(watcher.tick())
    assert update.notebook_open and update.written == ("page",)
    assert (workspace.root / NOTEBOOK).read_bytes() == before, "an open notebook's file is the person's"
    [check] = watcher.catch_up()
    assert (check.outcome, check.shown, check.state) == (Outcome.OPEN, None, "COMPLETED")
    assert "open in JupyterLab" in check.line() and "still says no state, not COMPLETED" in check.line()

    OpenNotebooks(workspace.ledger_path).hold("page-one", [])
    [check] = watcher.catch_up()
    assert check.outcome is Outcome.WRITTEN
    book = notebook(workspace)
    assert book.cells[0].source == EDIT and shown_state(book, record) == "COMPLETED"
    assert watcher.catch_up() == [] and ledger.notebooks_behind() == []


def test_a_notebook_saved_from_jupyterlab_with_the_status_in_it_is_not_written_again(tmp_path):
    workspace, ledger, record = recorded(tmp_path)
    OpenNotebooks(workspace.ledger_path).hold("page-one", [NOTEBOOK])
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    watcher.settle_seconds = 0
    asyncio.run(watcher.tick())
    book = notebook(workspace)  # what the person's save writes: their edits and the status the panel put in
    book.cells[1].source += "\n\nMore notes."
    [status] = [cell for cell in book.cells if content.STATUS_TAG in cell.metadata.get("tags", [])]
    status.outputs = [nbformat.v4.new_output("stream", name="stdout", text=ledger.notebook_status(record.slug) + "\n")]
    nbformat.write(book, workspace.root / NOTEBOOK)
    saved = (workspace.root / NOTEBOOK).read_bytes()
    assert watcher.catch_up() == [] and ledger.notebooks_behind() == []
    OpenNotebooks(workspace.ledger_path).hold("page-one", [])
    assert watcher.catch_up() == [] and (workspace.root / NOTEBOOK).read_bytes() == saved


def test_repair_finds_a_stale_status_and_fixes_only_that_cell(tmp_path):
    workspace, ledger, record = recorded(tmp_path)
    ledger.claim("a watcher", lease_seconds=60)
    ledger.set_state(record.slug, "a watcher", "COMPLETED", True)  # the file never heard (the bug this guards)
    running = notebook(workspace)
    [status] = [cell for cell in running.cells if content.STATUS_TAG in cell.metadata.get("tags", [])]
    status.outputs = [nbformat.v4.new_output("stream", name="stdout", text="job 42 on betty-dev: RUNNING\n")]
    nbformat.write(running, workspace.root / NOTEBOOK)

    [check] = repair_status(workspace)
    assert (check.outcome, check.shown, check.state) == (Outcome.WRITTEN, "RUNNING", "COMPLETED")
    book = notebook(workspace)
    assert shown_state(book, record) == "COMPLETED"
    assert [cell.source for cell in book.cells] == [cell.source for cell in running.cells]
    assert repair_status(workspace) == [], "a current notebook is left as it is"


def test_betty_experiments_repair_says_what_it_did_and_fails_while_a_stale_notebook_is_open(tmp_path):
    workspace, ledger, record = recorded(tmp_path)
    ledger.claim("a watcher", lease_seconds=60)
    ledger.set_state(record.slug, "a watcher", "FAILED", True)
    OpenNotebooks(workspace.ledger_path).hold("page-one", [NOTEBOOK])
    before = (workspace.root / NOTEBOOK).read_bytes()

    held = run_betty("experiments", "repair", "--dir", str(workspace.root))
    assert held.returncode == 1, held.stdout + held.stderr
    assert held.stdout.strip() == (
        "job 42 (2026-11-25-lora): the notebook is open in JupyterLab and its file still says no state, not FAILED; "
        "Betty's panel has put the status in the open notebook: save it there (or close it and Betty writes the file)")
    assert (workspace.root / NOTEBOOK).read_bytes() == before

    OpenNotebooks(workspace.ledger_path).hold("page-one", [])
    fixed = run_betty("experiments", "repair", "--dir", str(workspace.root))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.strip() == "job 42 (2026-11-25-lora): notebook's status brought up to FAILED (the file said no state)"
    again = run_betty("experiments", "repair", "--dir", str(workspace.root))
    assert again.stdout.strip().startswith("every recorded experiment has its page and notebook")
    assert notebook(workspace).cells[0].source == EDIT


def test_an_unreadable_or_hostile_path_from_the_panel_holds_nothing(tmp_path):
    leases = OpenNotebooks(tmp_path / "ledger.sqlite")
    hostile = ["../../etc/passwd", "a'; echo x.ipynb", "a\n0.ipynb"]
    leases.hold("page-one", hostile)
    assert all(leases.is_open(path) for path in hostile)  # only names: nothing is read or written through them
    assert not leases.is_open(NOTEBOOK)


def test_a_running_watcher_says_when_it_wrote_a_notebook_that_was_closed(tmp_path):
    workspace, ledger, record = recorded(tmp_path)
    OpenNotebooks(workspace.ledger_path).hold("page-one", [NOTEBOOK])
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm(), min_interval=0.01)  # type: ignore[arg-type, return-value]
    watcher.settle_seconds = 0
    asyncio.run(watcher.tick())
    OpenNotebooks(workspace.ledger_path).hold("page-one", [])
    stop = asyncio.Event()
    written: list[str] = []

    def heard(check) -> None:  # type: ignore[no-untyped-def]
        written.append(check.line())
        stop.set()

    watcher.subscribe_written(heard)
    asyncio.run(asyncio.wait_for(watcher.run(stop), timeout=60))
    assert written == ["job 42 (2026-11-25-lora): notebook's status brought up to COMPLETED (the file said no state)"]


def test_a_notebook_written_after_the_watcher_saw_its_job_change_gets_the_state_at_the_next_check(tmp_path):
    init_workspace(tmp_path)
    workspace = Workspace.at(tmp_path)
    ledger = Ledger(workspace.ledger_path)
    record = experiment()
    ledger.add(record)  # the submission's record: the ledger first, its files a moment later
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    watcher.settle_seconds = 0
    [update] = asyncio.run(watcher.tick())
    assert update.written == () and not update.notebook_open
    write_record(workspace, record)
    assert shown_state(notebook(workspace), record) is None
    [check] = watcher.catch_up()
    assert check.outcome is Outcome.WRITTEN and shown_state(notebook(workspace), record) == "COMPLETED"
