"""Extend from the panel's Jobs tab, over the server against the real dev cluster: a running job Betty recorded gets
a ``cluster_extend`` card that says what it cannot do, and nothing is queued until a person approves it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    jp_server_config,
    llm,
    refusal,
    scancel,
    submit_and_approve,
    until,
)

pytestmark = pytest.mark.cluster


async def test_extend_opens_a_card_for_the_whole_chain_and_queues_nothing_by_itself(jp_fetch, dev_cluster):
    name = f"longer-{uuid.uuid4().hex[:8]}"
    script = f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=5\nsleep 120\n"
    job_id = await submit_and_approve(jp_fetch, script, "a run that needs longer")
    try:
        started = await call(jp_fetch, "POST", "jobs", job_id, "extend", body={"segments": 2, "face": "side panel"})

        async def card() -> dict[str, Any] | None:
            pending = (await call(jp_fetch, "GET", "approvals", params={"session": started["session_id"]}))
            return pending["approvals"][0] if pending["approvals"] else None

        shown = await until("the card", card)
        assert shown["tool"] == "cluster_extend" and shown["args"]["job_id"] == job_id
        assert shown["args"]["segments"] == 2
        details = shown["preview"]["details"]
        assert f"job {job_id} keeps its own time limit" in details["the running job"]
        assert details["chain"]["segments"].startswith("up to 2 jobs of 5 min each")
        assert details["command"] == f"sbatch --dependency=afterany:{job_id} …"
        before = (await call(jp_fetch, "GET", "experiments"))["experiments"]
        await call(jp_fetch, "POST", "approvals", shown["approval_id"], body={"decision": "denied"})
        assert (await call(jp_fetch, "GET", "experiments"))["experiments"] == before
        assert "segments" not in before[-1]
    finally:
        scancel(dev_cluster, job_id)

    code, error = await refusal(jp_fetch, "POST", "jobs", job_id, "extend", body={"segments": 0})
    assert code == 400 and "segments" in error
