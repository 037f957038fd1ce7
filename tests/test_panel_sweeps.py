"""A sweep in the side panel, in Debian's Chromium against a real JupyterLab on the dev cluster.

A 2×2 sweep (one of its parameter values hostile markup, its tasks printing a hostile metric line, task 3 failing)
runs to its end. In the Experiments tab the person opens its comparison: a row per task with the metrics each task
printed, the hostile text shown as text, and a picture per metric by step and per metric and parameter.
**Resubmit failed task 3** opens the ``sweep_retry`` card in the chat naming task 3 only, and nothing is submitted
before the card is answered (it is denied). Screenshots: ``test-artifacts/screenshots/sweeps-*.png``.
"""

from __future__ import annotations

import subprocess
from typing import Any, Callable

import polling
from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect

HOSTILE_TAG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = (
    "#!/bin/bash\n#SBATCH --job-name=panel-sweep\n#SBATCH --time=5\n"
    "i=$SLURM_ARRAY_TASK_ID\n"
    "for s in 1 2 3; do echo \"step=$s loss=$((4 - s)).${i}5 acc=0.$s$i\"; done\n"
    "echo '<b>evil</b>=1 <img src=x onerror=window.__pwned=2> fine=3'\n"
    "if [ \"$i\" = 3 ]; then echo '<script>window.__pwned=3</script>'; exit 1; fi\n"
)
GUARD = 300.0  # a guard against a hang on a busy machine, not a measurement


def run_sweep(lab: JupyterServer) -> str:
    """The person runs ``SCRIPT`` over a 2×2 grid and approves its one card (through the API); the slug."""
    session = lab.request("POST", "sessions", {})["session_id"]
    args = {"script": SCRIPT, "grid": ["lr=0.1,0.2", f"tag={HOSTILE_TAG},plain"], "goal": "which lr"}
    started = lab.request("POST", f"sessions/{session}/tools/cluster_sweep", {"args": args, "wait": False})
    card = until("the sweep's card", lambda: [c for c in lab.request("GET", "approvals")["approvals"]
                                              if c["call_id"] == started["call_id"]])[0]
    lab.request("POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
    return str(until("the sweep's record", lambda: lab.request("GET", "sweeps")["sweeps"])[0]["experiment"]["slug"])


def until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true; that value."""
    return polling.until(what, check, GUARD, every=0.5)


def queued(cluster: dict[str, str]) -> str:
    """Every job and task the queue holds now."""
    return subprocess.run(["squeue", "-h", "-r", "-o", "%i %j"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "SLURM_CONF": cluster["SLURM_CONF"]}).stdout


def test_a_sweeps_comparison_and_pictures_in_the_panel_and_its_failed_task_resubmitted_only_after_approval(
        page: Page, lab: JupyterServer, dev_cluster: dict[str, str]) -> None:
    slug = run_sweep(lab)
    ended = until("every task of the sweep ended", lambda: lab.request("GET", f"sweeps/{slug}", timeout=120)["states"]
                  == ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"])
    assert ended
    with screenshot_on_failure(page, "failure", "sweeps"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-experiments").click()
        row = panel.locator(f'[data-testid="betty-sweep-row"][data-slug="{slug}"]')
        expect(row).to_contain_text("4 tasks")
        row.get_by_test_id("betty-sweep-compare").click()
        tasks = row.get_by_test_id("betty-sweep-task")
        expect(tasks).to_have_count(4)
        header = row.get_by_test_id("betty-sweep-table").locator("th")
        expect(header).to_have_text(["task", "lr", "tag", "state", "runtime", "efficiency", "loss", "acc", "fine",
                                     "notes"])
        for index in range(4):
            cells = tasks.nth(index).locator("td")
            expect(cells.nth(2)).to_have_text([HOSTILE_TAG, "plain"][index % 2])  # the markup, as text
            expect(cells.nth(3)).to_have_text("FAILED" if index == 3 else "COMPLETED")
            expect(cells.nth(6)).to_have_text(f"{float(f'1.{index}5'):.6g}")  # the last loss it printed
            expect(cells.nth(7)).to_have_text(f"{float(f'0.3{index}'):.6g}")
            expect(cells.nth(8)).to_have_text("3")
        expect(tasks.nth(3).locator("td").last).to_contain_text("Failed")
        expect(row.get_by_test_id("betty-sweep-chart-steps")).to_have_count(3)  # loss, acc, fine by step
        expect(row.get_by_test_id("betty-sweep-chart-final")).to_have_count(6)  # each by lr and by tag
        for chart in row.locator("img.betty-Chart").all():
            page.wait_for_function("image => image.complete && image.naturalWidth > 0", arg=chart.element_handle())
        assert panel.locator("img:not(.betty-Chart), script, b").count() == 0
        assert page.evaluate("window.__pwned") is None
        row.get_by_test_id("betty-sweep-table").scroll_into_view_if_needed()
        screenshot(page, "comparison", "sweeps")
        row.get_by_test_id("betty-sweep-chart-final").last.scroll_into_view_if_needed()
        screenshot(page, "plots", "sweeps")

        before = queued(dev_cluster)
        retry = row.get_by_test_id("betty-sweep-retry")
        expect(retry).to_have_text("Resubmit failed task 3")
        retry.click()
        card = panel.locator('[data-testid="betty-approval-card"][data-tool="sweep_retry"]')
        expect(card).to_have_attribute("data-status", "pending")
        expect(card).to_contain_text(f"resubmit task 3 of sweep {slug}")
        expect(card.get_by_test_id("betty-preview")).to_contain_text("#SBATCH --array=3\n")
        screenshot(page, "retry-card", "sweeps")
        assert queued(dev_cluster) == before  # nothing submitted while the card waits
        assert lab.request("GET", "sweeps")["sweeps"][0]["retries"] == 0
        card.get_by_test_id("betty-deny").click()
        expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "denied")
        assert queued(dev_cluster) == before and lab.request("GET", "sweeps")["sweeps"][0]["retries"] == 0
