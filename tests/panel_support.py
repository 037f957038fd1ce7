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
WINDOW = (1400, 900)
"""The browser window of the panel tests, in pixels (``page`` takes another through indirect parametrization)."""
WAIT_MS = 180_000  # a guard against a hang on a slow, shared machine, not a measurement
# Every expect() in the panel tests waits up to WAIT_MS for its condition (Playwright's own default is 5 s,
# which a busy 2-core machine can miss while JupyterLab opens a notebook).
expect.set_options(timeout=WAIT_MS)


DARK_THEME = "JupyterLab Dark"
"""The name of JupyterLab's dark theme in its theme setting."""


@pytest.fixture(scope="module")
def lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """``jupyter lab`` serving the project (:func:`running_lab`), in JupyterLab's default theme."""
    with running_lab(project, tmp_path_factory) as running:
        yield running


@contextmanager
def running_lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
                theme: str | None = None) -> Iterator[JupyterServer]:
    """``jupyter lab`` serving the project, with its own Jupyter config: no saved workspace, no toast
    asking about Jupyter news over the panel's buttons, and ``theme`` (e.g. :data:`DARK_THEME`) when given.
    The config directory is the project's ``jupyter_config_dir`` when it names one (a test that runs
    ``betty cluster add`` against it)."""
    config = Path(project.get("jupyter_config_dir") or tmp_path_factory.mktemp("lab-config"))
    running = start_lab(project, config, tmp_path_factory.mktemp("runtime"), theme)
    try:
        yield running
    finally:
        running.stop()


def start_lab(project: dict[str, Any], config: Path, runtime: Path, theme: str | None = None) -> JupyterServer:
    """``jupyter lab`` serving the project with the Jupyter config directory ``config`` (made quiet: no news
    toast; in ``theme`` when given); a second one started on the same ``config`` is the same JupyterLab after a
    restart."""
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    if theme is not None:
        (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))
    env = {**project["env"], "JUPYTER_CONFIG_DIR": str(config)}
    return JupyterServer(project["root"], env, runtime, app="jupyterlab")


@pytest.fixture
def page(request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page of Debian's Chromium, headless, in a window of :data:`WINDOW` (or the ``(width, height)`` the test
    parametrizes ``page`` with); the test fails (never skips) when Chromium is missing."""
    width, height = getattr(request, "param", WINDOW)
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium, "
                    "or run scripts/install.sh test); Betty's browser test never downloads a browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.set_default_timeout(WAIT_MS)
            yield context.new_page()
        finally:
            browser.close()


def screenshot(page: Page, name: str, prefix: str = "panel") -> Path:
    """Save the whole window as ``test-artifacts/screenshots/<prefix>-<name>.png``; the numbered ones of a prefix
    ``panel-<width>…`` or ``notebook-<width>…`` also replace the docs' pictures when ``BETTY_UPDATE_SCREENSHOTS=1``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{prefix}-{name}.png"
    page.screenshot(path=str(path))
    if (os.environ.get("BETTY_UPDATE_SCREENSHOTS") == "1" and prefix.startswith(("panel-", "notebook-"))
            and name[0].isdigit()):
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


# Elements of the panel that hide part of their content sideways: those that clip (overflow hidden) with more
# inside than shows, unless they say so with an ellipsis; the panel and its tabs' pages never scroll sideways.
# An element that scrolls sideways by itself (a wide table in a tool row) shows its scrollbar, and is fine.
_HIDDEN_SIDEWAYS = """panel => {
  const hidden = [];
  for (const element of [panel, ...panel.querySelectorAll('*')]) {
    if (element.getClientRects().length === 0) continue;
    const style = getComputedStyle(element);
    const page = element === panel || element.classList.contains('betty-TabPanel');
    const clips = page || style.overflowX === 'hidden' || style.overflowX === 'clip';
    if (clips && style.textOverflow !== 'ellipsis' && element.scrollWidth > element.clientWidth + 1) {
      hidden.push(`${element.tagName.toLowerCase()}.${element.className}: ${element.scrollWidth} px in ${element.clientWidth} px`);
    }
  }
  return hidden;
}"""


def assert_nothing_hidden_sideways(panel: Locator) -> None:
    """No horizontal scrollbar in the panel, and nothing in it cut off at its right edge."""
    hidden = panel.evaluate(_HIDDEN_SIDEWAYS)
    assert hidden == [], f"the panel hides content sideways: {hidden}"


def assert_tabs_legible(panel: Locator) -> None:
    """Every tab's label shows whole, inside the panel, and no two tabs overlap."""
    panel_box = panel.bounding_box()
    assert panel_box is not None
    tabs = panel.get_by_role("tab")
    boxes = []
    for tab in tabs.all():
        box = tab.bounding_box()
        assert box is not None, f"tab {tab.inner_text()!r} is not shown"
        # The label with room on either side of it, so two labels never run together ("ExperimentsAutomations").
        room = tab.evaluate("""tab => {
          const range = document.createRange();
          range.selectNodeContents(tab);
          const text = range.getBoundingClientRect();
          const box = tab.getBoundingClientRect();
          return Math.min(text.left - box.left, box.right - text.right);
        }""")
        assert tab.evaluate("tab => tab.scrollWidth <= tab.clientWidth") and room >= 4, (
            f"tab {tab.inner_text()!r} is cut off or touches its neighbour ({room:.1f} px to spare)")
        assert box["x"] >= panel_box["x"] - 0.5 and box["x"] + box["width"] <= panel_box["x"] + panel_box["width"] + 0.5, (
            f"tab {tab.inner_text()!r} reaches outside the panel: {box} in {panel_box}")
        boxes.append((tab.inner_text(), box))
    assert len(boxes) == 7, [name for name, _ in boxes]
    for i, (name, box) in enumerate(boxes):
        for other, other_box in boxes[i + 1:]:
            apart = (box["x"] + box["width"] <= other_box["x"] + 0.5 or other_box["x"] + other_box["width"] <= box["x"] + 0.5
                     or box["y"] + box["height"] <= other_box["y"] + 0.5
                     or other_box["y"] + other_box["height"] <= box["y"] + 0.5)
            assert apart, f"tabs {name!r} and {other!r} overlap: {box} and {other_box}"


