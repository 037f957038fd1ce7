"""What the browser tests of the side panel share: a JupyterLab serving the project, Debian's Chromium, the
panel opened and connected, screenshots.

Playwright drives the browser Debian ships (``executable_path``); it never downloads one. No tests here;
``test_panel_*.py`` files import what they use (the ``lab`` fixture needs ``project`` and ``llm`` from
``notebook_support`` imported beside it).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from jupyter_server_proc import JupyterServer
from playwright.sync_api import Locator, Page, expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
DOC_SCREENSHOTS = REPO / "docs" / "screenshots"
WAIT_MS = 180_000  # a guard against a hang on a slow, shared machine, not a measurement
# Every expect() in the panel tests waits up to WAIT_MS for its condition (Playwright's own default is 5 s,
# which a busy 2-core machine can miss while JupyterLab opens a notebook).
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """``jupyter lab`` serving the project, with its own Jupyter config: no saved workspace, and no toast
    asking about Jupyter news over the panel's buttons. The config directory is the project's
    ``jupyter_config_dir`` when it names one (a test that runs ``betty cluster add`` against it)."""
    config = Path(project.get("jupyter_config_dir") or tmp_path_factory.mktemp("lab-config"))
    notifications = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    notifications.mkdir(parents=True)
    (notifications / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = {**project["env"], "JUPYTER_CONFIG_DIR": str(config)}
    running = JupyterServer(project["root"], env, tmp_path_factory.mktemp("runtime"), app="jupyterlab")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    """A page of Debian's Chromium, headless; the test fails (never skips) when Chromium is missing."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium, "
                    "or run scripts/install.sh test); Betty's browser test never downloads a browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 950})
            context.set_default_timeout(WAIT_MS)
            yield context.new_page()
        finally:
            browser.close()


def screenshot(page: Page, name: str, prefix: str = "panel") -> Path:
    """Save the whole window as ``test-artifacts/screenshots/<prefix>-<name>.png``; the side panel test's
    numbered ones also replace the docs' pictures when ``BETTY_UPDATE_SCREENSHOTS=1``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{prefix}-{name}.png"
    page.screenshot(path=str(path))
    if os.environ.get("BETTY_UPDATE_SCREENSHOTS") == "1" and prefix == "panel" and name[0].isdigit():
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_SCREENSHOTS / path.name)
    return path


@contextmanager
def screenshot_on_failure(page: Page, name: str, prefix: str = "panel") -> Iterator[None]:
    """A failing step leaves a picture of the window as it was; no picture of an earlier run is left."""
    for old in SCREENSHOTS.glob(f"{prefix}-*.png"):
        old.unlink()
    passed = False
    try:
        yield
        passed = True
    finally:
        if not passed:
            screenshot(page, name, prefix)


def served_panel_build(page: Page) -> str | None:
    """The side panel build the JupyterLab in the page loaded (its remoteEntry file)."""
    config = json.loads(page.locator("#jupyter-config-data").text_content() or "{}")
    builds = [each.get("load") for each in config.get("federated_extensions", [])
              if each.get("name") == "betty-jupyter"]
    return builds[0] if builds else None


def open_the_panel(page: Page, lab: JupyterServer) -> Locator:
    """Open JupyterLab in its default layout, check it serves this checkout's panel, open the panel; the panel
    once connected. ``reset`` forgets the layout an earlier test of the same JupyterLab left (the panel open)."""
    page.goto(f"{lab.url}lab?reset&token={lab.token}")
    expect(page.locator("#jp-main-dock-panel")).to_be_visible(timeout=WAIT_MS)
    built = json.loads((REPO / "betty_jupyter" / "labextension" / "package.json").read_text())
    assert served_panel_build(page) == built["jupyterlab"]["_build"]["load"], (
        "this JupyterLab serves another build of the side panel than betty_jupyter/labextension: "
        "reinstall with .venv/bin/pip install -e . (or scripts/install.sh)")
    panel = page.get_by_test_id("betty-panel")
    page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()
    expect(panel).to_be_visible(timeout=WAIT_MS)
    expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open", timeout=WAIT_MS)
    expect(panel.get_by_test_id("betty-mode-switch")).to_have_attribute("data-mode", "confirm")
    return panel
