"""The Jobs tab with hundreds of real jobs, in Debian's Chromium against a real JupyterLab on the dev cluster.

The person has a few hundred held jobs in the queue (submitted with plain ``sbatch`` in one batch, one of them
with a long hostile name; a few more that run at once and end, for Finished recently), opens the Jobs tab and
scrolls its list to the end: the last job shows, in view, while only the rows around the view are in the page,
every row one height, and the scrollbar spans the whole list; Finished recently keeps its own rows in view
below. It does so at 1400×900 with the keyboard (End in the focused list) and at 1024×700 by scrolling. The
last job's Cancel still asks through an approval card in the chat, which is denied; the test cancels its jobs
itself at the end. Screenshots: ``test-artifacts/screenshots/jobs-<width>-*.png``.
"""

from __future__ import annotations

import os
import secrets
import subprocess

from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    WAIT_MS,
    assert_in_viewport,
    assert_nothing_hidden_sideways,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Locator, Page, expect

from betty_jupyter.safe_text import visible

JOBS = 300
FINISHED = 20
HOSTILE = '<img src=x onerror="window.__pwned=1"><b>sweep</b> ' + "a-very-long-name-" * 6
ROWS_IN_PAGE = 60  # far fewer than JOBS: the rows in view at either window size, and the few kept either side

# What the list holds: its rows in the page, their heights, where they lie in the list.
_LIST = """list => {
  const rows = Array.from(list.querySelectorAll('[data-testid="betty-job-row"]'));
  return {
    rowcount: Number(list.querySelector('table').getAttribute('aria-rowcount')),
    indexes: rows.map(row => Number(row.getAttribute('aria-rowindex'))),
    ids: rows.map(row => row.dataset.jobId),
    heights: rows.map(row => row.getBoundingClientRect().height),
    scrollHeight: list.scrollHeight,
    clientHeight: list.clientHeight,
  };
}"""


def submitted(cluster: dict[str, str], names: list[str], held: bool = True) -> list[str]:
    """A job for each name, submitted by one shell in one go: held (they wait in the queue and never run), or
    running ``true`` (they end at once); their ids."""
    count = len(names)
    command = "--hold --wrap 'sleep 60'" if held else "--wrap true"
    script = "\n".join(
        f"sbatch --parsable --chdir=/tmp --output=/dev/null --time=5 --job-name={quoted(name)} {command}"
        for name in names)
    made = subprocess.run(["bash", "-e"], input=script, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **cluster})
    ids = [line.split(";")[0] for line in made.stdout.split()]
    if made.returncode != 0 or len(ids) != count:
        cancel(cluster, ids)
        raise AssertionError(f"sbatch submitted {len(ids)} of {count} jobs: {made.stderr[-2000:]}")
    return ids


def quoted(text: str) -> str:
    """``text`` as one shell word."""
    return "'" + text.replace("'", "'\\''") + "'"


def cancel(cluster: dict[str, str], ids: list[str]) -> None:
    if ids:
        subprocess.run(["scancel", *ids], env={**os.environ, **cluster}, capture_output=True, timeout=120)


