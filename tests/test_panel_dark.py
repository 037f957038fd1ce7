"""Betty in JupyterLab's dark theme at a laptop's 1024×700, in Debian's Chromium against a real JupyterLab on the
dev cluster, configured as the demo configures JupyterLab (``scripts/demo-config/lab-overrides.json``).

- A sweep whose task 3 failed: its failed row is dark with readable text (not pink with white text), and the
  sweep's pictures in the panel have no light box behind them.
- ``%betty overview`` in a notebook: its picture has no white box; the card's Edit form shows its script in the
  editor's monospace font, dark and readable, with Cancel.
- A job that ends while the panel is open says so in the chat, and no toast covers the prompt or Send; with the
  panel closed, the job's end is a toast. JupyterLab's news question never comes over the prompt on first load.

Screenshots: ``test-artifacts/screenshots/panel-1024-dark-{sweep,toasts}-*.png`` and
``notebook-1024-dark-charts-*.png``, which replace those in ``docs/screenshots/`` with ``BETTY_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from conftest import REPO
from jupyter_server_proc import JupyterServer
from matplotlib.image import imread
from notebook_support import SCRIPT, llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    DARK_THEME,
    WAIT_MS,
    assert_dark_and_readable,
    assert_in_viewport,
    colours_of,
    contrast,
    luminance,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Locator, Page, expect
from test_notebook_browser import menu, open_notebook
from test_panel_sweeps import run_sweep, until
from test_server_support import job_state, scancel

pytestmark = pytest.mark.cluster

LAPTOP = [pytest.param((1024, 700), id="1024x700")]
DEMO_LAB_SETTINGS = REPO / "scripts" / "demo-config" / "lab-overrides.json"
SHORT_JOB = "#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=1\n#SBATCH --mem=100M\necho done\n"
TOAST = ".jp-Notification-Toast, .Toastify__toast"


@pytest.fixture(scope="module")
def dark_lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """``jupyter lab`` serving the project in the dark theme, with JupyterLab's settings as the demo overrides them
    (news not fetched) and nothing else of the kind: the person's own settings say nothing about news."""
    config = tmp_path_factory.mktemp("dark-config")
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": DARK_THEME}))
    overrides = tmp_path_factory.mktemp("lab-settings")
    (overrides / "overrides.d").mkdir()
    shutil.copyfile(DEMO_LAB_SETTINGS, overrides / "overrides.d" / "betty-demo.json")
    (config / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"app_settings_dir": str(overrides)}}))
    running = JupyterServer(project["root"], {**project["env"], "JUPYTER_CONFIG_DIR": str(config)},
                            tmp_path_factory.mktemp("runtime"), app="jupyterlab")
    try:
        yield running
    finally:
        running.stop()


def pixels_of(element: Locator) -> np.ndarray:
    """What ``element`` looks like on the page, as RGB in 0–1."""
    return imread(io.BytesIO(element.screenshot()))[:, :, :3]


def shown_background(element: Locator) -> list[float]:
    """The colour most of ``element`` shows on the page (its background, whatever CSS made it), in 0–255."""
    return [float(c) * 255 for c in np.median(pixels_of(element).reshape(-1, 3), axis=0)]


