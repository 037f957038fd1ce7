"""The journey "why is my job pending, and where would it start sooner?" with the scripted model on the dev cluster.

The person asks; the model calls ``cluster_why`` and then ``cluster_advise`` (tier 1 each: asked once in confirm mode),
is told Slurm's reason with its figures, and where the same request would start sooner (the idle H100s, before the
A100s another user holds) as ``sbatch --test-only`` itself says; nothing of the other user reaches it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from datetime import datetime, timedelta
from typing import Any

import pytest
from advisor_support import HOSTILE_MARKER, OTHER_USER, busy, names_job  # noqa: F401 (a fixture)
from conftest import run_betty
from llm_server import ScriptedLLM, call, respond, say

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
from betty_jupyter.devcluster.layout import GPUS
from betty_jupyter.experiments.workspace import Workspace

pytestmark = pytest.mark.cluster


async def ask(workspace: Workspace, config: BettyConfig, prompt: str) -> tuple[str, list[Any]]:
    broker = ApprovalBroker(timeout=60)
    session = await open_session(workspace, config, SessionSpec(mode="confirm", broker=broker))
    events: list[Any] = []

    def approve(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "tester")

    session.stream.subscribe(approve)
    try:
        return await session.ask(prompt), events
    finally:
        await session.context.slurm.transport.close()


SCRIPT = """#!/bin/bash
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:2
#SBATCH --time=30
python train.py
"""


def tool_answers(request: dict[str, Any]) -> list[str]:
    """What the tools told the model so far, in order."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def h100_start(busy: Any) -> datetime:
    """When ``sbatch --test-only`` itself says the script would start on the H100s."""
    said = subprocess.run(["sbatch", "--test-only", "--partition=gpu", "--gres=gpu:h100:2", "--time=30",
                           "--wrap=true"], capture_output=True, text=True, env=busy.env, timeout=60).stderr
    start = re.search(r"to start at (\S+)", said)
    assert start, said
    return datetime.fromisoformat(start.group(1))


def test_why_is_my_job_pending_and_where_would_it_start_sooner(busy, ssh_profile, tmp_path):
    # the other user's hour-long job holds every A100; the H100s stay idle
    theirs = busy.submit("--partition=gpu", f"--gres=gpu:a100:{GPUS['a100']}", "--time=60", "--wrap", "sleep 3600",
                         other=True)
    busy.wait_for(theirs, lambda state, reason: state == "RUNNING")
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:2", "--time=30", "--wrap", "true")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")

    def answer(request: dict[str, Any]) -> Any:
        why, where = tool_answers(request)[-2:]
        return say(f"It waits for GPUs: {why.splitlines()[0]} Sooner: {where.splitlines()[0]}")

    slurm_before = h100_start(busy)
    steps = [call("cluster_why", {"job_id": mine}),
             call("cluster_advise", {"script": SCRIPT, "partitions": ["gpu"]}),
             respond(answer)]
    with ScriptedLLM(steps) as llm:
        config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
        reason, events = asyncio.run(ask(workspace, config, f"why is job {mine} still pending, and where would it "
                                                            "start sooner?"))
        told = tool_answers(llm.requests[-1])
    assert reason == "finished"
    cards = [e.payload for e in events if e.type == "approval_request"]
    assert [(card.tool, card.tier) for card in cards] == [("cluster_why", 1), ("cluster_advise", 1)]
    assert f"--jobs={mine}" in cards[0].preview.text and "sbatch --test-only" in cards[1].preview.text
    why, where = told
    assert f"Job {mine} is pending in partition gpu because it is next in line" in why
    assert "(Slurm: Resources)" in why and "(sprio, weights from sprio --weights)" in why and "(sshare" in why
    # where: the idle H100s before the A100s the other user holds, when the scheduler itself says
    headline = where.splitlines()[0]
    assert headline.startswith("starts ") and 0 <= headline.index("gpu (h100)") < headline.index("gpu (a100)"), where
    shown = re.search(r"^\s*1 gpu \(h100\) (\d{4}-\d\d-\d\d \d\d:\d\d) ", where, re.M)
    assert shown, where
    betty_says = datetime.strptime(shown.group(1), "%Y-%m-%d %H:%M")
    slurm_says = (slurm_before, h100_start(busy))  # the scheduler's plan may move between Betty's ask and these
    assert any(abs(start - betty_says) <= timedelta(minutes=2) for start in slurm_says), (betty_says, slurm_says)
    estimates = [e.payload for e in events if e.type == "tool_result" and e.payload.tool == "cluster_advise"]
    assert len(estimates) == 1
    for text in told:
        assert HOSTILE_MARKER not in text and OTHER_USER not in text and not names_job(text, theirs)
    said = str([e.payload for e in events if e.type == "message"][-1])
    assert f"It waits for GPUs: Job {mine} is pending" in said and f"Sooner: {headline}" in said
