"""Editing an approval card in the side panel, in Debian's Chromium against the real dev cluster.

The model asks to submit a script; the person opens Edit, finds the script in JupyterLab's code editor (not an
escaped JSON string) with fields for its resources, changes the memory, edits the script, sees a wrong partition
refused with one line and Approve edited held back, fixes it with the partition field, approves once the new
preview came back, and the job that runs on the dev cluster has the edited resources. Then Resubmit… of that job,
once it has finished, opens a new card in the editor with the script as it ran. Hostile text in the script stays
text throughout.
"""

from __future__ import annotations

import re

from conftest import ssh
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, scancel

HOSTILE = "# <img src=x onerror=\"document.title='owned'\"> \x1b[31mred\x1b[0m"
SCRIPT = f"""#!/bin/bash
#SBATCH --job-name=panel-edit
#SBATCH --time=00:05:00
#SBATCH --mem=100M
{HOSTILE}
echo hello; sleep 300
"""
GOAL = "check that an edited submission runs as edited"


def test_an_edited_card_is_checked_again_approved_and_runs_as_edited_and_resubmit_opens_the_editor(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    llm.add(call("cluster_submit", {"script": SCRIPT, "goal": GOAL}), say("Submitted as you edited it."))
    job_id: str | None = None
    with screenshot_on_failure(page, "failure", prefix="edit"):
        try:
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-prompt").fill("Submit a small job named panel-edit.")
            panel.get_by_test_id("betty-send").click()
            card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
            expect(card).to_have_attribute("data-status", "pending")
            edit_the_card(page, card)
            job_id = approve_the_edit(page, panel, card)
            shown = ssh(dev_cluster, f"scontrol show job -o {job_id}").stdout
            assert "MinMemoryNode=200M" in shown and "Partition=cpu" in shown, shown
            assert "TimeLimit=00:05:00" in shown, shown
            scancel(dev_cluster, job_id)
            resubmit_from_the_jobs_tab(page, panel, job_id)
        finally:
            if job_id is not None and job_state(dev_cluster, job_id):
                scancel(dev_cluster, job_id)
    assert page.title() != "owned", "the script's HTML never ran"


def editor_text(editor: Locator) -> str:
    """The text of a CodeMirror editor, line by line."""
    return "\n".join(editor.locator(".cm-line").all_inner_texts())


def edit_the_card(page: Page, card: Locator) -> None:
    """Edit, opened from the keyboard: the script in JupyterLab's editor and the resource fields; each change is
    checked again. Tab in the script indents at the caret, Shift+Tab leaves the script."""
    card.get_by_test_id("betty-edit").focus()
    page.keyboard.press("Enter")
    form = card.get_by_test_id("betty-edit-form")
    expect(form).to_be_focused()
    editor = form.get_by_test_id("betty-edit-script").locator(".cm-editor")
    expect(editor).to_be_visible()
    editor.locator(".cm-line", has_text="echo hello; sleep 300").click()
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    expect(editor.locator(".cm-line").first).to_have_text("#!/bin/bash")
    expect(editor.locator(".cm-line", has_text="echo hello")).to_have_text("  echo hello; sleep 300")
    expect(editor.locator(".cm-content")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(editor.locator(".cm-content")).not_to_be_focused()
    expect(form).to_be_visible()
    expect(editor.locator(".cm-line", has_text="#SBATCH --mem=100M")).to_have_count(1)
    expect(editor.locator(".cm-line", has_text="<img src=x")).to_have_count(1)
    assert card.locator("img[src], [onerror]").count() == 0, "the hostile line is text in the editor"
    assert "\\n" not in form.inner_text(), "the script is shown as lines, not as an escaped string"
    expect(form.get_by_test_id("betty-edit-time")).to_have_value("00:05:00")
    expect(form.get_by_test_id("betty-edit-status")).to_have_attribute("data-state", "ready")

    form.get_by_test_id("betty-edit-mem").fill("200M")
    expect(editor.locator(".cm-line", has_text="#SBATCH --mem=200M")).to_have_count(1)

    editor.locator(".cm-line", has_text="#SBATCH --job-name=panel-edit").click()
    page.keyboard.press("End")
    page.keyboard.insert_text("\n#SBATCH --partition=gpu-large")
    partition = form.get_by_test_id("betty-edit-partition")
    expect(partition).to_have_value("gpu-large")
    status = form.get_by_test_id("betty-edit-status")
    expect(status).to_have_attribute("data-state", "refused")
    expect(status).to_contain_text("gpu-large")
    expect(form.get_by_test_id("betty-edit-send")).to_be_disabled()
    screenshot(page, "refused", prefix="edit")

    partition.select_option("cpu")
    expect(editor.locator(".cm-line", has_text="#SBATCH --partition=cpu")).to_have_count(1)
    expect(status).to_have_attribute("data-state", "ready")
    repreview = form.get_by_test_id("betty-edit-preview")
    expect(repreview).to_contain_text("partition cpu")
    expect(repreview.locator(".betty-Preview-line", has_text="#SBATCH --mem=200M")).to_have_count(1)
    expect(repreview.locator(".betty-Preview-line", has_text="<img src=x")).to_have_count(1)
    screenshot(page, "re-previewed", prefix="edit")
    page.set_viewport_size({"width": 1024, "height": 700})
    form.get_by_test_id("betty-edit-send").scroll_into_view_if_needed()
    expect(form.get_by_test_id("betty-edit-send")).to_be_in_viewport()
    screenshot(page, "re-previewed-1024", prefix="edit")
    page.set_viewport_size({"width": 1500, "height": 950})


def approve_the_edit(page: Page, panel: Locator, card: Locator) -> str:
    """Approve edited: the card's record says so and the tool row names the job; its id."""
    card.get_by_test_id("betty-edit-send").click()
    record = card.get_by_test_id("betty-approval-record")
    expect(record).to_have_attribute("data-decision", "edited")
    row = panel.locator('[data-testid="betty-tool-row"]', has_text="cluster_submit")
    expect(row).to_have_attribute("data-state", "ok")
    expect(row).to_contain_text(re.compile(r"submitted job \d+ on betty-dev"))
    found = re.search(r"submitted job (\d+) on betty-dev", row.inner_text())
    assert found, row.inner_text()
    expect(panel.get_by_test_id("betty-message-assistant").last).to_have_text("Submitted as you edited it.")
    return found.group(1)


def resubmit_from_the_jobs_tab(page: Page, panel: Locator, job_id: str) -> None:
    """The finished job stays in the Jobs tab with its state; Resubmit… opens its script in a card's editor."""
    panel.get_by_test_id("betty-tab-jobs").click()
    # Accounting learns of the cancel a moment after the controller; the tab refreshes itself while shown.
    finished = panel.locator(f'[data-testid="betty-finished-row"][data-job-id="{job_id}"][data-state="CANCELLED"]')
    expect(finished).to_have_count(1)
    screenshot(page, "finished-jobs", prefix="edit")
    finished.get_by_test_id("betty-resubmit").click()
    expect(panel.get_by_test_id("betty-tab-chat")).to_have_attribute("aria-selected", "true")
    waiting = panel.locator('[data-testid="betty-approval-card"][data-status="pending"][data-tool="cluster_submit"]')
    expect(waiting).to_have_count(1)
    card = panel.locator(f'[data-approval-id="{waiting.get_attribute("data-approval-id")}"]')
    form = card.get_by_test_id("betty-edit-form")
    expect(form).to_be_visible()
    editor = form.get_by_test_id("betty-edit-script").locator(".cm-editor")
    expect(editor.locator(".cm-line", has_text="#SBATCH --mem=200M")).to_have_count(1)
    expect(editor.locator(".cm-line", has_text="#SBATCH --partition=cpu")).to_have_count(1)
    expect(form.get_by_test_id("betty-edit-status")).to_have_attribute("data-state", "ready")
    repreview = form.get_by_test_id("betty-edit-preview")
    expect(repreview).to_contain_text(f"the script of job {job_id}, unchanged")
    form.get_by_test_id("betty-edit-time").fill("10")
    expect(repreview.get_by_test_id("betty-preview")).to_have_attribute("data-kind", "diff")
    expect(repreview.locator(".betty-Preview-line", has_text="+#SBATCH --time=10")).to_have_count(1)
    form.scroll_into_view_if_needed()
    screenshot(page, "resubmit-card", prefix="edit")
    form.get_by_test_id("betty-edit-time").press("Escape")
    expect(form).to_have_count(0)
    expect(card.get_by_test_id("betty-edit")).to_be_focused()
    card.get_by_test_id("betty-deny").click()
    expect(card).to_have_attribute("data-status", "decided")
    expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "denied")
