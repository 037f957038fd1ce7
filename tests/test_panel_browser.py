"""The side panel in a real browser: headless Chromium (Debian's) driving a real JupyterLab on the dev cluster.

A person opens Betty's panel, asks for a job, reads the script and its GPU estimate on the approval card,
approves it, sees the job id in the chat and in the Jobs tab, looks at the Experiments and Automations tabs,
and opens the experiment's notebook. The chat model is the scripted one, over real HTTP. All of it runs in a
1400×900 and a 1024×700 window with the panel at the width it opens at: every tab's label shows whole, nothing
in the panel is cut off sideways or scrolls it sideways, and the card's Approve button is in view and focused
when the card arrives. Screenshots of each step (and of a failure) are kept under
``test-artifacts/screenshots/`` as ``panel-<width>-<step>.png``; with ``BETTY_UPDATE_SCREENSHOTS=1`` they also
replace the ones the docs show (``docs/screenshots/``). The browser, the JupyterLab and the screenshots come
from ``panel_support``.
"""

from __future__ import annotations

import getpass
import re
import time

import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    assert_in_viewport,
    assert_nothing_hidden_sideways,
    assert_tabs_legible,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, rows_of, scancel

from betty_jupyter.agent.tools.gpu import EstimateArgs
from betty_jupyter.gpu.model_catalog import find_model
from betty_jupyter.gpu.estimate import estimate

SCRIPT = """#!/bin/bash
#SBATCH --job-name=panel-demo
#SBATCH --time=00:05:00
#SBATCH --mem=100M
# a comment longer than the panel is wide, which the card shows whole by wrapping it, never cut off at the edge
echo hello; sleep 60
"""
GOAL = "check that a job submitted from the side panel runs"
PROMPT = "Please submit a small test job named panel-demo."
SIZING = {"model": "Llama-3.1-8B", "method": "lora", "batch_size": 4, "seq_len": 2048}
WINDOWS = [pytest.param((1400, 900), id="1400x900"), pytest.param((1024, 700), id="1024x700")]
PANEL_WIDTH = 300  # the least the panel opens at, at both sizes: its tabs and a card in a row


