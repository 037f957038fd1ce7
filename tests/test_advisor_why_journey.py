"""The journey "why is my job pending, and where would it start sooner?" with the scripted model on the dev cluster.

The person asks; the model calls ``cluster_why`` (tier 1: asked once in confirm mode, the card naming the job), is
told Slurm's reason, the figures and the advice, and nothing of the other user whose jobs hold the GPUs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from advisor_support import HOSTILE_MARKER, OTHER_USER, busy  # noqa: F401 (a fixture)
from conftest import run_betty
from llm_server import ScriptedLLM, call, respond, say

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
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


def test_why_is_my_job_pending_and_where_would_it_start_sooner(busy, ssh_profile, tmp_path):
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:2", "--time=30", "--wrap", "true")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")

    def answer(request: dict[str, Any]) -> Any:
        told = [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]
        return say("It waits for GPUs: " + told.splitlines()[0])

    with ScriptedLLM([call("cluster_why", {"job_id": mine}), respond(answer)]) as llm:
        config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
        reason, events = asyncio.run(ask(workspace, config, f"why is job {mine} still pending?"))
        told = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert reason == "finished"
    cards = [e.payload for e in events if e.type == "approval_request"]
    assert [(card.tool, card.tier) for card in cards] == [("cluster_why", 1)]
    assert f"--jobs={mine}" in cards[0].preview.text
    assert f"Job {mine} is pending in partition gpu because it is next in line" in told
    assert "(Slurm: Resources)" in told and "(sprio, weights from sprio --weights)" in told and "(sshare" in told
    assert HOSTILE_MARKER not in told and OTHER_USER not in told
    said = [e.payload for e in events if e.type == "message"][-1]
    assert f"It waits for GPUs: Job {mine} is pending" in str(said)
