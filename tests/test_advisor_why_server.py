"""``GET clusters/{name}/jobs/{id}/why`` against the real dev cluster: the explanation as an Outcome, one-line
refusals, nothing of the other user's."""

from __future__ import annotations

import json

import pytest
from advisor_support import HOSTILE_MARKER, OTHER_USER, busy  # noqa: F401 (a fixture)
from test_server_support import call, jp_server_config, llm, refusal  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster


async def test_why_route_explains_a_pending_job_and_refuses_in_one_line(jp_fetch, busy):
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:h100:1", "--time=30", "--wrap", "true")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    outcome = await call(jp_fetch, "GET", "clusters", "betty-dev", "jobs", mine, "why")
    assert outcome["ok"] and outcome["data"]["kind"] == "json"
    data = outcome["data"]["value"]
    assert data["reason"] == "Resources" and data["lines"][0].startswith(f"Job {mine} is pending in partition gpu")
    assert HOSTILE_MARKER not in json.dumps(outcome) and OTHER_USER not in json.dumps(outcome)
    theirs = busy.submit("--hold", "--wrap", "true", other=True)
    refused = await call(jp_fetch, "GET", "clusters", "betty-dev", "jobs", theirs, "why")
    assert not refused["ok"] and refused["summary"] == (
        f"job {theirs} is not one of your jobs in the queue; Betty explains only your own jobs")
    status, error = await refusal(jp_fetch, "GET", "clusters", "betty-dev", "jobs", "12;ls", "why")
    assert status == 400 and "is not a Slurm job id" in error
    status, error = await refusal(jp_fetch, "GET", "clusters", "nowhere", "jobs", mine, "why")
    assert status in (400, 404) and "nowhere" in error
