"""A submission's approval card and its start estimate: the card is there before the estimate is asked for; the
estimate is the scheduler's (checked on the dev cluster with every A100 held by another user's job), it fills in a
notebook card on a thread of its own, and a failure shows nothing and never holds the buttons."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from test_advise_cluster import busy_a100, slurm  # noqa: F401  (the fixture, and Slurm as any user runs it)
from test_server_support import GUARD, call, llm, open_session, refusal, server_config, until  # noqa: F401

from betty_jupyter.agent.events import ApprovalRequest
from betty_jupyter.agent.models import Preview
from betty_jupyter.errors import SlurmError
from betty_jupyter.notebook.widgets.approval import ApprovalCard

SCRIPT = ("#!/bin/bash\n#SBATCH --job-name='<img src=x onerror=alert(1)>'\n#SBATCH --partition=gpu\n"
          "#SBATCH --gres=gpu:a100:2\n#SBATCH --time=00:10:00\n#SBATCH --mem=100M\ntrue\n")


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):
    return server_config(llm, ssh_profile, jp_root_dir)


async def test_the_card_comes_first_and_its_start_estimate_is_the_scheduler_s(jp_fetch, busy_a100, dev_cluster):
    chat = (await open_session(jp_fetch))["session_id"]
    await call(jp_fetch, "POST", "sessions", chat, "tools", "cluster_submit",
               body={"args": {"script": SCRIPT, "goal": "a test", "record": False}, "wait": False})

    async def card() -> list[dict[str, Any]] | None:
        approvals = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return approvals or None

    [waiting] = await until("the submission card", card)
    assert waiting["tool"] == "cluster_submit"  # the card is open before anyone asked when it would start
    estimate = (await call(jp_fetch, "GET", "approvals", waiting["approval_id"], "start"))["estimate"]
    # both H100 places start now; both A100 places when the other user's 30-minute job ends
    found = re.fullmatch(r"starts now on cpu \(h100\), gpu \(h100\); ~in (\d+) min on cpu \(a100\), gpu \(a100\)",
                         estimate)
    assert found and 25 <= int(found[1]) <= 30, estimate
    asked = slurm(dev_cluster, "sbatch", "--test-only", "--partition=gpu", "--gres=gpu:a100:2", "--time=00:10:00",
                  "--mem=100M", "--wrap=true")
    assert f"to start at {busy_a100:%Y-%m-%dT%H:%M:%S} " in asked.stderr  # what Slurm itself says of the A100s
    await call(jp_fetch, "POST", "approvals", waiting["approval_id"], body={"decision": "denied"})
    code, error = await refusal(jp_fetch, "GET", "approvals", waiting["approval_id"], "start")
    assert code == 404 and "no open approval" in error


def request() -> ApprovalRequest:
    return ApprovalRequest(approval_id="a1", call_id="c1", tool="cluster_submit", tier=2, args={"script": SCRIPT},
                           preview=Preview(kind="script", title="submit", text=SCRIPT), reason="tier 2",
                           digest="sha256:" + "ab" * 32)


def test_a_notebook_card_never_waits_for_its_estimate_and_shows_it_escaped() -> None:
    asked, release, answers = threading.Event(), threading.Event(), []

    def estimate(approval_id: str) -> str:
        asked.set()
        release.wait(GUARD)
        return "starts ~in 12 min on <b>gpu</b> (a100)"

    card = ApprovalCard(request(), lambda *answer: answers.append(answer), estimate=estimate)
    assert asked.wait(GUARD) and card.start.value == "" and not card.approve.disabled
    release.set()
    card.estimating.join(GUARD)
    assert "starts ~in 12 min on &lt;b&gt;gpu&lt;/b&gt; (a100)" in card.start.value and "<b>gpu" not in card.start.value
    card.approve.click()
    assert answers == [("a1", "approved", None, "sha256:" + "ab" * 32)]  # the answer names the card it answers


def test_a_failed_estimate_shows_nothing_and_an_answered_card_takes_none() -> None:
    def failing(approval_id: str) -> str:
        raise SlurmError("sbatch: the controller is down")

    broken = ApprovalCard(request(), lambda *_: None, estimate=failing)
    broken.estimating.join(GUARD)
    assert broken.start.value == ""
    release = threading.Event()
    late = ApprovalCard(request(), lambda *_: None, estimate=lambda _: release.wait(GUARD) and "starts now on gpu")
    late.resolved("denied", "alice (notebook)")
    release.set()
    late.estimating.join(GUARD)
    assert late.decision == "denied" and late.start.value == ""


def test_the_notebook_table_shows_slurm_s_and_the_script_s_text_as_text() -> None:
    from hostile import live_html

    from betty_jupyter.notebook.widgets.advice import AdviceView

    hostile = "<img src=x onerror=window.__pwned=1>"
    advice = {"summary": f"starts now on {hostile}", "scheduler_calls": 2, "estimates": [
        {"label": "gpu (h100)", "start": "2026-11-25T04:12:00", "wait_minutes": 0, "nodes": "n1", "headroom_gib": 3.5},
        {"label": "nope", "start": None, "reason": f"refused: {hostile}\x1b[2J"},
    ]}
    view = AdviceView(advice)
    assert live_html(view.value) == []
    assert "&lt;img src=x" in view.value and "2 question(s) to the scheduler" in view.value
    assert "<td style='padding:2px 8px'>+3.5 GiB</td>" in view.value and "2026-11-25 04:12" in view.value
