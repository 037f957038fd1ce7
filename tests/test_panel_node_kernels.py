"""The Jobs tab's node kernels, in Debian's Chromium against the dev cluster: a running ``%betty kernel`` allocation of
the project shows with its time left, the status bar shows it while the notebook that started it is in front, and its
Stop (after the confirm dialog) cancels the real job; a notebook in JupyterLab runs ``%betty kernel``, its next cell
prints the allocation's ``SLURM_JOB_ID`` (through ports forwarded over the server's own SSH connection: the kernel
logs in nowhere) and, after ``--back``, a cell runs in the notebook's own kernel again. A
screenshot of the row is kept as ``test-artifacts/screenshots/panel-node-kernel.png``."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import cell_run_project, llm  # noqa: F401 (a fixture)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect
from test_node_kernel_notebook import connections
from test_notebook_browser import menu, open_notebook
from test_ssh_transport import dev_cluster_port

from betty_jupyter.agent.tools import ToolContext
from betty_jupyter.agent.tools.catalog import betty_tool
from betty_jupyter.compute.node_kernel import note_notebook_kernel, stage
from betty_jupyter.config import load_config
from betty_jupyter.experiments.workspace import Workspace

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project whose profiles of the dev cluster have an environment ``betty``: this test run's own venv."""
    return cell_run_project(tmp_path_factory.mktemp("panel-kernel"), dev_cluster, llm, {"betty": {"venv": sys.prefix}})


def start_session(lab: JupyterServer, root: Path, path: str) -> str:
    """A notebook ``path`` in ``root`` (where ``lab`` serves from) with a running kernel, as JupyterLab opens one;
    its kernel's id."""
    (root / path).write_text(json.dumps(
        {"cells": [], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
         "nbformat": 4, "nbformat_minor": 5}))
    request = urllib.request.Request(f"{lab.url}api/sessions", method="POST", headers={
        "Authorization": f"token {lab.token}", "Content-Type": "application/json"}, data=json.dumps(
        {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}).encode())
    with urllib.request.urlopen(request, timeout=120) as answer:
        return str(json.load(answer)["kernel"]["id"])


