"""The Jobs tab's "why?" on a pending row, in Debian's Chromium against the dev cluster.

Another user's jobs hold every GPU, so the person's GPU job waits for Resources; its row's "why?" shows Slurm's
reason in words, the priority factors and the advice, and nothing of the other user's (their name, their job's
hostile name). A screenshot of the answer is kept as ``test-artifacts/screenshots/panel-why-pending.png``.
"""

from __future__ import annotations

import pytest
from advisor_support import HOSTILE_MARKER, OTHER_USER, busy  # noqa: F401 (a fixture)
from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    assert_nothing_hidden_sideways,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.cluster


def test_a_pending_rows_why_shows_the_explanation(lab: JupyterServer, page: Page, busy) -> None:  # noqa: F811
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--job-name=wait-for-a-gpu",
                       "--wrap", "true")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    with screenshot_on_failure(page, "why-failed"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-jobs").click()
        row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{mine}"]')
        expect(row).to_have_attribute("data-state", "PENDING")
        running = panel.locator('[data-testid="betty-job-row"][data-state="RUNNING"]')
        expect(running.get_by_test_id("betty-job-why-toggle")).to_have_count(0)
        row.get_by_test_id("betty-job-why-toggle").click()
        answer = row.get_by_test_id("betty-job-why-answer")
        expect(answer).to_contain_text(f"Job {mine} is pending in partition gpu because")
        expect(answer).to_contain_text("(Slurm: Resources)")
        expect(answer).to_contain_text("(sprio, weights from sprio --weights)")
        expect(answer).to_contain_text("(sshare")
        assert HOSTILE_MARKER not in answer.inner_text() and OTHER_USER not in answer.inner_text()
        assert_nothing_hidden_sideways(panel)
        answer.scroll_into_view_if_needed()
        screenshot(page, "why-pending")
        row.get_by_test_id("betty-job-why-toggle").click()
        expect(answer).to_have_count(0)
