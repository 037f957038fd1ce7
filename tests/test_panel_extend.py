"""Extend from the Jobs tab, in Debian's Chromium against a real JupyterLab on the dev cluster: a running job Betty
recorded shows ``extend``; clicking it opens one ``cluster_extend`` card in the chat that names the continuation
queued behind the job and what it cannot do for the running job; denying it queues nothing. Screenshots:
``test-artifacts/screenshots/extend-*.png``."""

from __future__ import annotations

import os
import secrets
import subprocess

from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect

from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty


def test_extend_on_a_running_job_asks_through_one_card_and_queues_nothing_when_denied(
        lab: JupyterServer, project: dict, dev_cluster: dict[str, str], page: Page) -> None:  # noqa: F811
    name = f"longer-{secrets.token_hex(3)}"
    script = project["root"] / f"{name}.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=5\n#SBATCH --mem=50M\nsleep 240\n")
    submitted = run_betty("submit", str(script), "--yes", "--dir", str(project["root"]), env=project["env"])
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    [job_id] = [t.experiment.job_id for t in Ledger(Workspace.at(project["root"]).ledger_path).all()
                if t.experiment.script.startswith(f"#!/bin/bash\n#SBATCH --job-name={name}\n")]
    env = {**os.environ, **dev_cluster}
    try:
        with screenshot_on_failure(page, "failure", "extend"):
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-tab-jobs").click()
            row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')
            expect(row).to_have_attribute("data-state", "RUNNING")
            row.get_by_test_id("betty-job-extend").click()
            card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_extend"]')
            expect(card).to_have_attribute("data-status", "pending")
            expect(card).to_contain_text(f"sbatch --dependency=afterany:{job_id}")
            expect(card).to_contain_text(f"job {job_id} keeps its own time limit")
            screenshot(page, "card", "extend")
            card.get_by_test_id("betty-deny").click()
            expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "denied")
            queued = subprocess.run(["squeue", "-h", "-o", "%i", f"--name={name}"], env=env, capture_output=True,
                                    text=True, timeout=60)
            assert queued.stdout.split() == [job_id], queued.stdout + queued.stderr  # no continuation queued
            [tracked] = [t for t in Ledger(Workspace.at(project["root"]).ledger_path).all()
                         if t.experiment.job_id == job_id]
            assert tracked.experiment.chain is None
    finally:
        subprocess.run(["scancel", job_id], env=env, capture_output=True, timeout=60)