@pytest.mark.parametrize("page", WINDOWS, indirect=True)
def test_a_job_asked_for_in_the_panel_is_approved_submitted_and_opened(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    # What the gpu_estimate tool answers, passed on to the submission as a model would.
    sized = estimate(find_model(SIZING["model"]).architecture, EstimateArgs(**SIZING).request()).as_dict()
    llm.add(call("gpu_estimate", SIZING), call("cluster_submit", {"script": SCRIPT, "goal": GOAL, "gpu_estimate": sized}),
            say("Submitted."))
    asked_before = len(llm.requests)
    width = page.viewport_size["width"] if page.viewport_size else 0
    shot = f"panel-{width}"
    job_id: str | None = None
    with screenshot_on_failure(page, "failure", shot):
        try:
            panel = open_the_panel(page, lab)
            look_at_the_panel_as_it_opens(panel)
            ask_and_read_the_card(page, panel, shot)
            job_id, slug = approve(page, panel, llm, asked_before, shot)
            queued = lab.request("GET", "jobs?mine=1")
            assert job_id in [str(job["job_id"]) for job in rows_of(queued)], (
                f"job {job_id} is not in the dev cluster's queue: {queued['data']}")
            read_the_jobs_tab(page, panel, job_id, slug, shot)
            read_the_experiments_and_automations_tabs(page, panel, slug, shot)
            open_the_notebook_from_the_jobs_tab(page, panel, job_id, slug, shot)
            cancel_through_the_api(lab, dev_cluster, job_id)
        finally:
            if job_id is not None and job_state(dev_cluster, job_id):
                scancel(dev_cluster, job_id)


def look_at_the_panel_as_it_opens(panel: Locator) -> None:
    """The panel opens wide enough for its tabs: each label whole, none over another, nothing cut off sideways."""
    # JupyterLab settled (the file browser listed, the launcher drawn), for the screenshots.
    expect(panel.page.locator(".jp-DirListing-item").first).to_be_visible()
    expect(panel.page.locator(".jp-Launcher-body")).to_be_visible()
    panel.page.wait_for_function(
        f"() => document.querySelector('[data-testid=betty-panel]').offsetWidth >= {PANEL_WIDTH}")
    assert_tabs_legible(panel)
    assert_nothing_hidden_sideways(panel)


def ask_and_read_the_card(page: Page, panel: Locator, shot: str) -> None:
    """Type the prompt and send it; the approval card arrives with its Approve button in view and focused, and
    shows every line of the script, wrapped rather than cut off, and the GPU estimate as its breakdown."""
    panel.get_by_test_id("betty-prompt").fill(PROMPT)
    panel.get_by_test_id("betty-send").click()
    expect(panel.get_by_test_id("betty-message-user")).to_have_text(PROMPT)
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
    expect(card).to_have_attribute("data-status", "pending")
    approve_button = card.get_by_test_id("betty-approve")
    expect(approve_button).to_be_focused()
    assert_in_viewport(page, approve_button)
    preview = card.get_by_test_id("betty-preview")
    expect(preview).to_have_attribute("data-kind", "script")
    for line in SCRIPT.strip().splitlines():
        expect(preview.locator(".betty-Preview-line", has_text=line)).to_have_count(1)
    script = preview.locator(".betty-Preview-script")
    assert script.evaluate("pre => pre.scrollWidth <= pre.clientWidth"), "the script is cut off sideways"
    long_line = preview.locator(".betty-Preview-line", has_text="a comment longer than the panel")
    line_height = preview.locator(".betty-Preview-line", has_text="#!/bin/bash").bounding_box()
    wrapped = long_line.bounding_box()
    assert line_height is not None and wrapped is not None and wrapped["height"] > 1.5 * line_height["height"], (
        "the long line of the script is not wrapped")
    estimate_view = card.get_by_test_id("betty-gpu-estimate")
    expect(estimate_view).to_contain_text(re.compile(r"\d+\.\d GiB per GPU at the "))
    expect(estimate_view.locator("tr", has_text="weights")).to_contain_text(re.compile(r"\d+\.\d GiB"))
    assert "{" not in card.inner_text(), "the card shows JSON"
    expect(card.get_by_test_id("betty-approval-tier")).to_have_text("tier 2 · always asks")
    expect(panel.get_by_test_id("betty-pending-count")).to_have_text("1")
    row = panel.locator('[data-testid="betty-tool-row"]', has_text="gpu_estimate")
    expect(row).to_have_attribute("data-state", "ok")
    assert "\n" not in row.locator("summary").inner_text().strip(), "the tool's row is one summary, not its table"
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "1-approval-card", shot)


def approve(page: Page, panel: Locator, model: ScriptedLLM, asked_before: int, shot: str) -> tuple[str, str]:
    """Click Approve; the chat names the job and the model has its last word. (job id, experiment slug)."""
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
    card.get_by_test_id("betty-approve").click()
    expect(card).to_have_attribute("data-status", "decided")
    record = card.get_by_test_id("betty-approval-record")
    expect(record).to_have_attribute("data-decision", "approved")
    expect(record).to_contain_text(f"approved by {getpass.getuser()} (side panel)")
    assert not re.search(r"[0-9a-f]{32}", record.inner_text()), "the person by name, never an anonymous hex id"
    row = panel.locator('[data-testid="betty-tool-row"]', has_text="cluster_submit")
    expect(row).to_have_attribute("data-state", "ok")
    expect(row).to_contain_text(re.compile(r"submitted job \d+ on betty-dev as \d{4}-\d\d-\d\d-panel-demo"))
    found = re.search(r"submitted job (\d+) on betty-dev as (\d{4}-\d\d-\d\d-panel-demo\S*);", row.inner_text())
    assert found, row.inner_text()
    expect(panel.get_by_test_id("betty-message-assistant").last).to_have_text("Submitted.")
    expect(panel.get_by_test_id("betty-working")).to_have_count(0)
    expect(panel.get_by_test_id("betty-pending-count")).to_have_count(0)
    assert model.remaining == 0 and model.errors == []
    first = model.requests[asked_before]
    assert first["messages"][-1] == {"role": "user", "content": PROMPT}, "the model got the typed prompt"
    assert model.requests[-1]["messages"][-1]["role"] == "tool", "the model saw the submission's result"
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "2-approved", shot)
    return found.group(1), found.group(2)