def test_hundreds_of_jobs_scroll_in_one_list_to_the_last(
        lab: JupyterServer, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    prefix = f"many-{secrets.token_hex(3)}"
    ended = submitted(dev_cluster, [f"{prefix}-done-{i:02d}" for i in range(FINISHED)], held=False)
    # the first with a long hostile name
    ids = submitted(dev_cluster, [HOSTILE] + [f"{prefix}-{i:03d}" for i in range(1, JOBS)])
    try:
        with screenshot_on_failure(page, "failure", "jobs"):
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-tab-jobs").click()
            summary = panel.get_by_test_id("betty-jobs-summary")
            # every job of ours is counted (the queue may hold a few more of the person's)
            page.wait_for_function(
                f"() => Number(document.querySelector('[data-testid=betty-jobs-summary]')?.dataset.jobs) >= {JOBS}",
                timeout=WAIT_MS)
            expect(summary).to_contain_text("PENDING")
            # the jobs that ended are among those finished recently, in a list of their own below
            finished = panel.get_by_test_id("betty-finished-list")
            expect(finished.locator(
                ", ".join(f'[data-testid="betty-finished-row"][data-job-id="{job_id}"]' for job_id in ended)).first
                   ).to_be_visible()
            assert finished.get_by_test_id("betty-finished-row").count() <= ROWS_IN_PAGE
            job_list = panel.get_by_test_id("betty-jobs-list")
            hostile_row = job_list.locator(f'[data-testid="betty-job-row"][data-job-id="{ids[0]}"]')
            scroll_to_the_end(page, panel, job_list, "1400", keyboard=True, hostile_row=hostile_row)

            page.set_viewport_size({"width": 1024, "height": 700})
            job_list.evaluate("list => { list.scrollTop = 0; }")
            expect(job_list.locator('[data-testid="betty-job-row"][aria-rowindex="2"]')).to_have_count(1)
            scroll_to_the_end(page, panel, job_list, "1024", keyboard=False, hostile_row=hostile_row)
            cancel_the_last_job(panel, job_list)
            assert page.evaluate("() => window.__pwned") is None
    finally:
        cancel(dev_cluster, ids + ended)


def scroll_to_the_end(page: Page, panel: Locator, job_list: Locator, width: str, *, keyboard: bool,
                      hostile_row: Locator) -> None:
    """Scroll the list to its end (End in the focused list, or the scrollbar's way): the last row of the list is
    in the page and in view, with few rows in the page, every one as tall as the others."""
    at_top = job_list.evaluate(_LIST)
    assert at_top["rowcount"] - 1 >= JOBS, at_top["rowcount"]
    assert 0 < len(at_top["ids"]) <= ROWS_IN_PAGE, f"{len(at_top['ids'])} rows in the page"
    height = at_top["heights"][0]
    assert all(abs(each - height) < 0.5 for each in at_top["heights"]), f"rows of several heights: {at_top['heights']}"
    # the scrollbar spans every row, not just those in the page
    assert at_top["scrollHeight"] >= (at_top["rowcount"] - 1) * height, at_top
    if hostile_row.count():
        expect(hostile_row.locator(".betty-JobRow-title")).to_have_text(visible(HOSTILE))
        assert hostile_row.locator("img, b").count() == 0
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "top", f"jobs-{width}")

    if keyboard:
        job_list.focus()
        expect(job_list).to_be_focused()
        page.keyboard.press("End")
    else:
        job_list.evaluate("list => { list.scrollTop = list.scrollHeight; }")
    last = job_list.locator(f'[data-testid="betty-job-row"][aria-rowindex="{at_top["rowcount"]}"]')
    expect(last).to_have_count(1)
    expect(last).to_be_visible()
    last.scroll_into_view_if_needed()  # the list may sit partly below the tab's own fold at a small window
    assert_in_viewport(page, last.get_by_test_id("betty-job-cancel"))
    at_end = job_list.evaluate(_LIST)
    assert 0 < len(at_end["ids"]) <= ROWS_IN_PAGE, f"{len(at_end['ids'])} rows in the page"
    assert at_end["indexes"] == list(range(at_end["indexes"][0], at_top["rowcount"] + 1)), at_end["indexes"]
    assert all(abs(each - height) < 0.5 for each in at_end["heights"]), at_end["heights"]
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "end", f"jobs-{width}")


def cancel_the_last_job(panel: Locator, job_list: Locator) -> None:
    """The last job's Cancel asks through a card in the chat, which the person denies; back in the Jobs tab, the
    row says where to approve it, and is as tall as every other row."""
    last = job_list.get_by_test_id("betty-job-row").last
    job_id = last.get_attribute("data-job-id")
    last.get_by_test_id("betty-job-cancel").click()
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_cancel"]')
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.get_by_test_id("betty-preview")).to_contain_text(f"scancel {job_id}")
    screenshot(panel.page, "cancel-card", "jobs-1024")
    card.get_by_test_id("betty-deny").click()
    expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "denied")
    panel.get_by_test_id("betty-tab-jobs").click()
    row = job_list.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')
    expect(row).to_contain_text("approve it in the chat")
    heights = job_list.evaluate(_LIST)["heights"]
    assert all(abs(each - heights[0]) < 0.5 for each in heights), f"rows of several heights: {heights}"
    screenshot(panel.page, "cancel-asked", "jobs-1024")
