"""Betty's widgets in JupyterLab, in Debian's Chromium: labels shown whole, and a saved notebook that is
reopened after a kernel restart shows the record of who approved what, not "model not found"; after a
restart of the Jupyter server the queue, the history and the GPU calculator show their tables and
estimate as static records.

The notebook runs under ``jupyter lab`` with Betty's extension, against the dev cluster. Screenshots go to
``test-artifacts/screenshots/notebook-*.png``.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server_proc import JupyterServer
from notebook_support import SCRIPT, llm, project  # noqa: F401 (fixtures)
from conftest import ssh
from panel_support import WAIT_MS, lab, page, screenshot, screenshot_on_failure, start_lab  # noqa: F401 (fixtures)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, scancel

NAME = "records.ipynb"
RESTARTED = "restarted.ipynb"
CELLS = ["%load_ext betty_jupyter",
         f"%%betty submit --slug browsed --goal 'kept after a restart'\n{SCRIPT.format(name='browsed', seconds=300)}",
         "%betty gpu calculator",
         "%betty squeue --me"]
# What a person reads is cut off when its box is narrower than its text (ipywidgets then shows "Ref…").
CUT_OFF = """root => [...root.querySelectorAll('.widget-button, .widget-toggle-button, .widget-label')]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim())"""
PRECISION = """root => [...root.querySelectorAll('.widget-dropdown')]
    .filter(e => e.querySelector('.widget-label')?.textContent === 'precision')
    .map(e => (e.querySelector('select').selectedOptions[0]?.textContent ?? '').replace(/\u00a0/g, ' '))"""


def test_a_saved_notebook_reopened_after_a_restart_shows_who_approved_what(
        lab: JupyterServer, project: dict[str, Any], dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    path = Path(project["root"]) / NAME
    path.write_text(nbformat.writes(book))
    job: str | None = None
    with screenshot_on_failure(page, "failure", prefix="notebook"):
        try:
            notebook = open_notebook(page, lab)
            menu(page, "Run", "Run All Cells")
            approve = notebook.locator(".betty-approve")
            expect(approve).to_be_visible()
            expect(notebook.locator(".betty-gpu-chart")).to_be_visible()
            expect(notebook.locator(".betty-job-table")).to_be_visible()
            assert notebook.evaluate(PRECISION) == ["framework default"], "the precision dropdown shows its default"
            assert notebook.evaluate(CUT_OFF) == [], "every button and label shows its whole text"
            screenshot(page, "1-card-calculator-table", prefix="notebook")
            approve.click()
            record = notebook.locator(".jp-OutputArea-output", has_text="approved by")
            expect(record).to_contain_text("submitted job")
            job = record.inner_text().split("submitted job ", 1)[1].split()[0]
            expect(record.locator(".betty-approve")).to_have_count(0)
            page.keyboard.press("Control+s")
            saved_with(path, "submitted job")
            menu(page, "Kernel", "Restart Kernel…")
            page.locator(".jp-Dialog").get_by_role("button", name="Confirm Kernel Restart").click()
            expect(page.locator(".jp-Dialog")).to_have_count(0)

            notebook = open_notebook(page, lab)
            record = notebook.locator(".jp-OutputArea-output", has_text="approved by")
            expect(record).to_contain_text(f"submitted job {job}")
            expect(record).to_contain_text("#SBATCH --job-name=browsed")
            expect(record).not_to_contain_text("model not found")
            screenshot(page, "2-reopened-after-restart", prefix="notebook")
        finally:
            if job is not None and job_state(dev_cluster, job):
                scancel(dev_cluster, job)


def test_the_queue_history_and_gpu_widgets_read_as_records_after_a_server_restart(
        project: dict[str, Any], dev_cluster: dict[str, str], page: Page,  # noqa: F811
        tmp_path_factory: pytest.TempPathFactory) -> None:
    name = f"<b>restart-{uuid.uuid4().hex[:8]}</b>"  # a job's name is anyone's text: it must stay text
    made = ssh(dev_cluster, f"sbatch --parsable --job-name='{name}' --time=10 --wrap 'sleep 300'")
    assert made.returncode == 0, made.stderr
    job = made.stdout.strip().split(";")[0]
    cells = ["%load_ext betty_jupyter", "%betty squeue --me", f"%betty sacct {job}", "%betty gpu calculator"]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    path = Path(project["root"]) / RESTARTED
    path.write_text(nbformat.writes(book))
    config = tmp_path_factory.mktemp("lab-config")
    server = start_lab(project, config, tmp_path_factory.mktemp("runtime"))
    with screenshot_on_failure(page, "failure-server-restart", prefix="notebook"):
        try:
            notebook = open_notebook(page, server, RESTARTED)
            menu(page, "Run", "Run All Cells")
            expect(notebook.locator(".betty-job-table")).to_have_count(2)
            expect(notebook.locator(".betty-job-table", has_text=name).first).to_be_visible()
            expect(notebook.locator(".betty-gpu-chart")).to_be_visible()
            page.keyboard.press("Control+s")
            saved_with(path, "restart-")
            server.stop()
            server = start_lab(project, config, tmp_path_factory.mktemp("runtime"))

            notebook = open_notebook(page, server, RESTARTED)
            outputs = notebook.locator(".jp-OutputArea-output")
            expect(outputs.filter(has_text=job)).to_have_count(2)  # the queue and the history
            records = notebook.locator(".betty-record")
            expect(records).to_have_count(3)
            for record in records.all():
                expect(record).to_be_visible()
            expect(records.nth(0)).to_contain_text(name)  # shown as the text it is
            expect(records.nth(1)).to_contain_text(name)
            assert notebook.locator(".betty-record b", has_text="restart-").count() == 0, "a job name became markup"
            expect(records.nth(2)).to_contain_text("GPU calculator")  # the estimate
            expect(notebook).not_to_contain_text("model not found")
            screenshot(page, "3-reopened-after-server-restart", prefix="notebook")
        finally:
            server.stop()
            if job_state(dev_cluster, job):
                scancel(dev_cluster, job)


def open_notebook(page: Page, lab: JupyterServer, name: str = NAME) -> Locator:
    """JupyterLab with only the notebook ``name`` open, its kernel idle."""
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    notebook = page.locator("#jp-main-dock-panel .jp-NotebookPanel:visible")
    expect(notebook).to_have_count(1)
    expect(page.get_by_role("button", name=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_be_visible()
    return notebook


def menu(page: Page, name: str, item: str) -> None:
    """Choose ``item`` from JupyterLab's menu ``name``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=name).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def saved_with(path: Path, text: str) -> None:
    """Wait until the file on disk holds ``text`` (JupyterLab saves in the background)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"{path.name} was not saved with {text!r}"
        time.sleep(0.2)