class Tools:
    """The node kernel's tools in the project, as the notebook's approved card and its polls run them (on a loop of
    their own in a thread: Playwright holds this thread's)."""

    def __init__(self, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("BETTY_CONFIG", project["env"]["BETTY_CONFIG"])
        self.workspace = Workspace.at(project["root"])
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.context = ToolContext.open(load_config().profile("betty-dev"), self.workspace, "s-panel-kernel")

    def _run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=120)

    def call(self, name: str, args: dict[str, Any]) -> Any:
        outcome = self._run(betty_tool(name)().execute(self.context, args))
        assert outcome.ok, outcome.summary
        return outcome

    def close(self) -> None:
        self._run(self.context.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture
def tools(project: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Tools]:
    made = Tools(project, monkeypatch)
    yield made
    made.close()


def test_a_running_node_kernel_shows_its_time_left_and_stop_cancels_the_job(lab: JupyterServer, page: Page,
                                                                             tools: Tools, project: dict[str, Any]
                                                                             ) -> None:
    token = stage(tools.workspace.state)
    job_id = tools.call("node_kernel", {"kernel": token, "partition": "cpu", "time": 10, "env": "betty",
                                        "grace": 5}).data["job_id"]
    ref = {"kernel": token, "job_id": job_id}
    try:
        deadline = time.monotonic() + 180  # a guard against a hang on a busy machine, not a measurement
        while tools.call("node_kernel_status", ref).data["state"] != "RUNNING":
            assert time.monotonic() < deadline, "the allocation did not start within 180 s"
            time.sleep(0.5)
        # the notebook that started it: its Jupyter kernel's id is noted beside the node kernel, as the magic does
        notebook_kernel = start_session(lab, Path(project["root"]), "started-it.ipynb")
        note_notebook_kernel(tools.workspace.state, token, f"/run/kernel-{notebook_kernel}.json")
        with screenshot_on_failure(page, "node-kernel-failed"):
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-tab-jobs").click()
            row = panel.locator(f'[data-testid="betty-node-kernel"][data-job="{job_id}"]')
            expect(row.get_by_test_id("betty-node-kernel-left")).to_have_text(
                re.compile(r"^ends at \d\d:\d\d \((9|10) min left\)$"), timeout=60_000)
            status = page.get_by_test_id("betty-node-kernel-status")
            expect(status).to_be_hidden()  # no notebook in front
            page.locator(".jp-DirListing-item", has_text="started-it.ipynb").dblclick()
            expect(status).to_be_visible(timeout=60_000)
            expect(status).to_have_text(re.compile(r"^node kernel: (9|10) min left$"))
            expect(status).to_have_attribute("title", re.compile(rf"^node kernel job {job_id} ends at \d\d:\d\d$"))
            screenshot(page, "node-kernel")

            row.get_by_test_id("betty-node-kernel-stop").click()
            dialog = page.locator(".jp-Dialog")
            expect(dialog).to_contain_text(f"Stop node kernel job {job_id}?")
            dialog.get_by_role("button", name="Stop").click()
            expect(panel.get_by_test_id("betty-node-kernel-note")).to_have_text(
                re.compile(rf"^cancelled job {job_id} on betty-dev"), timeout=60_000)
            expect(row).to_have_count(0)
        deadline = time.monotonic() + 120
        while not (look := tools.call("node_kernel_status", ref).data)["finished"]:
            assert time.monotonic() < deadline, "the allocation did not end within 120 s"
            time.sleep(0.5)
        assert look["state"] == "CANCELLED", look
    finally:
        tools.call("node_kernel_stop", ref)


NODE_CELLS = ["%load_ext betty_jupyter", "%betty use betty-dev",
              "node = %betty kernel --partition cpu --time 10 --env betty --grace 2 --warn 0", "node",
              "_ = node.wait(180)",
              "import os\nprint('on', os.environ['SLURM_JOB_ID'])",
              "%betty kernel --back",
              "import os, socket\nprint('back', os.getpid(), socket.gethostname(), os.environ.get('SLURM_JOB_ID'))",
              "%betty kernel --stop"]


def test_a_notebook_runs_its_next_cells_in_the_allocation_and_back_here(lab: JupyterServer, page: Page,
                                                                         project: dict[str, Any],
                                                                         dev_cluster: dict[str, str]) -> None:
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NODE_CELLS], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    (Path(project["root"]) / "on-the-node.ipynb").write_text(nbformat.writes(book))
    with screenshot_on_failure(page, "node-kernel-notebook-failed"):
        notebook = open_notebook(page, lab, "on-the-node.ipynb")
        cells = notebook.locator(".jp-Cell")
        cells.nth(NODE_CELLS.index("_ = node.wait(180)")).locator(".jp-InputPrompt").click()
        menu(page, "Run", "Run All Above Selected Cell")
        approve = notebook.locator(".betty-approve")
        expect(approve).to_be_visible(timeout=60_000)
        approve.click()  # the card, approved in the notebook
        clock = notebook.locator(".betty-node-clock").first
        expect(clock).to_contain_text("RUNNING", timeout=120_000)
        found = re.search(r"job (\d+) RUNNING", clock.inner_text())
        assert found is not None, clock.inner_text()
        job_id = found[1]
        menu(page, "Run", "Run Selected Cell and All Below")
        on_node = cells.nth(NODE_CELLS.index("import os\nprint('on', os.environ['SLURM_JOB_ID'])"))
        expect(on_node.locator(".jp-OutputArea-output")).to_have_text(f"on {job_id}", timeout=180_000)
        back = cells.nth(len(NODE_CELLS) - 2).locator(".jp-OutputArea-output")
        expect(on_node.locator(".jp-OutputArea-output")).to_have_count(1)  # nothing on stderr
        # the node kernel's ports are forwarded over the server's connection: the notebook's kernel logs in nowhere
        assert connections(notebook_kernel_pid(lab, "on-the-node.ipynb"), dev_cluster_port(dev_cluster)) == set()
        expect(back).to_have_text(re.compile(r"^back \d+ \S+ None\s*$"), timeout=60_000)
        expect(clock).to_contain_text(f"cancelled job {job_id}", timeout=60_000)
    pid, host = back.inner_text().split()[1:3]
    assert int(pid) == notebook_kernel_pid(lab, "on-the-node.ipynb") and host == socket.gethostname()


def notebook_kernel_pid(lab: JupyterServer, path: str) -> int:
    """The process id of the kernel ``lab`` started for the notebook ``path`` (the notebook's own, on this machine)."""
    request = urllib.request.Request(f"{lab.url}api/sessions", headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        kernel = next(s["kernel"]["id"] for s in json.load(answer) if s["path"] == path)
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"kernel-{kernel}.json".encode() in (proc / "cmdline").read_bytes():
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no process runs the kernel {kernel}")
