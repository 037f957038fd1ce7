"""A notebook run sends exactly the notebook its card showed, whoever asked, over the real server and dev cluster.

The panel's **Run on cluster…** (``POST sessions/{id}/tools/notebook_submit``, no digest) and the model's call get
a card carrying the sha256 of the notebook file's bytes as read for it; the approved run re-reads the file and
refuses, in one line and sending nothing, a notebook saved or replaced while the card waited (even by a single
byte of whitespace). Run as shown, the job's directory is the card's. A digest a caller sends is checked, never
trusted: a malformed one is a 400, another notebook's gets no card.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from llm_server import call as model_calls
from llm_server import say
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    events_until,
    llm,
    open_session,
    refusal,
    server_config,
    until,
)

pytestmark = pytest.mark.cluster

NOTEBOOK = "train.ipynb"


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):  # noqa: F811
    """The server of ``test_server_support``, its cluster with the environment ``betty`` (this venv: nbclient)."""
    config = server_config(llm, ssh_profile, jp_root_dir)
    config["BettyConfig"]["clusters"][0]["environments"] = {"betty": {"venv": sys.prefix}}
    return config


def write(path: Path, lr: str, indent: int = 1) -> bytes:
    """A notebook whose cell tagged ``parameters`` sets ``lr``; the bytes written."""
    cells = [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": f"lr = {lr}", "outputs": [],
              "execution_count": None},
             {"cell_type": "code", "metadata": {}, "source": "print(f'loss={lr * 4}')", "outputs": [],
              "execution_count": None}]
    data = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}, indent=indent).encode()
    path.write_bytes(data)
    return data


ARGS = {"notebook": NOTEBOOK, "params": ["lr=0.5"], "partition": "cpu", "time": 5, "env": "betty"}


async def card(jp_fetch, session_id: str) -> dict[str, Any] | None:
    pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
    return pending[0] if pending else None


def result_of(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e["payload"] for e in events if e["type"] == "tool_result"), None)


async def as_the_panel(jp_fetch, session_id: str, args: dict[str, Any]) -> dict[str, Any]:
    """What Run on cluster… sends; the card that comes back."""
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "notebook_submit",
               body={"args": args, "wait": False, "face": "side panel"})
    return await until("the notebook_submit card", lambda: card(jp_fetch, session_id))


async def answered(jp_fetch, session_id: str, asked: dict[str, Any], after: int = 0) -> dict[str, Any]:
    """Approve ``asked``; its call's tool_result."""
    await call(jp_fetch, "POST", "approvals", asked["approval_id"], body={"decision": "approved"})
    events = await events_until(
        jp_fetch, session_id,
        lambda seen: any(e["type"] == "tool_result" and e["payload"]["call_id"] == asked["call_id"] for e in seen),
        after)
    return next(e["payload"] for e in events
                if e["type"] == "tool_result" and e["payload"]["call_id"] == asked["call_id"])


def runs(ssh_profile) -> list[Path]:  # type: ignore[no-untyped-def]
    """The notebook runs' directories on the cluster (one machine: its work directory is here)."""
    return sorted((Path(ssh_profile.work_dir) / "runs").glob("notebook-*"))


@pytest.mark.parametrize("changed", ["replaced", "whitespace"])
async def test_a_notebook_saved_while_its_card_waits_is_refused_and_nothing_is_sent(
        jp_fetch, jp_root_dir, ssh_profile, dev_cluster, changed):
    path = jp_root_dir / NOTEBOOK
    shown = write(path, "0.1")
    session_id = (await open_session(jp_fetch))["session_id"]
    asked = await as_the_panel(jp_fetch, session_id, ARGS)
    assert asked["preview"]["details"]["sha256"] == hashlib.sha256(shown).hexdigest()
    assert "lr = 0.5" in asked["preview"]["details"]["parameters"]
    if changed == "replaced":
        path.unlink()
        write(path, "__import__('os').system('id')")
    else:
        write(path, "0.1", indent=2)  # the same cells, other bytes: not what the card showed
    result = await answered(jp_fetch, session_id, asked)
    assert not result["ok"] and result["summary"] == (
        f"{NOTEBOOK} is not the notebook shown for this run (it changed since); nothing was sent: ask again to see "
        "it as it is now"), result["summary"]
    assert runs(ssh_profile) == [], "nothing reached the cluster"
    actions = (await call(jp_fetch, "GET", "actions", params={"session": session_id}))["actions"]
    assert [(a["tool"], a["ok"], a["args"]["sha256"]) for a in actions] == [
        ("notebook_submit", False, hashlib.sha256(shown).hexdigest())], "the log keeps the digest that was shown"


async def test_as_shown_it_runs_in_the_cards_run_directory_whoever_asked(
        jp_fetch, llm, jp_root_dir, ssh_profile, dev_cluster):
    path = jp_root_dir / NOTEBOOK
    shown = write(path, "0.1")
    session_id = (await open_session(jp_fetch))["session_id"]
    asked = await as_the_panel(jp_fetch, session_id, ARGS)
    result = await answered(jp_fetch, session_id, asked)
    assert result["ok"], result["summary"]
    assert f" in {asked['preview']['details']['run directory']}; page " in result["summary"], "the card's directory"
    assert path.read_bytes() == shown

    llm.add(model_calls("notebook_submit", {**ARGS, "params": ["lr=0.25"]}), say("Submitted."))
    after = (await call(jp_fetch, "POST", "sessions", session_id, "ask", body={"prompt": "run it at 0.25"}))["after"]
    asked = await until("the model's notebook_submit card", lambda: card(jp_fetch, session_id))
    assert asked["preview"]["details"]["sha256"] == hashlib.sha256(shown).hexdigest()
    result = await answered(jp_fetch, session_id, asked, after)
    assert result["ok"] and f" in {asked['preview']['details']['run directory']}; page " in result["summary"]
    assert len(runs(ssh_profile)) == 2
    # the model's turn ends with its answer before the server stops
    await events_until(jp_fetch, session_id, lambda seen: any(event["type"] == "done" for event in seen), after)


async def test_a_digest_a_caller_sends_is_checked_not_trusted(jp_fetch, llm, jp_root_dir, ssh_profile, dev_cluster):
    write(jp_root_dir / NOTEBOOK, "0.1")
    session_id = (await open_session(jp_fetch))["session_id"]
    for bad in ("", "0" * 63, "A" * 64, "../" * 30, 12, ["0" * 64]):
        status, error = await refusal(jp_fetch, "POST", "sessions", session_id, "tools", "notebook_submit",
                                      body={"args": {**ARGS, "sha256": bad}, "wait": False})
        assert status == 400 and error.startswith("some values are missing or wrong — sha256"), (bad, error)
    other = {**ARGS, "sha256": hashlib.sha256(b"another notebook").hexdigest()}
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "notebook_submit",
               body={"args": other, "wait": False, "call_id": "call_forged"})
    events = await events_until(jp_fetch, session_id, lambda seen: result_of(seen) is not None)
    assert not any(e["type"] == "approval_request" for e in events), "another notebook's digest gets no card"
    assert "is not the notebook shown for this run" in result_of(events)["summary"]
    assert runs(ssh_profile) == []
