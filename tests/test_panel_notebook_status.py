"""An experiment notebook open in the browser while its job ends: the person's unsaved edit and Betty's final status
both reach the file, through JupyterLab's own save, with no "File Changed" dialog.

A real job on the dev cluster waits until the test lets it end; the Jupyter server's own watcher
notices the end; Debian's Chromium runs JupyterLab with Betty's extension. The watcher must leave
the open notebook's file alone (the panel holds it open) and the panel must put the status into
the open document, so the save writes both.
"""

from __future__ import annotations

import json
import time
import urllib.error

import nbformat
import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    REPO,
    WAIT_MS,
    lab,
    page,
    screenshot,
    screenshot_on_failure,
    served_panel_build,
)
from playwright.sync_api import Page, expect
from test_server_support import job_state, scancel

from betty_jupyter.experiments.editors import OpenNotebooks
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.status_cell import shown_state
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty

NOTE = "# my own note, typed while the job ran"
CELL_OF_STATUS, CELL_EDITED = 4, 7  # the notebook's cells: content.notebook()


def until(condition, what: str, timeout: float = WAIT_MS / 1000):  # type: ignore[no-untyped-def]
    """Wait for ``condition()`` to be truthy (its value), failing with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.2)
    return value


def submit_waiting_job(project: dict, release: str) -> tuple[str, str]:  # type: ignore[type-arg]
    """``betty submit`` in the project a job that runs until ``release`` exists; (job id, notebook path)."""
    script = project["root"] / "waits.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name=open-notebook\n#SBATCH --time=00:05:00\n#SBATCH --mem=50M\n"
                      f"while [ ! -e {release} ]; do sleep 0.2; done; echo step=1 loss=0.5\n")
    submitted = run_betty("submit", str(script), "--yes", "--dir", str(project["root"]), env=project["env"])
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    [tracked] = [t for t in Ledger(Workspace.at(project["root"]).ledger_path).all()
                 if t.experiment.script.endswith(f"while [ ! -e {release} ]; do sleep 0.2; done; echo step=1 loss=0.5\n")]
    return tracked.experiment.job_id, tracked.experiment.notebook


def test_an_unsaved_edit_and_the_final_status_both_survive_a_job_ending_while_the_notebook_is_open(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        project: dict) -> None:  # type: ignore[type-arg]  # noqa: F811
    workspace = Workspace.at(project["root"])
    release = project["root"] / "release-the-job"
    job_id, notebook = submit_waiting_job(project, str(release))
    path = workspace.root / notebook
    try:
        with screenshot_on_failure(page, "failure", prefix="notebook-status"):
            # The server's watcher writes RUNNING into the file before anyone opens it (nothing changes after it
            # until the test lets the job end), so the tab reads the file Betty last wrote.
            until(lambda: shown_state(nbformat.read(path, as_version=4),
                                      Ledger(workspace.ledger_path).get(job_id).experiment) == "RUNNING",  # type: ignore[union-attr]
                  "the server's watcher to write RUNNING into the notebook")
            page.goto(f"{lab.url}lab/tree/{notebook}?reset&token={lab.token}")
            cells = page.locator(".jp-NotebookPanel .jp-Cell")
            expect(cells.nth(CELL_EDITED)).to_be_visible()
            built = json.loads((REPO / "betty_jupyter" / "labextension" / "package.json").read_text())
            assert served_panel_build(page) == built["jupyterlab"]["_build"]["load"], (
                "this JupyterLab serves another build of Betty's extension: reinstall with .venv/bin/pip install -e .")
            until(lambda: OpenNotebooks(workspace.ledger_path).is_open(notebook), "the panel to hold the notebook open")

            editor = cells.nth(CELL_EDITED).locator(".cm-content")
            editor.click()
            page.keyboard.press("Control+End")
            page.keyboard.type("\n" + NOTE)
            expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(1)
            on_disk = path.read_bytes()

            release.touch()
            until(lambda: Ledger(workspace.ledger_path).get(job_id).finished,  # type: ignore[union-attr]
                  "the server's watcher to see the job end")
            assert path.read_bytes() == on_disk, "the watcher rewrote a notebook open in JupyterLab"

            status = cells.nth(CELL_OF_STATUS).locator(".jp-OutputArea-output")
            expect(status).to_contain_text(f"job {job_id} on betty-dev: COMPLETED")
            expect(editor).to_contain_text(NOTE)
            screenshot(page, "1-status-in-the-open-notebook", prefix="notebook-status")

            page.keyboard.press("Escape")
            page.keyboard.press("Control+s")  # JupyterLab's own save, as autosave runs it
            expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
            expect(page.locator(".jp-Dialog")).to_have_count(0)  # no "File Changed": nothing else wrote the file

            book = nbformat.read(path, as_version=4)
            assert NOTE in book.cells[CELL_EDITED].source
            tracked = Ledger(workspace.ledger_path).get(job_id)
            assert tracked is not None and shown_state(book, tracked.experiment) == "COMPLETED"
            repaired = run_betty("experiments", "repair", "--dir", str(workspace.root), env=project["env"])
            assert repaired.returncode == 0, repaired.stdout
            assert repaired.stdout.startswith("every recorded experiment has its page and notebook"), repaired.stdout
            screenshot(page, "2-saved", prefix="notebook-status")
    finally:
        release.touch()
        if job_state(dev_cluster, job_id):
            scancel(dev_cluster, job_id)


def test_the_open_notebooks_route_takes_only_well_formed_words(lab: JupyterServer) -> None:  # noqa: F811
    hostile = ["../../../etc/passwd", "a'; echo x.ipynb", "<img src=x onerror=alert(1)>.ipynb"]
    answer = lab.request("PUT", "notebooks/open", {"holder": "hostile-page-1", "notebooks": hostile})
    assert answer == {"notebooks": [], "changes": []}
    for body in ({"holder": "x", "notebooks": []}, {"holder": "a\nb" * 4, "notebooks": []},
                 {"holder": "well-formed-page", "notebooks": ["a"] * 501}):
        with pytest.raises(urllib.error.HTTPError) as refused:
            lab.request("PUT", "notebooks/open", body)
        assert refused.value.code == 400
