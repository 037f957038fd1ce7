"""A person's edit of a submission card, over the server against the real dev cluster: the edit is checked by the
same code as the model's call and previewed again before it may be approved, and what runs is the edit; a recorded
job's Resubmit… opens a card with its script and submits nothing by itself."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest
from conftest import ssh
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    jp_server_config,
    llm,
    open_session,
    read_until,
    refusal,
    scancel,
    submit_and_approve,
    until,
)

pytestmark = pytest.mark.cluster

HOSTILE_COMMENT = "# <img src=x onerror=alert(1)> \x1b[31mred\x1b[0m"


def script(name: str, mem: str = "100M", partition: str = "cpu", minutes: int = 5) -> str:
    """A short batch job with its resources in #SBATCH lines."""
    return (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --partition={partition}\n#SBATCH --mem={mem}\n"
            f"#SBATCH --time={minutes}\n{HOSTILE_COMMENT}\nsleep 120\n")


async def open_card(jp_fetch, session_id: str) -> dict[str, Any]:
    """The one card waiting in ``session_id``."""
    async def card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        return pending[0] if pending else None

    return await until("the card", card)


async def test_an_edited_submission_is_checked_previewed_again_and_runs_as_edited(jp_fetch, dev_cluster):
    name = f"edit-{uuid.uuid4().hex[:8]}"
    session_id = (await open_session(jp_fetch))["session_id"]
    submitting = asyncio.ensure_future(call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_submit",
                                            body={"args": {"script": script(name), "goal": "see an edit run"}}))
    card = await open_card(jp_fetch, session_id)
    goal = card["args"]["goal"]

    wrong = {"script": script(name, partition="gpu-large"), "goal": goal}
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"], "preview", body={"args": wrong})
    assert code == 400 and "gpu-large" in error and "\n" not in error
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"],
                                body={"decision": "edited", "args": wrong, "face": "side panel"})
    assert code == 400 and "gpu-large" in error, "a refused edit cannot be approved"
    assert (await open_card(jp_fetch, session_id))["approval_id"] == card["approval_id"], "the card stays open"

    edited = {"script": script(name, mem="200M", minutes=7), "goal": goal}
    preview = (await call(jp_fetch, "POST", "approvals", card["approval_id"], "preview",
                          body={"args": edited}))["preview"]
    assert preview["text"] == edited["script"] and "time 7 min" in preview["title"]
    assert HOSTILE_COMMENT in preview["text"], "the script comes back as the person wrote it, to be shown as text"
    await call(jp_fetch, "POST", "approvals", card["approval_id"],
               body={"decision": "edited", "args": edited, "face": "side panel"})
    outcome = await submitting
    assert outcome["ok"], outcome["summary"]
    job_id = re.search(r"job (\d+)", outcome["summary"]).group(1)
    try:
        shown = ssh(dev_cluster, f"scontrol show job -o {job_id}").stdout
        assert "MinMemoryNode=200M" in shown and "TimeLimit=00:07:00" in shown and f"JobName={name}" in shown
    finally:
        scancel(dev_cluster, job_id)


async def test_resubmit_opens_a_card_with_the_recorded_script_and_submits_nothing_by_itself(jp_fetch, dev_cluster):
    name = f"again-{uuid.uuid4().hex[:8]}"
    job_id = await submit_and_approve(jp_fetch, script(name), "a run to do again")
    scancel(dev_cluster, job_id)
    started = await call(jp_fetch, "POST", "jobs", job_id, "resubmit")
    card = await open_card(jp_fetch, started["session_id"])
    assert card["tool"] == "cluster_submit" and card["call_id"] == started["call_id"]
    assert card["args"]["script"] == script(name) and card["args"]["replaces"] == job_id
    assert card["preview"]["kind"] == "script" and card["preview"]["text"] == script(name)
    assert card["preview"]["details"]["replaces"]["job_id"] == job_id and "unchanged" in card["preview"]["title"]
    edited = {**card["args"], "script": script(name, mem="300M")}
    preview = (await call(jp_fetch, "POST", "approvals", card["approval_id"], "preview", body={"args": edited}))[
        "preview"]
    assert preview["kind"] == "diff"
    assert "-#SBATCH --mem=100M" in preview["text"] and "+#SBATCH --mem=300M" in preview["text"]
    before = (await call(jp_fetch, "GET", "experiments"))["experiments"]
    await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "denied"})
    assert (await call(jp_fetch, "GET", "experiments"))["experiments"] == before

    code, error = await refusal(jp_fetch, "POST", "jobs", "999999", "resubmit")
    assert code == 404 and "not submitted through Betty" in error


async def test_an_edit_refused_on_the_chat_socket_leaves_the_card_open(jp_fetch, jp_ws_fetch, dev_cluster):
    session_id = (await open_session(jp_fetch))["session_id"]
    socket = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
    name = f"socket-{uuid.uuid4().hex[:8]}"
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_submit",
               body={"args": {"script": script(name), "goal": "an edit over the socket"}, "wait": False})
    seen: list[dict[str, Any]] = []
    card = (await read_until(socket, "approval_request", seen))["payload"]
    wrong = {"script": script(name, partition="gpu-large"), "goal": card["args"]["goal"]}
    socket.write_message(json.dumps({"type": "approval", "approval_id": card["approval_id"], "decision": "edited",
                                     "args": wrong}))
    frame = await read_until(socket, "server_error", seen)
    assert "gpu-large" in frame["message"] and "\n" not in frame["message"]
    assert [c["approval_id"] for c in (await call(jp_fetch, "GET", "approvals"))["approvals"]] == [card["approval_id"]]
    socket.write_message(json.dumps({"type": "approval", "approval_id": card["approval_id"], "decision": "denied"}))
    resolved = await read_until(socket, "approval_resolved", seen)
    assert resolved["payload"]["decision"] == "denied"
    socket.close()
