"""The Jobs tab's "why?" on a pending row, in Debian's Chromium against the dev cluster.

Another user's jobs hold every GPU, so the person's GPU job (a hostile name) waits for Resources; the "why?" on its
state line opens one box above the list, titled with the job's id and name as text, with Slurm's reason in words,
the priority factors and the advice, and nothing of the other user's (their name, their job's hostile name). The
rows keep their one height. Screenshots of the box at two window sizes are kept as
``test-artifacts/screenshots/panel-why-pending-1400.png`` and ``panel-why-pending-1024.png``.
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

MINE = '<img src=x onerror="window.__pwned=1">wait-for-a-gpu'

_HEIGHTS = """list => Array.from(list.querySelectorAll('[data-testid="betty-job-row"]'))
  .map(row => row.getBoundingClientRect().height)"""


def test_a_pending_rows_why_shows_the_explanation(lab: JupyterServer, page: Page, busy) -> None:  # noqa: F811
    busy.fill_gpus()
    running = busy.submit("--partition=cpu", "--time=30", "--job-name=runs-on-a-cpu", "--wrap", "sleep 600")
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", f"--job-name={MINE}", "--wrap", "true")
    busy.wait_for(running, lambda state, reason: state == "RUNNING")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    with screenshot_on_failure(page, "why-failed"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-jobs").click()
        job_list = panel.get_by_test_id("betty-jobs-list")
        row = job_list.locator(f'[data-testid="betty-job-row"][data-job-id="{mine}"]')
        expect(row).to_have_attribute("data-state", "PENDING")
        other = job_list.locator(f'[data-testid="betty-job-row"][data-job-id="{running}"]')
        expect(other).to_have_attribute("data-state", "RUNNING")
        expect(other.get_by_test_id("betty-job-why-toggle")).to_have_count(0)
        heights = job_list.evaluate(_HEIGHTS)

        # the keyboard reaches the why?, and the box takes the focus
        toggle = row.get_by_test_id("betty-job-why-toggle")
        toggle.focus()
        page.keyboard.press("Enter")
        box = panel.get_by_test_id("betty-job-why")
        expect(box).to_be_focused()
        expect(box).to_have_attribute("data-job-id", mine)
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(box.get_by_test_id("betty-job-why-title")).to_have_text(f"Why job {mine} · {MINE} waits")
        answer = box.get_by_test_id("betty-job-why-answer")
        expect(answer).to_contain_text(f"Job {mine} is pending in partition gpu because")
        expect(answer).to_contain_text("(Slurm: Resources)")
        expect(answer).to_contain_text("(sprio, weights from sprio --weights)")
        expect(answer).to_contain_text("(sshare")
        assert HOSTILE_MARKER not in box.inner_text() and OTHER_USER not in box.inner_text()
        assert box.locator("img").count() == 0 and page.evaluate("() => window.__pwned") is None

        # the box lies above the list, outside it; the rows keep their one height
        assert job_list.locator('[data-testid="betty-job-why"]').count() == 0
        box_at, list_at = box.bounding_box(), job_list.bounding_box()
        assert box_at is not None and list_at is not None
        assert box_at["y"] + box_at["height"] <= list_at["y"] + 0.5, (box_at, list_at)
        after = job_list.evaluate(_HEIGHTS)
        assert after == heights and all(abs(each - after[0]) < 0.5 for each in after), (heights, after)
        assert_nothing_hidden_sideways(panel)
        screenshot(page, "why-pending-1400")

        page.set_viewport_size({"width": 1024, "height": 700})
        expect(box).to_be_visible()
        assert_nothing_hidden_sideways(panel)
        narrow = job_list.evaluate(_HEIGHTS)
        assert all(abs(each - narrow[0]) < 0.5 for each in narrow), narrow
        screenshot(page, "why-pending-1024")

        box.get_by_test_id("betty-job-why-close").click()
        expect(box).to_have_count(0)


MOVABLE = """#!/bin/bash
#SBATCH --job-name=move-me
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:2
#SBATCH --time=30
true
"""


def test_the_why_box_moves_a_recorded_job_where_it_starts_sooner_through_a_card(
        lab: JupyterServer, page: Page, busy, ssh_profile, project) -> None:  # noqa: F811
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.agent.tools.catalog import ClusterSubmit
    from betty_jupyter.cluster.sync import run_sync
    from betty_jupyter.devcluster.layout import GPUS
    from betty_jupyter.experiments.ledger import Ledger
    from betty_jupyter.experiments.workspace import Workspace

    theirs = busy.submit("--partition=gpu", f"--gres=gpu:a100:{GPUS['a100']}", "--time=60", "--wrap", "sleep 3600",
                         other=True)
    busy.wait_for(theirs, lambda state, reason: state == "RUNNING")
    workspace = Workspace.at(project["root"])
    context = ToolContext.open(ssh_profile, workspace, "why-move")
    try:  # the job Betty recorded in the lab's project, as the chat would have submitted it
        outcome = run_sync(ClusterSubmit().execute(context, {"script": MOVABLE, "goal": "train on two GPUs"}))
    finally:
        run_sync(context.close())
    assert outcome.ok, outcome.summary
    mine = outcome.data.job_id
    busy.jobs.append(mine)
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    with screenshot_on_failure(page, "why-move-failed"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-jobs").click()
        row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{mine}"]')
        row.get_by_test_id("betty-job-why-toggle").click()
        box = panel.get_by_test_id("betty-job-why")
        answer = box.get_by_test_id("betty-job-why-answer")
        expect(answer).to_contain_text("--gres=gpu:h100:2 would start it now (")
        move = box.get_by_test_id("betty-job-why-move")
        expect(move).to_contain_text("Resubmit with ")
        expect(move).to_contain_text("--gres=gpu:h100:2")
        screenshot(page, "why-move-1400")
        move.click()
        expect(panel.get_by_test_id("betty-tab-chat")).to_have_attribute("aria-selected", "true")
        waiting = panel.locator('[data-testid="betty-approval-card"][data-status="pending"][data-tool="cluster_submit"]')
        expect(waiting).to_have_count(1)
        card = panel.locator(f'[data-approval-id="{waiting.get_attribute("data-approval-id")}"]')
        expect(card.locator(".betty-Preview-line", has_text="+#SBATCH --gres=gpu:h100:2")).to_have_count(1)
        expect(card.locator(".betty-Preview-line", has_text="-#SBATCH --gres=gpu:a100:2")).to_have_count(1)
        card.get_by_test_id("betty-deny").click()
        expect(card).to_have_attribute("data-status", "decided")
    assert [tracked.experiment.job_id for tracked in Ledger(workspace.ledger_path).all()] == [mine]
