"""The side panel in a real browser: headless Chromium (Debian's) driving a real JupyterLab on the dev cluster.

A person opens Betty's panel, asks for a job, reads the script on the approval card,
approves it, sees the job id in the chat and in the Jobs tab, and opens the experiment's
notebook from there. The chat model is the scripted one, over real HTTP. Screenshots of each
step (and of a failure) are kept under ``test-artifacts/screenshots/``; with
``BETTY_UPDATE_SCREENSHOTS=1`` they also replace the ones the docs show (``docs/screenshots/``).
The browser, the JupyterLab and the screenshots come from ``panel_support``.
"""

from __future__ import annotations

import getpass
import re
import time

import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, rows_of, scancel

SCRIPT = """#!/bin/bash
#SBATCH --job-name=panel-demo
#SBATCH --time=00:05:00
#SBATCH --mem=100M
echo hello; sleep 60
"""
GOAL = "check that a job submitted from the side panel runs"
PROMPT = "Please submit a small test job named panel-demo."


def test_a_job_asked_for_in_the_panel_is_approved_submitted_and_opened(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    llm.add(call("cluster_submit", {"script": SCRIPT, "goal": GOAL}), say("Submitted."))
    job_id: str | None = None
    with screenshot_on_failure(page, "failure"):
        try:
            panel = open_the_panel(page, lab)
            ask_and_read_the_card(page, panel)
            job_id, slug = approve(page, panel, llm)
            queued = lab.request("GET", "jobs?mine=1")
            assert job_id in [str(job["job_id"]) for job in rows_of(queued)], (
                f"job {job_id} is not in the dev cluster's queue: {queued['data']}")
            open_the_notebook_from_the_jobs_tab(page, panel, job_id, slug)
            cancel_through_the_api(lab, dev_cluster, job_id)
        finally:
            if job_id is not None and job_state(dev_cluster, job_id):
                scancel(dev_cluster, job_id)


def ask_and_read_the_card(page: Page, panel: Locator) -> None:
    """Type the prompt and send it; the approval card shows every line of the script."""
    panel.get_by_test_id("betty-prompt").fill(PROMPT)
    panel.get_by_test_id("betty-send").click()
    expect(panel.get_by_test_id("betty-message-user")).to_have_text(PROMPT)
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
    expect(card).to_have_attribute("data-status", "pending")
    preview = card.get_by_test_id("betty-preview")
    expect(preview).to_have_attribute("data-kind", "script")
    for line in SCRIPT.strip().splitlines():
        expect(preview.locator(".betty-Preview-line", has_text=line)).to_have_count(1)
    expect(card.get_by_test_id("betty-approval-tier")).to_have_text("tier 2")
    expect(panel.get_by_test_id("betty-pending-count")).to_have_text("1")
    screenshot(page, "1-approval-card")


def approve(page: Page, panel: Locator, model: ScriptedLLM) -> tuple[str, str]:
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
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": PROMPT}, "the model got the typed prompt"
    assert model.requests[-1]["messages"][-1]["role"] == "tool", "the model saw the submission's result"
    screenshot(page, "2-approved")
    return found.group(1), found.group(2)


def open_the_notebook_from_the_jobs_tab(page: Page, panel: Locator, job_id: str, slug: str) -> None:
    """The Jobs tab lists the job with a link to its experiment; the link opens the notebook in JupyterLab."""
    panel.get_by_test_id("betty-tab-jobs").click()
    job_row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')
    expect(job_row).to_contain_text("panel-demo")
    expect(job_row).to_have_attribute("data-state", re.compile(r"^(PENDING|CONFIGURING|RUNNING)$"))
    open_notebook = job_row.get_by_test_id("betty-job-open-notebook")
    expect(open_notebook).to_have_attribute("title", f"notebooks/experiments/{slug}.ipynb")
    screenshot(page, "3-jobs-tab")

    open_notebook.click()
    tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text=f"{slug}.ipynb")
    expect(tab).to_have_count(1)
    expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"))
    notebook = page.locator("#jp-main-dock-panel .jp-NotebookPanel:visible")
    expect(notebook.locator(".jp-RenderedMarkdown", has_text=GOAL)).to_have_count(1)
    script_cell = notebook.locator(".jp-RenderedMarkdown", has_text="#SBATCH --job-name=panel-demo")
    script_cell.scroll_into_view_if_needed()
    expect(script_cell).to_contain_text("echo hello; sleep 60")
    screenshot(page, "4-experiment-notebook")


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
