"""A submission's approval card in the side panel, in Debian's Chromium against the real dev cluster: the card and
its buttons come at once, and its start line fills in when the scheduler answers (every A100 held by another
user's job, so the line differs by GPU type). Hostile text in the script stays text."""

from __future__ import annotations

import re

from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect
from test_advise_cluster import busy_a100  # noqa: F401 (the fixture)

SCRIPT = """#!/bin/bash
#SBATCH --job-name='<img src=x onerror="document.title='owned'">'
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:2
#SBATCH --time=00:05:00
#SBATCH --mem=100M
true
"""
STARTS = re.compile(r"starts now on cpu \(h100\), gpu \(h100\); ~in \d+ min on cpu \(a100\), gpu \(a100\)")


def test_a_submission_card_shows_when_and_where_it_would_start(lab: JupyterServer, llm: ScriptedLLM,  # noqa: F811
                                                               busy_a100, page: Page) -> None:  # noqa: F811
    llm.add(call("cluster_submit", {"script": SCRIPT, "goal": "see when it starts", "record": False}),
            say("Not submitted."))
    with screenshot_on_failure(page, "failure", prefix="advise"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-prompt").fill("Submit the a100 job.")
        panel.get_by_test_id("betty-send").click()
        card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
        expect(card).to_have_attribute("data-status", "pending")
        expect(card.get_by_test_id("betty-approve")).to_be_enabled()
        line = card.get_by_test_id("betty-approval-start")
        expect(line).to_have_text(STARTS, timeout=60_000)
        assert card.locator("img[src], [onerror]").count() == 0
        screenshot(page, "start-line", prefix="advise")
        card.get_by_test_id("betty-deny").click()
        expect(card).to_have_attribute("data-status", "decided")
    assert page.title() != "owned", "the script's HTML never ran"
