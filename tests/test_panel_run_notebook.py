"""**Run on cluster…** on the open notebook, in Debian's Chromium against a real JupyterLab on the dev cluster.

With a notebook open whose cell tagged ``parameters`` sets ``lr``, the person opens the form from the chat, types a
parameter whose name is not a Python name (refused in one line, nothing sent, the typing kept), corrects it, and
asks to run: the ``notebook_submit`` card waits in the chat with the generated script and the exact cell of injected
parameters, and the queue holds nothing new until the person approves; then the job is submitted. A notebook with
unsaved changes is refused first. Screenshots: ``test-artifacts/screenshots/run-notebook-*.png``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import nbformat
import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import llm, new_project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    REPO,
    lab,
    page,
    screenshot,
    screenshot_on_failure,
    served_panel_build,
)
from playwright.sync_api import Page, expect

NOTEBOOK = "train.ipynb"
GUARD = 120.0  # a guard against a hang on a busy machine, not a measurement
HOSTILE = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory,
            llm: ScriptedLLM) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A project whose clusters have the environment ``betty`` (this test run's venv: it has nbclient)."""
    made = new_project(tmp_path_factory.mktemp("run-notebook"), dev_cluster, llm)
    config = Path(made["env"]["BETTY_CONFIG"])
    data = json.loads(config.read_text())
    for cluster in data["BettyConfig"]["clusters"]:
        cluster["environments"] = {"betty": {"venv": sys.prefix}}
    config.write_text(json.dumps(data))
    book = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                             "language": "python"}})
    parameters = nbformat.v4.new_code_cell("lr = 0.1")
    parameters.metadata["tags"] = ["parameters"]
    book.cells = [parameters, nbformat.v4.new_code_cell("print(f'loss={lr * 4}')")]
    nbformat.write(book, made["root"] / NOTEBOOK)
    yield made


def saved(root: Path, text: str) -> None:
    """Wait until the notebook's file holds ``text`` (JupyterLab saved it)."""
    deadline = time.monotonic() + GUARD
    while text not in (root / NOTEBOOK).read_text():
        assert time.monotonic() < deadline, f"{NOTEBOOK} was not saved"
        time.sleep(0.2)


def queued(cluster: dict[str, str]) -> str:
    """Every job the queue holds now."""
    return subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "SLURM_CONF": cluster["SLURM_CONF"]}).stdout


def test_run_on_cluster_waits_for_approval_with_the_injected_parameters_then_submits(
        page: Page, lab: JupyterServer, dev_cluster: dict[str, str], project: dict[str, Any]) -> None:  # noqa: F811
    with screenshot_on_failure(page, "failure", prefix="run-notebook"):
        page.goto(f"{lab.url}lab/tree/{NOTEBOOK}?reset&token={lab.token}")
        cells = page.locator(".jp-NotebookPanel .jp-Cell")
        expect(cells.nth(1)).to_be_visible()
        built = json.loads((REPO / "betty_jupyter" / "labextension" / "package.json").read_text())
        assert served_panel_build(page) == built["jupyterlab"]["_build"]["load"], (
            "this JupyterLab serves another build of Betty's extension: reinstall with .venv/bin/pip install -e .")
        page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()
        panel = page.get_by_test_id("betty-panel")
        expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open")

        # Unsaved changes: refused in one line, nothing sent. (Once the kernel is up: its language info comes into
        # the notebook then, which would leave it unsaved again after the save below.)
        expect(page.get_by_role("button", name=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_be_visible()
        cells.nth(1).locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n# not saved yet")
        panel.get_by_test_id("betty-run-notebook").click()
        form = panel.get_by_test_id("betty-run-notebook-form")
        expect(form).to_contain_text(f"Run {NOTEBOOK} on the cluster")
        expect(form.get_by_test_id("betty-run-partition").locator("option")).not_to_have_count(0)
        form.get_by_test_id("betty-run-env").select_option("betty")  # the profile's environments are a choice
        form.get_by_test_id("betty-run-time").fill("5")
        form.get_by_test_id("betty-run-params").fill(f"lr=0.25\n{HOSTILE}=1")
        form.get_by_test_id("betty-run-start").click()
        error = form.get_by_test_id("betty-run-error")
        expect(error).to_have_text(f"Save {NOTEBOOK} first: the cluster runs the notebook as saved.")
        dirty = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty")
        expect(dirty).to_have_count(1)
        cells.nth(1).locator(".cm-content").click()
        page.keyboard.press("Control+s")
        saved(project["root"], "# not saved yet")
        # the file is written before JupyterLab hears back and marks the notebook clean: wait for that too
        expect(dirty).to_have_count(0)

        # A bad name: one line, nothing sent, the typing kept; hostile text stays text.
        form.get_by_test_id("betty-run-start").click()
        expect(error).to_have_text('Parameter line 2: "<img src" is not a Python name; write one name=value a line.')
        expect(form.get_by_test_id("betty-run-params")).to_have_value(f"lr=0.25\n{HOSTILE}=1")
        assert form.locator("img").count() == 0 and page.evaluate("window.__pwned") is None
        screenshot(page, "1-bad-name", prefix="run-notebook")

        before = queued(dev_cluster)
        form.get_by_test_id("betty-run-params").fill("lr=0.25\ntag='a b'")
        form.get_by_test_id("betty-run-start").click()
        card = panel.locator('[data-testid="betty-approval-card"][data-tool="notebook_submit"]')
        expect(card).to_have_attribute("data-status", "pending")
        expect(card.get_by_test_id("betty-approval-tier")).to_contain_text("2")
        expect(card).to_contain_text("# Parameters (injected by Betty)")
        expect(card).to_contain_text("lr = 0.25")
        expect(card).to_contain_text("tag = 'a b'")
        expect(card.get_by_test_id("betty-preview")).to_contain_text("notebook_runner.py")
        expect(form).to_have_count(0)
        card.scroll_into_view_if_needed()
        screenshot(page, "2-card-waits", prefix="run-notebook")
        assert queued(dev_cluster) == before, "nothing is submitted before the card is approved"

        card.get_by_test_id("betty-approve").click()
        expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "approved")
        row = panel.get_by_test_id("betty-tool-row").last
        expect(row).to_contain_text(re.compile(r"submitted job \d+"))
        job = re.search(r"submitted job (\d+)", row.inner_text()).group(1)  # type: ignore[union-attr]
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60,
                               env={"PATH": "/usr/bin:/bin", "SLURM_CONF": dev_cluster["SLURM_CONF"]})
        assert shown.returncode == 0 and f"JobId={job} " in shown.stdout, shown.stderr
        screenshot(page, "3-submitted", prefix="run-notebook")