def read_the_jobs_tab(page: Page, panel: Locator, job_id: str, slug: str, shot: str) -> None:
    """The Jobs tab lists the job, its time as elapsed of its limit, and a link to its experiment."""
    panel.get_by_test_id("betty-tab-jobs").click()
    job_row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')
    expect(job_row).to_contain_text("panel-demo")
    expect(job_row).to_have_attribute("data-state", re.compile(r"^(PENDING|CONFIGURING|RUNNING)$"))
    expect(job_row).to_contain_text(re.compile(r"\d:\d\d:\d\d of 0:05:00"))
    expect(job_row.get_by_test_id("betty-job-open-notebook")).to_have_attribute(
        "title", f"notebooks/experiments/{slug}.ipynb")
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "3-jobs-tab", shot)


def read_the_experiments_and_automations_tabs(page: Page, panel: Locator, slug: str, shot: str) -> None:
    """The experiment says what its job asked for in units; the paused daily digest its schedule in words and
    Enable (it was never on)."""
    panel.get_by_test_id("betty-tab-experiments").click()
    experiment = panel.locator(f'[data-testid="betty-experiment-row"][data-slug="{slug}"]')
    expect(experiment.get_by_test_id("betty-experiment-resources")).to_have_text("asked for 5 min · 100 MiB")
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "4-experiments-tab", shot)

    panel.get_by_test_id("betty-tab-automations").click()
    digest = panel.locator('[data-testid="betty-automation-card"][data-id="daily-digest"]')
    expect(digest.get_by_test_id("betty-automation-trigger")).to_contain_text("daily at 08:00 (cron 0 8 * * *)")
    expect(digest.get_by_test_id("betty-automation-resume")).to_have_text("Enable")
    assert_nothing_hidden_sideways(panel)
    screenshot(page, "5-automations-tab", shot)


def open_the_notebook_from_the_jobs_tab(page: Page, panel: Locator, job_id: str, slug: str, shot: str) -> None:
    """The Jobs tab's link to the experiment opens its notebook in JupyterLab."""
    panel.get_by_test_id("betty-tab-jobs").click()
    open_notebook = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]').get_by_test_id(
        "betty-job-open-notebook")
    open_notebook.click()
    tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text=f"{slug}.ipynb")
    expect(tab).to_have_count(1)
    expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"))
    notebook = page.locator("#jp-main-dock-panel .jp-NotebookPanel:visible")
    expect(notebook.locator(".jp-RenderedMarkdown", has_text=GOAL)).to_have_count(1)
    script_cell = notebook.locator(".jp-RenderedMarkdown", has_text="#SBATCH --job-name=panel-demo")
    script_cell.scroll_into_view_if_needed()
    expect(script_cell).to_contain_text("echo hello; sleep 60")
    screenshot(page, "6-experiment-notebook", shot)


def cancel_through_the_api(lab: JupyterServer, dev_cluster: dict[str, str], job_id: str) -> None:
    """Leave the cluster clean the way a person would: ask to cancel, approve the card."""
    started = lab.request("POST", f"jobs/{job_id}/cancel", {})
    for _ in range(600):
        cards = [card for card in lab.request("GET", "approvals")["approvals"] if card["call_id"] == started["call_id"]]
        if cards:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"no approval card came for cancelling job {job_id}")
    assert cards[0]["preview"]["text"] == f"scancel {job_id}"
    answer = lab.request("POST", f"approvals/{cards[0]['approval_id']}", {"decision": "approved"})
    assert answer["decision"] == "approved"
    for _ in range(600):
        if job_state(dev_cluster, job_id) in ("", "CANCELLED"):
            return
        time.sleep(0.5)
    pytest.fail(f"job {job_id} was still {job_state(dev_cluster, job_id)} after its cancel was approved")
