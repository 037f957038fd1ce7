"""Betty's offline demo model on the real dev cluster: the real agent loop asks it over real HTTP through the real
``openai`` client; the partitions answer streams, and "submit a test job" makes a real card whose approval runs a
real job that sacct knows."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from conftest import run_betty, ssh

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.demo_model import SHOWN_NAME
from betty_jupyter.agent.llm import DEMO_MODEL
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace

pytestmark = pytest.mark.cluster


def test_the_demo_model_answers_partitions_and_submits_an_approved_test_job(ssh_profile, dev_cluster,
                                                                           tmp_path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}], llm={"demo": True})
    broker = ApprovalBroker(timeout=60)
    events: list[Any] = []
    cards: list[Any] = []

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request" and event.payload.tool == "cluster_submit":
            cards.append(event.payload)
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "tester")
        elif event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "tester")

    async def converse() -> list[str]:
        session = await open_session(workspace, config, SessionSpec(mode="confirm", broker=broker,
                                                                    listeners=(person,)))
        try:
            return [await session.ask("what partitions does this cluster have?"),
                    await session.ask("submit a test job")]
        finally:
            await session.context.slurm.transport.close()

    assert asyncio.run(converse()) == ["finished", "finished"]
    answers = [e.payload for e in events if e.type == "message" and e.payload.role == "assistant"]
    assert all(a.model == SHOWN_NAME for a in answers)
    partitions = ssh(dev_cluster, "sinfo -h -o %R").stdout.split()
    assert answers[0].text.startswith("This cluster has ") and all(name in answers[0].text for name in partitions)
    first_turn = events[:next(i for i, e in enumerate(events) if e.type == "done")]
    assert len([e for e in first_turn if e.type == "message_delta"]) > 10, "the answer streamed"

    assert len(cards) == 1 and cards[0].preview.kind == "script" and "betty-test" in cards[0].preview.text
    submitted = [e.payload for e in events if e.type == "tool_result" and e.payload.tool == "cluster_submit"]
    assert submitted and submitted[0].ok
    job_id = re.match(r"Submitted job (\d+) on betty-dev", answers[1].text)
    assert job_id, answers[1].text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        known = ssh(dev_cluster, f"sacct -n -X -j {job_id.group(1)} -o JobName%20,State%20").stdout.split()
        if known[:1] == ["betty-test"]:
            break
        time.sleep(0.5)
    assert known[:1] == ["betty-test"], known