def test_a_refused_run_is_asked_again_from_the_kept_form_and_its_result_comes_back_from_the_panel(
        page: Page, lab: JupyterServer, dev_cluster: dict[str, str], project: dict[str, Any]) -> None:  # noqa: F811
    with screenshot_on_failure(page, "failure-result", prefix="run-notebook"):
        page.goto(f"{lab.url}lab/tree/{NOTEBOOK}?reset&token={lab.token}")
        cells = page.locator(".jp-NotebookPanel .jp-Cell")
        expect(cells.nth(1)).to_be_visible()
        # the kernel's language info comes into the notebook once the kernel is up: save after that
        expect(page.get_by_role("button", name=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_be_visible()
        cells.nth(1).locator(".cm-content").click()
        page.keyboard.press("Control+s")  # the cluster runs the notebook as saved
        expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
        page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()
        panel = page.get_by_test_id("betty-panel")
        expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open")

        # The profile's environment is offered, and chosen first; the node's python3 is the other choice.
        panel.get_by_test_id("betty-run-notebook").click()
        form = panel.get_by_test_id("betty-run-notebook-form")
        expect(form.get_by_test_id("betty-run-partition").locator("option")).not_to_have_count(0)
        env = form.get_by_test_id("betty-run-env")
        expect(env).to_have_value("betty")
        expect(env.locator("option")).to_have_text(["betty", "the node's python3"])
        env.select_option("")
        form.get_by_test_id("betty-run-time").fill("7")
        form.get_by_test_id("betty-run-params").fill("lr=0.5\ntag='x y'")
        form.get_by_test_id("betty-run-start").click()
        expect(form).to_have_count(0)
        refused = panel.get_by_test_id("betty-tool-row").last
        expect(refused).to_contain_text("cannot import nbclient")
        expect(refused).to_contain_text("another environment of")

        # Asked again: the form holds what was typed.
        panel.get_by_test_id("betty-run-notebook").click()
        expect(form.get_by_test_id("betty-run-time")).to_have_value("7")
        expect(form.get_by_test_id("betty-run-params")).to_have_value("lr=0.5\ntag='x y'")
        expect(env).to_have_value("")
        expect(form.get_by_test_id("betty-run-partition").locator("option")).not_to_have_count(0)
        env.select_option("betty")
        form.get_by_test_id("betty-run-start").click()
        card = panel.locator('[data-testid="betty-approval-card"][data-tool="notebook_submit"][data-status="pending"]')
        card.get_by_test_id("betty-preview-exact").locator("summary").click()  # the details, one click away
        cell = card.get_by_test_id("betty-preview-lines")
        expect(cell).to_contain_text("lr = 0.5")
        assert "# Parameters (injected by Betty)\nlr = 0.5\ntag = 'x y'" in cell.inner_text(), cell.inner_text()
        card.scroll_into_view_if_needed()
        screenshot(page, "4-parameters-cell", prefix="run-notebook")
        card.get_by_test_id("betty-approve").click()
        row = panel.get_by_test_id("betty-tool-row").filter(has_text=re.compile(r"submitted job \d+")).last
        expect(row).to_be_visible()
        job = re.search(r"submitted job (\d+)", row.inner_text()).group(1)  # type: ignore[union-attr]

        # Once the job has ended, Fetch result on its experiment brings the executed notebook back.
        panel.get_by_test_id("betty-tab-experiments").click()
        experiment = panel.get_by_test_id("betty-experiment-row").filter(has_text=f"job {job} ")
        deadline = time.monotonic() + 5 * GUARD
        while experiment.get_by_test_id("betty-fetch-result").count() == 0:
            assert time.monotonic() < deadline, f"job {job} did not end: {experiment.all_inner_texts()}"
            panel.get_by_test_id("betty-experiments-refresh").click()
            page.wait_for_timeout(1000)  # the refresh's answer, then look again
        slug = experiment.get_attribute("data-slug")
        experiment.get_by_test_id("betty-fetch-result").click()  # a read the person asked for: no card (tier 1)
        brought = panel.get_by_test_id("betty-tool-row").filter(has_text="executed notebook:").last
        expect(brought).to_contain_text(f"job {job} ended")
        written = re.search(r"executed notebook: (\S+\.ipynb)", brought.inner_text())
        assert written, brought.inner_text()
        executed = (project["root"] / written.group(1)).read_text()
        assert "loss=2.0" in executed and "tag = 'x y'" in executed, (slug, executed[:2000])
        screenshot(page, "5-result-back", prefix="run-notebook")
