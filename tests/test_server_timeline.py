"""The timeline routes over the dev cluster: the calls with their filters, a replay that runs nothing, and a bug
bundle that holds none of the secrets planted in the configuration, the environment and a tool's arguments."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from conftest import ssh
from test_server_support import call, llm, open_session, refusal, server_config, until  # noqa: F401

pytestmark = pytest.mark.cluster

CONFIG_KEY = "sk-plantedConfigKey0123456789abcdef"
MODEL_KEY = "planted-model-key-93ab1e"
ENV_NAME, ENV_TOKEN = "BETTY_TEST_SERVICE_TOKEN", "planted-env-token-7f3e9a"
ARG_SECRET = "planted-arg-secret-51c2d0"
SECRETS = (CONFIG_KEY, MODEL_KEY, ENV_TOKEN, ARG_SECRET)
SCRIPT = ("#!/bin/bash\n#SBATCH --job-name=timeline-replay\n#SBATCH --time=1\n"
          f"export WANDB_API_KEY={ARG_SECRET}\npython train.py --run {ENV_TOKEN}\n")


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir, tmp_path, monkeypatch):  # noqa: F811
    """The dev cluster's server, with a key pasted into the configuration, the model's key in a file, and a
    token in the server's environment."""
    monkeypatch.setenv(ENV_NAME, ENV_TOKEN)
    key_file = tmp_path / "model.key"
    key_file.write_text(MODEL_KEY + "\n")
    config = server_config(llm, ssh_profile, jp_root_dir)
    config["BettyConfig"]["llm"].update(api_key=CONFIG_KEY, api_key_file=str(key_file))
    return config


def every_job(dev_cluster: dict[str, str]) -> set[str]:
    """Every job the cluster knows, queued or running (squeue) or ever accounted (sacct), by its job id.

    An array's tasks count as their array's id (``803_2`` and ``803_[0-3]`` are job 803): an array another
    test left pending lists its tasks one by one as they start, while a submission always makes a new id.
    """
    queued = ssh(dev_cluster, "squeue --noheader --all --format=%i")
    accounted = ssh(dev_cluster, "sacct --allusers --allocations --noheader --parsable2 --format=JobID "
                                 "--starttime=2000-01-01")
    assert queued.returncode == 0 and accounted.returncode == 0, queued.stderr + accounted.stderr
    return {re.split(r"[_+]", job)[0] for job in queued.stdout.split() + accounted.stdout.split()}


async def denied_session(jp_fetch) -> str:
    """A session with two calls: a submit a person denied (nothing ran) and a queue read."""
    session_id = (await open_session(jp_fetch, session_id="s-timeline"))["session_id"]
    started = await call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_submit",
                         body={"args": {"script": SCRIPT, "goal": "check the timeline"}, "wait": False})

    async def card() -> dict | None:
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        return pending[0] if pending else None

    waiting = await until("the submit card", card)
    assert waiting["call_id"] == started["call_id"]
    await call(jp_fetch, "POST", "approvals", waiting["approval_id"], body={"decision": "denied"})

    async def logged() -> bool:
        return bool((await call(jp_fetch, "GET", "timeline", params={"session": session_id}))["calls"])

    await until("the denied submit in the action log", logged)
    queue = await call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_queue",
                       body={"args": {}, "wait": True})
    assert queue["ok"], queue["summary"]
    return session_id


async def test_the_timeline_filters_and_a_replay_makes_previews_only(jp_fetch, dev_cluster):
    session_id = await denied_session(jp_fetch)
    answer = await call(jp_fetch, "GET", "timeline", params={"session": session_id})
    assert [(c["tool"], c["decision"], c["lane"]) for c in answer["calls"]] == [
        ("cluster_submit", "denied", session_id), ("cluster_queue", "approved", session_id)]
    assert answer["lanes"] == [{"id": session_id, "kind": "session", "session_id": session_id, "title": session_id,
                                "started_by": None, "trigger": ""}]
    assert ENV_TOKEN not in json.dumps(answer)  # logged in the script, blanked once it is known as a secret
    submit = answer["calls"][0]
    assert submit["preview"]["kind"] == "script" and submit["duration_ms"] >= 0
    only = await call(jp_fetch, "GET", "timeline", params={"session": session_id, "decision": "denied"})
    assert [c["tool"] for c in only["calls"]] == ["cluster_submit"]
    only = await call(jp_fetch, "GET", "timeline", params={"tool": "cluster_queue"})
    assert [c["call_id"] for c in only["calls"]] == [answer["calls"][1]["call_id"]]
    code, error = await refusal(jp_fetch, "GET", "timeline", params={"decision": "maybe"})
    assert code == 400 and error.startswith("'maybe' is not a decision")
    code, error = await refusal(jp_fetch, "GET", "timeline", params={"session": "../etc"})
    assert code == 400 and "is not a session id" in error

    jobs = every_job(dev_cluster)
    replayed = (await call(jp_fetch, "POST", "timeline", "replay", body={"session": session_id}))["replay"]
    assert [(line["tool"], line["status"]) for line in replayed] == [("cluster_submit", "same"),
                                                                     ("cluster_queue", "not recorded")]
    assert replayed[0]["current"] == submit["preview"] and ENV_TOKEN not in json.dumps(replayed)
    # nothing was submitted: no job id past the newest before (a job that ends meanwhile may leave squeue before
    # accounting records it, so the two reads need not be equal)
    newest = max((int(job) for job in jobs), default=0)
    assert {job for job in every_job(dev_cluster) if int(job) > newest} == set()
    after = await call(jp_fetch, "GET", "timeline", params={"session": session_id})
    assert after["calls"] == answer["calls"]  # and nothing new was logged
    code, error = await refusal(jp_fetch, "POST", "timeline", "replay", body={"session": 7})
    assert code == 400 and error == "session must be a string, not int"


async def test_the_bug_bundle_holds_none_of_the_planted_secrets(jp_fetch):
    session_id = await denied_session(jp_fetch)
    response = await jp_fetch("betty", "api", "timeline", "bundle", params={"session": session_id})
    assert response.headers["Content-Type"] == "application/zip"
    assert f'filename="betty-bundle-{session_id}.zip"' in response.headers["Content-Disposition"]
    for secret in SECRETS:
        assert secret.encode() not in response.body, secret
    bundle = zipfile.ZipFile(io.BytesIO(response.body))
    actions = [json.loads(line) for line in bundle.read("actions.jsonl").decode().splitlines()]
    assert [line["tool"] for line in actions] == ["cluster_submit", "cluster_queue"]
    assert "export WANDB_API_KEY=[redacted]\npython train.py --run [redacted]" in actions[0]["args"]["script"]
    events = [json.loads(line) for line in bundle.read("events.jsonl").decode().splitlines()]
    assert events and {event["session_id"] for event in events} == {session_id}
    config = json.loads(bundle.read("config.json"))
    assert config["llm"]["api_key"] == "[redacted]" and config["llm"]["model"] == "scripted"
    assert config["clusters"][0]["name"] == "betty-dev"

    assert (await refusal(jp_fetch, "GET", "timeline", "bundle"))[0] == 400
    code, error = await refusal(jp_fetch, "GET", "timeline", "bundle", params={"session": "s-nobody"})
    assert code == 404 and "knows nothing of session" in error