def assert_in_viewport(page: Page, element: Locator) -> None:
    """``element`` shows whole in the window, and inside the scrolling list that holds it."""
    box = element.bounding_box()
    viewport = page.viewport_size
    assert box is not None and viewport is not None
    assert 0 <= box["y"] and box["y"] + box["height"] <= viewport["height"], (
        f"{box} is outside the window {viewport}")
    assert 0 <= box["x"] and box["x"] + box["width"] <= viewport["width"], f"{box} is outside the window {viewport}"
    hidden_by = element.evaluate("""element => {
      const box = element.getBoundingClientRect();
      for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (style.overflowY === 'visible') continue;
        const room = up.getBoundingClientRect();
        if (box.top < room.top - 0.5 || box.bottom > room.bottom + 0.5) {
          return `${up.tagName.toLowerCase()}.${up.className} (${room.top}-${room.bottom}; the element ${box.top}-${box.bottom})`;
        }
      }
      return null;
    }""")
    assert hidden_by is None, f"the element is scrolled out of sight in {hidden_by}"


# Elements of the panel that scroll sideways though they must not: its toolbars.
_TOOLBARS_SIDEWAYS = """panel => Array.from(panel.querySelectorAll('.betty-Tab-toolbar'))
  .filter(bar => bar.getClientRects().length > 0 && bar.scrollWidth > bar.clientWidth + 1)
  .map(bar => `${bar.textContent}: ${bar.scrollWidth} px in ${bar.clientWidth} px`)"""


def assert_toolbars_whole(panel: Locator) -> None:
    """Every toolbar shown in the panel holds its controls inside its width (wrapping, never scrolling
    sideways), and no caption in it stands one word per line."""
    sideways = panel.evaluate(_TOOLBARS_SIDEWAYS)
    assert sideways == [], f"toolbars scroll sideways: {sideways}"
    for caption in panel.locator(".betty-Tab-toolbar .betty-Tab-caption").all():
        if not caption.is_visible():
            continue
        words = len(caption.inner_text().split())
        lines = caption.evaluate("element => element.getClientRects().length")
        assert words < 2 or lines < words, f"{caption.inner_text()!r} stands one word per line ({lines} lines)"


# Buttons whose label does not show whole: cut by their width, or ending in the ellipsis of a cut label.
_CUT_BUTTONS = r"""scope => Array.from(scope.querySelectorAll('button'))
  .filter(button => button.getClientRects().length > 0)
  .filter(button => button.scrollWidth > button.clientWidth + 1 || /\u2026$/.test(button.textContent.trim())
                    && getComputedStyle(button).textOverflow === 'ellipsis'
                    || [...button.querySelectorAll('*')].some(inner => inner.scrollWidth > inner.clientWidth + 1
                        && getComputedStyle(inner).textOverflow === 'ellipsis'))
  .map(button => button.textContent)"""


def assert_buttons_whole(scope: Locator) -> None:
    """Every button shown in ``scope`` shows its whole label."""
    cut = scope.evaluate(_CUT_BUTTONS)
    assert cut == [], f"buttons show part of their label: {cut}"


# The colour an element's text is drawn in, and the colour under it: its own background, else the first
# ancestor's that is not transparent (blended over white where partly transparent), as [r, g, b] in 0-255.
_COLOURS = r"""element => {
  const rgb = text => (text.match(/[\d.]+/g) || []).map(Number);
  const under = node => {
    for (let up = node; up; up = up.parentElement) {
      const [r, g, b, a = 1] = rgb(getComputedStyle(up).backgroundColor);
      if (a > 0 && getComputedStyle(up).backgroundColor !== 'transparent') return [r, g, b];
    }
    return [255, 255, 255];
  };
  return {text: rgb(getComputedStyle(element).color).slice(0, 3), background: under(element)};
}"""


def luminance(rgb: list[float]) -> float:
    """The relative luminance of an sRGB colour (WCAG 2), 0 (black) to 1 (white)."""
    def linear(channel: float) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: list[float], other: list[float]) -> float:
    """The WCAG contrast ratio of two colours, 1 to 21."""
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def colours_of(element: Locator) -> dict[str, list[float]]:
    """``{text, background}``: the computed colour of ``element``'s text and of what is under it."""
    return element.evaluate(_COLOURS)


def assert_dark_and_readable(element: Locator, what: str, least: float = 4.5) -> None:
    """``element`` sits on a dark background (the dark theme's) and its text contrasts with it by ``least``."""
    colours = colours_of(element)
    assert luminance(colours["background"]) < 0.2, f"{what} has a light background: {colours}"
    ratio = contrast(colours["text"], colours["background"])
    assert ratio >= least, f"{what} is hard to read: contrast {ratio:.1f} ({colours})"