def lab_setting(lab: JupyterServer, plugin: str) -> dict[str, Any]:
    """JupyterLab's settings of ``plugin`` as its settings API answers them (the schema's defaults overridden)."""
    request = urllib.request.Request(f"{lab.url}lab/api/settings/{plugin}",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        setting: dict[str, Any] = json.loads(answer.read())
    return setting


def assert_no_light_box(element: Locator, what: str) -> None:
    """``element`` shows on the dark page without a light box behind it: most of it is dark, little near white."""
    shown = pixels_of(element)
    light = float((shown > 0.85).all(axis=2).mean())
    dark = float((shown < 0.25).all(axis=2).mean())
    assert light < 0.02 and dark > 0.4, f"{what} is a light box: {light:.0%} near white, {dark:.0%} dark"


@pytest.mark.parametrize("page", LAPTOP, indirect=True)
def test_a_failed_sweep_row_and_the_sweep_pictures_read_in_the_dark_theme(
        dark_lab: JupyterServer, page: Page, dev_cluster: dict[str, str]) -> None:
    slug = run_sweep(dark_lab)
    until("every task of the sweep ended", lambda: dark_lab.request("GET", f"sweeps/{slug}", timeout=120)["states"]
          == ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"])
    with screenshot_on_failure(page, "failure", "dark-sweep"):
        panel = open_the_panel(page, dark_lab)
        assert page.evaluate("document.body.dataset.jpThemeLight") == "false"
        panel.get_by_test_id("betty-tab-experiments").click()
        row = panel.locator(f'[data-testid="betty-sweep-row"][data-slug="{slug}"]')
        row.get_by_test_id("betty-sweep-compare").click()
        failed = row.get_by_test_id("betty-sweep-task").nth(3)
        expect(failed.locator("td").nth(3)).to_have_text("FAILED")
        failed.scroll_into_view_if_needed()
        tint = shown_background(failed.locator("td").first)
        assert luminance(tint) < 0.1, f"the failed row is light (pink?) in the dark theme: {tint}"
        for index, cell in enumerate(failed.locator("td").all()):
            if cell.inner_text().strip():
                ratio = contrast(colours_of(cell)["text"], tint)
                assert ratio >= 4.5, f"cell {index} of the failed row is hard to read: contrast {ratio:.1f}"
        screenshot(page, "1-failed-task", "panel-1024-dark-sweep")
        charts = row.locator("img.betty-Chart")
        expect(charts.first).to_be_visible()
        for chart in charts.all()[:2]:
            page.wait_for_function("image => image.complete && image.naturalWidth > 0", arg=chart.element_handle())
            chart.scroll_into_view_if_needed()
            assert_no_light_box(chart, "the sweep's picture")
        screenshot(page, "2-pictures", "panel-1024-dark-sweep")


@pytest.mark.parametrize("page", LAPTOP, indirect=True)
def test_a_notebook_picture_and_the_card_s_edit_form_follow_the_dark_theme(
        dark_lab: JupyterServer, project: dict[str, Any], dev_cluster: dict[str, str], page: Page) -> None:
    name = f"dark-{uuid.uuid4().hex[:6]}"
    cells = ["%load_ext betty_jupyter", "%betty overview",
             f"%%betty submit --slug {name} --goal 'look at the edit form'\n{SCRIPT.format(name=name, seconds=60)}"]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    (Path(project["root"]) / f"{name}.ipynb").write_text(nbformat.writes(book))
    with screenshot_on_failure(page, "failure", "dark-notebook"):
        notebook = open_notebook(page, dark_lab, f"{name}.ipynb")
        menu(page, "Run", "Run All Cells")
        picture = notebook.locator(".jp-OutputArea-output img").first
        expect(picture).to_be_visible()
        page.wait_for_function("image => image.complete && image.naturalWidth > 0", arg=picture.element_handle())
        picture.scroll_into_view_if_needed()
        under = colours_of(picture)["background"]
        assert luminance(under) < 0.1, f"the picture has a light background behind it: {under}"
        assert_no_light_box(picture, "the overview's picture")
        axes = pixels_of(picture)
        grey = float((np.abs(axes - 0x80 / 255) < 0.03).all(axis=2).mean())
        assert grey > 0.001, "its text and axes are drawn, in the grey that reads on the dark page"
        screenshot(page, "1-overview", "notebook-1024-dark-charts")

        edit = notebook.locator(".betty-edit")
        expect(edit).to_be_visible()
        edit.click()
        script = notebook.locator(".betty-edit-arg-script textarea")
        expect(script).to_be_visible()
        font = script.evaluate("field => getComputedStyle(field).fontFamily")
        code_font = page.evaluate("getComputedStyle(document.body).getPropertyValue('--jp-code-font-family')")
        assert "monospace" in font and font.replace(" ", "") == code_font.strip().replace(" ", ""), (font, code_font)
        assert_dark_and_readable(script, "the edit form's script")
        assert script.evaluate("field => field.clientHeight") >= 12 * 14, "a dozen lines of script at least"
        expect(notebook.locator(".betty-edit-partition select")).to_be_visible()
        script.scroll_into_view_if_needed()
        screenshot(page, "2-edit-form", "notebook-1024-dark-charts")
        notebook.locator(".betty-edit-cancel").click()
        expect(script).to_be_hidden()
        deny = notebook.locator(".betty-deny")
        if deny.count():
            deny.first.click()
    job = next((row["job_id"] for row in dark_lab.request("GET", "experiments")["experiments"]
                if row.get("slug", "").endswith(name)), None)
    assert job is None, "nothing was submitted: the card was never approved"


def submit_approved(lab: JupyterServer, name: str) -> str:
    """A short job ``name`` asked for and approved outside the panel's chat (through the API), as a notebook or
    another client would; its id once Betty recorded it."""
    session = lab.request("POST", "sessions", {})["session_id"]
    args = {"script": SHORT_JOB.format(name=name), "goal": "end while the panel is open or closed", "name": name}
    started = lab.request("POST", f"sessions/{session}/tools/cluster_submit", {"args": args, "wait": False})
    card = until("the job's card", lambda: [c for c in lab.request("GET", "approvals")["approvals"]
                                           if c["call_id"] == started["call_id"]])[0]
    lab.request("POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
    return str(until("the job's record", lambda: next(
        (row["job_id"] for row in lab.request("GET", "experiments")["experiments"]
         if row.get("slug", "").endswith(name) and row.get("job_id")), None)))


def assert_uncovered(page: Page, element: Locator, what: str) -> None:
    """``element`` is in the window and nothing lies over its middle."""
    assert_in_viewport(page, element)
    on_top = element.evaluate("""element => {
      const box = element.getBoundingClientRect();
      const top = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
      return top === element || element.contains(top) ? null : `${top?.tagName}.${top?.className}`;
    }""")
    assert on_top is None, f"{what} is covered by {on_top}"


@pytest.mark.parametrize("page", LAPTOP, indirect=True)
def test_no_toast_covers_the_prompt_and_send_and_a_closed_panel_still_hears_of_a_job_s_end(
        dark_lab: JupyterServer, page: Page, dev_cluster: dict[str, str]) -> None:
    jobs: list[str] = []
    try:
        with screenshot_on_failure(page, "failure", "dark-toasts"):
            panel = open_the_panel(page, dark_lab)
            prompt, send = panel.get_by_test_id("betty-prompt"), panel.get_by_test_id("betty-send")
            news = lab_setting(dark_lab, "@jupyterlab/apputils-extension:notification")
            assert news["schema"]["properties"]["fetchNews"]["default"] == "false", "the demo's settings say no news"
            assert "fetchNews" not in news.get("settings", {}), "the person's own settings say nothing of news"
            expect(page.locator(TOAST)).to_have_count(0)  # no news question over the prompt on the first load

            jobs.append(submit_approved(dark_lab, f"toast-open-{uuid.uuid4().hex[:6]}"))
            ended = panel.get_by_test_id("betty-note-job").filter(
                has_text=re.compile(rf"^Job {jobs[0]} on \S+: .*→ COMPLETED"))
            expect(ended).to_have_count(1)
            expect(page.locator(TOAST)).to_have_count(0)
            assert_uncovered(page, prompt, "the prompt")
            assert_uncovered(page, send, "Send")
            screenshot(page, "1-job-ended-in-the-chat", "panel-1024-dark-toasts")

            page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()  # the panel closed
            expect(panel).to_be_hidden()
            jobs.append(submit_approved(dark_lab, f"toast-closed-{uuid.uuid4().hex[:6]}"))
            toast = page.locator(TOAST, has_text=f"Job {jobs[1]} on ")
            expect(toast).to_contain_text("ended: COMPLETED")
    finally:
        for job in jobs:
            if job_state(dev_cluster, job):
                scancel(dev_cluster, job)
