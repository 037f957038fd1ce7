"""The side panel at a laptop's 1024×700 and at 1400×900, with JupyterLab's file browser open, in the light and the
dark theme: Debian's Chromium against a real JupyterLab on the dev cluster.

A notebook's card waits under "Waiting for you" while the chat is open: the chat's transcript keeps a usable
height, the prompt and **Send** stay in the window, every card button shows its whole label and nothing in the
panel is cut off sideways. In the dark theme the card's script preview is dark with readable text and tokens.
The Jobs tab's toolbars, with that job queued, wrap rather than scroll sideways. The header's new-chat button says it is Betty's. The
card, approved, puts its job in the Jobs tab, and shows in the Timeline under a name a person knows (not the session's id), and the scrubber's keys
step from call to call. Screenshots of each size and theme replace ``docs/screenshots/panel-<width>-<theme>-*``
with ``BETTY_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server_proc import JupyterServer
from notebook_support import SCRIPT, llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    DARK_THEME,
    WAIT_MS,
    assert_buttons_whole,
    assert_dark_and_readable,
    assert_in_viewport,
    assert_nothing_hidden_sideways,
    assert_toolbars_whole,
    colours_of,
    contrast,
    luminance,
    open_the_panel,
    page,
    running_lab,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, rows_of, scancel, ssh

pytestmark = pytest.mark.cluster

WINDOWS = [pytest.param((1024, 700), id="1024x700"), pytest.param((1400, 900), id="1400x900")]
USABLE_TRANSCRIPT_PX = 120  # six lines of the chat: what the person reads while a card waits


@pytest.fixture(scope="module", params=["light", "dark"])
def theme(request: pytest.FixtureRequest) -> str:
    """The JupyterLab theme the module's JupyterLab shows."""
    return str(request.param)


@pytest.fixture(scope="module")
def themed_lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
               theme: str) -> Iterator[JupyterServer]:
    """``jupyter lab`` serving the project in ``theme``."""
    with running_lab(project, tmp_path_factory, DARK_THEME if theme == "dark" else None) as running:
        yield running


def open_the_file_browser(page: Page) -> None:
    """JupyterLab's file browser shown in the left sidebar, as a person works."""
    browser = page.locator("#filebrowser")
    if not browser.is_visible():
        page.locator('.lm-TabBar-tab[data-id="filebrowser"]').click()
    expect(browser).to_be_visible()


def notebook_card(lab: JupyterServer, name: str) -> str:
    """A card to submit job ``name`` that a notebook's session waits on (not the panel's chat); its session id."""
    session = f"notebook-{uuid.uuid4().hex[:8]}"
    lab.request("POST", "sessions", {"session_id": session, "cluster": None, "mode": "confirm"})
    lab.request("POST", f"sessions/{session}/tools/cluster_submit",
                {"args": {"script": SCRIPT.format(name=name, seconds=300), "goal": "check the layout"},
                 "wait": False, "face": "notebook"})
    return session


def queued_job(lab: JupyterServer, name: str) -> str | None:
    """The id of the person's job named ``name`` in the queue, if there is one."""
    rows = rows_of(lab.request("GET", "jobs?mine=1"))
    return next((str(row["job_id"]) for row in rows if row.get("name") == name), None)


