"""Clusters and jobs over the server, against the real dev cluster: queue, partitions, history, cancel, test, trust."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    events_until,
    job_state,
    llm,
    refusal,
    rows_of,
    scancel,
    server_config,
    sleeper,
)

pytestmark = pytest.mark.cluster


def column(rows: list[dict], name: str, **where) -> list:
    return [row[name] for row in rows if all(row[k] == v for k, v in where.items())]


@pytest.fixture
def running(dev_cluster):
    job_id, name = sleeper(dev_cluster)
    yield job_id, name
    scancel(dev_cluster, job_id)


async def test_queue_partitions_and_history(jp_fetch, running, dev_cluster):
    job_id, name = running
    queue = rows_of(await call(jp_fetch, "GET", "jobs"))
    assert column(queue, "name", job_id=job_id) == [name]
    assert column(queue, "state", job_id=job_id)[0] in ("RUNNING", "PENDING")
    own = rows_of(await call(jp_fetch, "GET", "jobs", params={"mine": "1", "cluster": "betty-dev"}))
    assert job_id in column(own, "job_id") and set(column(own, "user")) == {"root"}
    done_only = rows_of(await call(jp_fetch, "GET", "jobs", params={"state": "COMPLETED,FAILED"}))
    assert job_id not in column(done_only, "job_id")
    on_gpu = rows_of(await call(jp_fetch, "GET", "jobs", params={"partition": "gpu"}))
    assert job_id not in column(on_gpu, "job_id")

    partitions = rows_of(await call(jp_fetch, "GET", "partitions"))
    assert sorted(column(partitions, "partition")) == ["cpu", "gpu"]

    for _ in range(60):  # slurmdbd learns of a job a moment after the controller
        history = rows_of(await call(jp_fetch, "GET", "jobs", "history", params={"ids": job_id}))
        if history:
            break
        await asyncio.sleep(0.5)
    assert column(history, "job_id") == [job_id] and column(history, "name") == [name]

    actions = (await call(jp_fetch, "GET", "actions", params={"session": "desk-betty-dev"}))["actions"]
    assert [(a["tool"], a["decision"]) for a in actions][:6] == [
        ("cluster_queue", "approved")] * 4 + [("cluster_partitions", "approved"), ("cluster_history", "approved")]
    sessions = (await call(jp_fetch, "GET", "sessions"))["sessions"]
    assert [s["session_id"] for s in sessions] == ["desk-betty-dev"]


async def test_bad_job_reads_are_refused_with_one_line(jp_fetch):
    assert (await refusal(jp_fetch, "GET", "jobs", params={"cluster": "elsewhere"}))[0] == 404
    code, error = await refusal(jp_fetch, "GET", "jobs", params={"state": "SNOOZING"})
    assert code == 400 and "'SNOOZING' is not a Slurm job state" in error
    code, error = await refusal(jp_fetch, "GET", "jobs", "history", params={"ids": "1;rm -rf ~"})
    assert code == 400 and "job_ids" in error
    code, error = await refusal(jp_fetch, "POST", "jobs", "12; reboot", "cancel")
    assert code == 400


async def test_cancel_asks_in_the_desk_session_and_cancels_once_approved(jp_fetch, running, dev_cluster):
    job_id, _ = running
    started = await call(jp_fetch, "POST", "jobs", job_id, "cancel")
    assert started["session_id"] == "desk-betty-dev"
    seen = await events_until(jp_fetch, "desk-betty-dev", lambda events: events[-1]["type"] == "approval_request")
    card = seen[-1]["payload"]
    assert (card["tool"], card["call_id"], card["args"]) == ("cluster_cancel", started["call_id"], {"job_id": job_id})
    assert card["preview"]["text"] == f"scancel {job_id}"
    await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "approved"})
    rest = await events_until(jp_fetch, "desk-betty-dev", lambda events: events[-1]["type"] == "tool_result",
                              after=seen[-1]["seq"])
    assert rest[-1]["payload"]["ok"] and rest[-1]["payload"]["summary"] == f"cancelled job {job_id} on betty-dev"
    assert job_state(dev_cluster, job_id) in ("", "CANCELLED", "COMPLETING")


async def test_clusters_and_a_cluster_check(jp_fetch):
    clusters = (await call(jp_fetch, "GET", "clusters"))["clusters"]
    assert clusters == [{"name": "betty-dev", "transport": "ssh", "host": "betty-dev", "default": True, "environments": []},
                        {"name": "stranger", "transport": "ssh", "host": "stranger", "default": False, "environments": []}]
    check = await call(jp_fetch, "POST", "clusters", "betty-dev", "test")
    assert check["ok"] and check["message"].startswith("betty-dev: OK — partitions cpu, gpu;")
    assert "fingerprint" not in check
    assert (await refusal(jp_fetch, "POST", "clusters", "elsewhere", "test"))[0] == 404


@pytest.fixture
def stranger(dev_cluster, tmp_path):
    """The dev cluster under another alias whose known_hosts is empty: its host key is unknown."""
    config = tmp_path / "ssh_config"
    known = tmp_path / "known_hosts"
    text = Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text()
    config.write_text(text.replace("Host betty-dev", "Host stranger").replace(
        f"{dev_cluster['BETTY_DEV_CLUSTER_DIR']}/ssh/known_hosts", str(known)))
    key = Path(dev_cluster["BETTY_DEV_CLUSTER_DIR"]) / "ssh" / "ssh_host_ed25519_key.pub"
    fingerprint = subprocess.run(["ssh-keygen", "-lf", str(key)], capture_output=True, text=True,
                                 check=True).stdout.split()[1]
    return {"name": "stranger", "transport": "ssh", "host": "stranger", "ssh_config": str(config)}, fingerprint, known


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir, stranger):
    config = server_config(llm, ssh_profile, jp_root_dir)
    config["BettyConfig"]["clusters"].append(stranger[0])
    return config


async def test_an_unknown_host_key_is_shown_then_trusted_only_as_confirmed(jp_fetch, stranger):
    _, fingerprint, known = stranger
    check = await call(jp_fetch, "POST", "clusters", "stranger", "test")
    assert check["ok"] is False and check["fingerprint"] == fingerprint and fingerprint in check["message"]

    code, error = await refusal(jp_fetch, "POST", "clusters", "stranger", "trust",
                                body={"fingerprint": "SHA256:not-what-it-presents"})
    assert code == 409 and fingerprint in error and not known.exists()
    trusted = await call(jp_fetch, "POST", "clusters", "stranger", "trust", body={"fingerprint": fingerprint})
    assert trusted == {"trusted": True, "fingerprint": fingerprint}
    assert (await call(jp_fetch, "POST", "clusters", "stranger", "test"))["ok"] is True
    again = await call(jp_fetch, "POST", "clusters", "stranger", "trust", body={"fingerprint": fingerprint})
    assert again == trusted and len(known.read_text().splitlines()) == 1
    code, error = await refusal(jp_fetch, "POST", "clusters", "stranger", "trust", body={"fingerprint": "SHA256:x"})
    assert code == 409 and "already has another key" in error
    assert (await refusal(jp_fetch, "POST", "clusters", "stranger", "trust", body={}))[0] == 400