@pytest.mark.parametrize("page", WINDOWS, indirect=True)
def test_the_panel_keeps_every_surface_usable_beside_the_file_browser_in_each_theme(
        themed_lab: JupyterServer, theme: str, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    lab = themed_lab
    width = page.viewport_size["width"] if page.viewport_size else 0
    shot = f"panel-{width}-{theme}"
    name = f"layout-{uuid.uuid4().hex[:6]}"
    try:
        with screenshot_on_failure(page, "failure", shot):
            look_at_every_surface(lab, theme, page, name, shot)
    finally:
        job_id = queued_job(lab, name)
        if job_id is not None and job_state(dev_cluster, job_id):
            scancel(dev_cluster, job_id)


def look_at_every_surface(lab: JupyterServer, theme: str, page: Page, name: str, shot: str) -> None:
    """The chat with a notebook's card waiting, the Jobs tab with its job queued, the Timeline."""
    panel = open_the_panel(page, lab)
    open_the_file_browser(page)
    assert page.evaluate("document.body.dataset.jpThemeLight") == ("false" if theme == "dark" else "true")
    new_chat = panel.get_by_test_id("betty-new-chat")
    expect(new_chat).to_have_text("New Betty chat")
    expect(new_chat).to_have_attribute("aria-label", "New Betty chat")

    session = notebook_card(lab, name)
    item = panel.get_by_test_id("betty-waiting-item")
    expect(item).to_have_attribute("data-session-id", session)
    card = item.get_by_test_id("betty-approval-card")
    expect(card.get_by_test_id("betty-approve")).to_be_visible()
    transcript = panel.locator(".betty-Chat-transcript")
    height = (transcript.bounding_box() or {"height": 0})["height"]
    assert height >= USABLE_TRANSCRIPT_PX, f"a waiting card leaves the transcript {height:.0f} px"
    assert_in_viewport(page, panel.get_by_test_id("betty-prompt"))
    assert_in_viewport(page, panel.get_by_test_id("betty-send"))
    assert_buttons_whole(panel)
    assert_nothing_hidden_sideways(panel)
    card.get_by_test_id("betty-preview-exact").locator("summary").click()  # the exact script, one click away
    script = card.locator(".betty-Preview-script")
    expect(script).to_be_visible()
    assert_buttons_whole(panel)
    assert_nothing_hidden_sideways(panel)
    if theme == "dark":
        assert_dark_and_readable(script, "the card's script preview")
        background = colours_of(script)["background"]
        for token in script.locator("[class^='betty-hl-']").all()[:12]:
            ratio = contrast(colours_of(token)["text"], background)
            assert ratio >= 3, f"the token {token.inner_text()!r} is hard to read: contrast {ratio:.1f}"
    script.scroll_into_view_if_needed()
    screenshot(page, "1-waiting-card", shot)

    card.get_by_test_id("betty-approve").click()
    expect(panel.get_by_test_id("betty-waiting")).to_have_count(0)
    job_id = until_queued(lab, name)
    panel.get_by_test_id("betty-tab-jobs").click()
    panel.get_by_test_id("betty-jobs-refresh").click()
    expect(panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')).to_be_visible()
    assert_toolbars_whole(panel)
    assert_buttons_whole(panel)
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "2-jobs", shot)
    read_the_timeline(lab, page, panel, session, shot)


def until_queued(lab: JupyterServer, name: str) -> str:
    """The id of the job named ``name`` once the queue shows it (the approved card submitted it)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while (job_id := queued_job(lab, name)) is None:
        assert time.monotonic() < deadline, f"job {name} never reached the queue"
    return job_id


def read_the_timeline(lab: JupyterServer, page: Page, panel: Locator, session: str, shot: str) -> None:
    """The denied card's call in the Timeline: its lane named by whom the session worked for and when, the
    session's id only in the tooltip; the scrubber's keys step from call to call."""
    panel.get_by_test_id("betty-tab-timeline").click()
    view = panel.get_by_test_id("betty-timeline")
    choice = view.get_by_test_id("betty-timeline-session")
    expect(choice.locator(f'option[value="{session}"]')).to_have_count(1)
    label = choice.locator(f'option[value="{session}"]').inner_text()
    assert session not in label and re.fullmatch(r"chat from \d\d:\d\d(:\d\d)?", label), label
    choice.select_option(session)
    expect(view.get_by_test_id("betty-timeline-call")).to_have_count(1)
    expect(view.get_by_test_id("betty-timeline-call")).to_contain_text("approved")
    title = view.get_by_test_id("betty-timeline-lane-title")
    expect(title).to_have_text(label)
    expect(title).to_have_attribute("title", session)
    # The tool's name breaks, if at all, after an underscore: never inside a word.
    tool = view.get_by_test_id("betty-timeline-call").locator(".betty-Timeline-toolName")
    expect(tool).to_have_text("cluster_submit")
    lines = tool.evaluate("""element => {
      const range = document.createRange();
      const words = [];
      for (const text of [...element.childNodes].filter(node => node.nodeType === Node.TEXT_NODE)) {
        range.selectNodeContents(text);
        words.push(range.getClientRects().length);
      }
      return words;
    }""")
    assert all(count <= 1 for count in lines), f"the tool's name breaks inside a word: {lines}"
    choice.select_option("")
    calls = view.get_by_test_id("betty-timeline-call")
    expect(calls).not_to_have_count(1)  # every session's calls again, the other tests' included
    count = calls.count()  # as the view loaded them: calls logged since then come with its next refresh
    assert count <= len(lab.request("GET", "timeline")["calls"])
    at = view.get_by_test_id("betty-timeline-at")
    scrubber = view.get_by_test_id("betty-timeline-scrubber")
    scrubber.focus()
    scrubber.press("Home")
    expect(at).to_contain_text(f": 1 of {count} call")
    if count > 1:
        scrubber.press("ArrowRight")
        expect(at).to_contain_text(f": 2 of {count} calls")
        scrubber.press("ArrowLeft")
        expect(at).to_contain_text(f": 1 of {count} calls")
    scrubber.press("End")
    expect(at).to_contain_text(f": {count} of {count} call")
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "3-timeline", shot)


NOTEBOOK = "narrow.ipynb"
NOTEBOOK_CELLS = ["%load_ext betty_jupyter",
                  "%%betty submit --slug narrow --goal 'read the card beside the panel'\n"
                  + SCRIPT.format(name="narrow-card", seconds=300),
                  "%betty gpu calculator",
                  "%betty squeue --me"]
# ipywidgets' buttons and labels cut to an ellipsis ("A…") where their box is narrower than their text.
CUT_WIDGETS = """root => [...root.querySelectorAll('.widget-button, .widget-toggle-button, .widget-label')]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim())"""
# Rows of widgets that scroll or spill sideways out of the notebook's output area.
WIDE_ROWS = """root => [...root.querySelectorAll('.widget-hbox')]
    .filter(e => e.offsetParent !== null)
    .filter(e => e.scrollWidth > e.clientWidth + 1
                 || e.getBoundingClientRect().right > e.closest('.jp-OutputArea-output').getBoundingClientRect().right + 1)
    .map(e => `${e.textContent.trim().slice(0, 40)}: ${e.scrollWidth} px in ${e.clientWidth} px, ending at `
              + `${Math.round(e.getBoundingClientRect().right)} (the output at `
              + `${Math.round(e.closest('.jp-OutputArea-output').getBoundingClientRect().right)})`
              + [...e.children].map(c => ` [${c.className} ${Math.round(c.getBoundingClientRect().width)} ${getComputedStyle(c).maxWidth}]`).join(''))"""


# Widgets' HTML (a job table, a card) wider than its box that neither wraps nor scrolls: cut off at the right.
CUT_HTML = """root => [...root.querySelectorAll('.widget-html')]
    .filter(e => e.offsetParent !== null)
    .filter(e => !['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
                 && [e, ...e.querySelectorAll('*')].some(inner => inner.getBoundingClientRect().right
                     > e.closest('.jp-OutputArea-output').getBoundingClientRect().right + 1))
    .map(e => e.textContent.trim().slice(0, 60))"""


@pytest.mark.parametrize("page", [pytest.param((1024, 700), id="1024x700")], indirect=True)
def test_the_notebooks_widgets_stay_whole_beside_the_file_browser_and_the_panel_in_each_theme(
        themed_lab: JupyterServer, theme: str, project: dict[str, Any],  # noqa: F811
        dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    """A notebook at 1024×700 with the file browser and Betty's panel open leaves the notebook about 300 px: the
    card's buttons, the job table's toolbar and the calculator wrap rather than cut their labels or scroll
    sideways, and the job table's title reads on one line. In the dark theme the card's script is dark with
    readable tokens and the calculator's chart draws its text in the theme's colour on a dark background."""
    lab = themed_lab
    # A job of the person's with a long name: the job table's Cancel row lists it.
    made = ssh(dev_cluster, f"sbatch --parsable --job-name=a-long-name-a-person-gave-this-job-{uuid.uuid4().hex[:8]} "
                            "--time=10 --wrap 'sleep 300'")
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip().split(";")[0]
    try:
        read_the_notebook(lab, theme, project, page)
    finally:
        scancel(dev_cluster, job_id)


def read_the_notebook(lab: JupyterServer, theme: str, project: dict[str, Any], page: Page) -> None:  # noqa: F811
    """Run the notebook beside the file browser and the panel, and read its widgets."""
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    (Path(project["root"]) / NOTEBOOK).write_text(nbformat.writes(book))
    shot = f"notebook-1024-{theme}"
    with screenshot_on_failure(page, "failure", shot):
        page.goto(f"{lab.url}lab/tree/{NOTEBOOK}?reset&token={lab.token}")
        notebook = page.locator("#jp-main-dock-panel .jp-NotebookPanel:visible")
        expect(notebook).to_have_count(1)
        expect(page.get_by_role("button", name=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_be_visible()
        open_the_file_browser(page)
        page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()
        expect(page.get_by_test_id("betty-panel")).to_be_visible()
        width = (notebook.bounding_box() or {"width": 0})["width"]
        assert width <= 420, f"the notebook is {width:.0f} px wide: not the narrow case"
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        approve = notebook.locator(".betty-approve")
        expect(approve).to_be_visible()
        expect(notebook.locator(".betty-gpu-chart svg")).to_have_count(1)
        expect(notebook.locator(".betty-job-toolbar")).to_be_visible()
        expect(notebook.locator(".betty-cancel")).to_be_visible()
        assert notebook.evaluate(CUT_WIDGETS) == [], "every button and label shows its whole text"
        assert notebook.evaluate(WIDE_ROWS) == [], "no row of widgets scrolls or spills sideways"
        assert notebook.evaluate(CUT_HTML) == [], "no table or text is cut off at the notebook's right edge"
        title = notebook.locator(".betty-job-title")
        words = len(title.inner_text().split())
        lines = title.locator("b").evaluate("element => element.getClientRects().length")
        assert words < 2 or lines < words, f"the job table's title stands one word per line ({lines} lines)"
        code = notebook.locator(".betty-code").first
        chart_text = notebook.locator(".betty-gpu-chart svg text").first
        if theme == "dark":
            assert_dark_and_readable(code, "the card's script")
            background = colours_of(code)["background"]
            for token in code.locator("span").all()[:12]:
                ratio = contrast(colours_of(token)["text"], background)
                assert ratio >= 3, f"the token {token.inner_text()!r} is hard to read: contrast {ratio:.1f}"
            fill = chart_text.evaluate("text => (getComputedStyle(text).fill.match(/[\\d.]+/g) || []).map(Number)")
            chart_background = colours_of(notebook.locator(".betty-gpu-chart"))["background"]
            assert luminance(chart_background) < 0.2, f"the chart sits on a light background: {chart_background}"
            ratio = contrast(fill[:3], chart_background)
            assert ratio >= 4.5, f"the chart's text is hard to read: contrast {ratio:.1f} ({fill} on {chart_background})"
        # The same card waits in the panel too, which keeps the chat readable beside it.
        panel = page.get_by_test_id("betty-panel")
        expect(panel.get_by_test_id("betty-waiting-item")).to_have_count(1)
        height = (panel.locator(".betty-Chat-transcript").bounding_box() or {"height": 0})["height"]
        assert height >= USABLE_TRANSCRIPT_PX, f"a notebook's waiting card leaves the transcript {height:.0f} px"
        code.scroll_into_view_if_needed()
        screenshot(page, "1-card", shot)
        notebook.locator(".betty-gpu-chart").scroll_into_view_if_needed()
        screenshot(page, "2-calculator", shot)
        notebook.locator(".betty-job-toolbar").scroll_into_view_if_needed()
        screenshot(page, "3-job-table", shot)
        notebook.locator(".betty-deny").click()
        expect(notebook.locator(".jp-OutputArea-output", has_text="denied")).to_have_count(1)
