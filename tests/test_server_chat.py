"""Chat over the server: the WebSocket with a scripted model on real HTTP, approvals over REST, resume, fail closed."""

from __future__ import annotations

import asyncio
import getpass
import json
import re

import pytest
from llm_server import call as model_calls
from llm_server import say
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    events_until,
    job_state,
    jp_server_config,
    llm,
    open_session,
    read_event,
    read_until,
    refusal,
    scancel,
    sleeper,
)

pytestmark = pytest.mark.cluster

HELLO = """#!/bin/bash
#SBATCH --job-name=server-hello
#SBATCH --chdir={root}
#SBATCH --time=00:02:00
#SBATCH --mem=100M
echo "hello from the server test"
"""
NOTE = {"page": "notes/server-test.md", "mode": "create", "body": "Written through the server.\n",
        "frontmatter": {"name": "Server test", "description": "made by a test", "type": "note"}}


def by_a_person(approver: str | None, where: str) -> bool:
    """Whether ``approver`` names the person by name in face ``where`` (a token login is an anonymous identity
    with a random hex id: the person is the account the server runs as)."""
    return approver == f"{getpass.getuser()} ({where})"


def ask(socket, prompt: str) -> None:
    socket.write_message(json.dumps({"type": "ask", "prompt": prompt}))


def kinds(events) -> list[str]:
    """Event types, leaving out the ones whose number depends on streaming or on the watcher."""
    return [e["type"] for e in events if e["type"] not in ("message_delta", "budget", "job_update")]


async def test_a_whole_chat_over_the_socket_with_an_approval(jp_fetch, jp_ws_fetch, llm, jp_root_dir, dev_cluster):
    script = HELLO.format(root=jp_root_dir)
    llm.add(model_calls("cluster_submit", {"script": script, "goal": "say hello from the server"}),
            say("Submitted; it will say hello."))
    session = await open_session(jp_fetch)
    assert (session["cluster"], session["mode"], session["has_model"], session["busy"]) == ("betty-dev", "confirm",
                                                                                           True, False)
    socket = await jp_ws_fetch("betty", "api", "sessions", session["session_id"], "ws")
    ask(socket, "submit my hello job")
    seen: list[dict] = []
    card = await read_until(socket, "approval_request", seen)
    assert (card["payload"]["tool"], card["payload"]["tier"]) == ("cluster_submit", 2)
    assert script.strip() in card["payload"]["preview"]["text"]
    socket.write_message(json.dumps({"type": "approval", "approval_id": card["payload"]["approval_id"],
                                     "decision": "approved"}))
    done = await read_until(socket, "done", seen)
    socket.close()

    assert kinds(seen) == ["message", "tool_call", "approval_request", "approval_resolved", "tool_result", "message",
                           "done"]
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert {e["session_id"] for e in seen} == {session["session_id"]}
    resolved = next(e["payload"] for e in seen if e["type"] == "approval_resolved")
    person = resolved["approver"]
    assert resolved["decision"] == "approved" and by_a_person(person, "side panel")
    result = next(e["payload"] for e in seen if e["type"] == "tool_result")
    job_id = re.search(r"job (\d+)", result["summary"]).group(1)
    assert result["ok"] and result["tool"] == "cluster_submit"
    assert seen[-2]["payload"] == {"role": "assistant", "text": "Submitted; it will say hello.", "model": "scripted"}
    assert done["payload"] == {"reason": "finished"}

    actions = (await call(jp_fetch, "GET", "actions", params={"session": session["session_id"]}))["actions"]
    assert [(a["tool"], a["decision"], a["approver"], a["ok"]) for a in actions] == [
        ("cluster_submit", "approved", person, True)]
    experiments = (await call(jp_fetch, "GET", "experiments"))["experiments"]
    assert [(e["job_id"], e["cluster"], e["slug"].endswith("server-hello")) for e in experiments] == [
        (job_id, "betty-dev", True)]
    one = await call(jp_fetch, "GET", "experiments", job_id)
    assert one == experiments[0] and one["script"] == script and one["page"].startswith("wiki/experiments/")
    assert (await refusal(jp_fetch, "GET", "experiments", "no-such-run"))[0] == 404

    # the server's job watcher follows the job to its end and tells every open session
    updates = await events_until(jp_fetch, session["session_id"], lambda events: any(
        e["type"] == "job_update" and e["payload"]["state"] == "COMPLETED" for e in events), after=done["seq"])
    finished = next(e["payload"] for e in updates if e["payload"]["state"] == "COMPLETED")
    assert (finished["job_id"], finished["cluster"]) == (job_id, "betty-dev")
    assert (finished["page"], finished["notebook"]) == (one["page"], one["notebook"]), "the same paths as job_update's"
    assert (await call(jp_fetch, "GET", "experiments", job_id))["state"] == "COMPLETED"


async def hello_approved(jp_fetch, jp_ws_fetch, script: str) -> list[dict]:
    """Ask for the hello job over a new session's socket, approve its card (which must show ``script``); the events."""
    session = await open_session(jp_fetch)
    socket = await jp_ws_fetch("betty", "api", "sessions", session["session_id"], "ws")
    ask(socket, "submit my hello job")
    seen: list[dict] = []
    card = await read_until(socket, "approval_request", seen)
    assert (card["payload"]["tool"], card["payload"]["tier"]) == ("cluster_submit", 2)
    assert script.strip() in card["payload"]["preview"]["text"]
    socket.write_message(json.dumps({"type": "approval", "approval_id": card["payload"]["approval_id"],
                                     "decision": "approved", "digest": card["payload"]["digest"]}))
    await read_until(socket, "done", seen)
    socket.close()
    return seen


@pytest.mark.parametrize("form", ["tool_call", "fenced"])
async def test_a_call_written_as_text_shows_the_same_card_and_never_reaches_the_chat_as_text(
        jp_fetch, jp_ws_fetch, llm, jp_root_dir, dev_cluster, form):
    """A model whose server leaves its calls in the text (no tool parser) drives the panel exactly as a native one."""
    script = HELLO.format(root=jp_root_dir)
    llm.calls_as = form
    llm.add(model_calls("cluster_submit", {"script": script, "goal": "say hello from the server"}),
            say("Submitted; it will say hello."))
    seen = await hello_approved(jp_fetch, jp_ws_fetch, script)
    result = next(e["payload"] for e in seen if e["type"] == "tool_result")
    assert result["ok"]
    scancel(dev_cluster, re.search(r"job (\d+)", result["summary"]).group(1))
    shown = "".join(e["payload"]["text"] for e in seen if e["type"] in ("message", "message_delta"))
    assert "cluster_submit" not in shown and "```" not in shown and "<tool_call>" not in shown
    assert [e["payload"]["reason"] for e in seen if e["type"] == "replanning"] == [
        "read the model's reply: 1 tool call written as text"]


async def test_a_socket_that_reconnects_with_after_loses_and_repeats_nothing(jp_fetch, jp_ws_fetch, llm):
    llm.add(model_calls("wiki_search", {"query": "cluster"}), say("The wiki knows your clusters. " * 30))
    session_id = (await open_session(jp_fetch))["session_id"]
    first = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
    ask(first, "what does the wiki say about clusters?")
    before: list[dict] = []
    await read_until(first, "tool_call", before)
    first.close()  # mid-answer: the agent goes on without a socket

    again = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws", params={"after": before[-1]["seq"]})
    after: list[dict] = []
    await read_until(again, "done", after)
    again.close()
    seqs = [e["seq"] for e in before + after]
    assert seqs == list(range(1, len(seqs) + 1))
    assert kinds(before + after) == ["message", "tool_call", "tool_result", "message", "done"]
    deltas = "".join(e["payload"]["text"] for e in after if e["type"] == "message_delta")
    assert deltas == "The wiki knows your clusters. " * 30


async def test_the_last_socket_closing_cancels_the_open_approval(jp_fetch, jp_ws_fetch, llm, dev_cluster):
    job_id, _ = sleeper(dev_cluster)
    try:
        llm.add(model_calls("cluster_cancel", {"job_id": job_id}), say("I left it running."))
        session_id = (await open_session(jp_fetch))["session_id"]
        panel = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
        notebook = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
        ask(panel, f"cancel job {job_id}")
        seen: list[dict] = []
        card = await read_until(panel, "approval_request", seen)
        notebook.close()  # another socket is still open: the card stays
        while await asyncio.wait_for(notebook.read_message(), 60) is not None:
            pass  # the server saw the close once the connection is gone
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        assert [a["approval_id"] for a in pending] == [card["payload"]["approval_id"]]

        panel.close()  # nobody can see the card any more
        rest = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "done",
                                  after=card["seq"])
        resolved = next(e["payload"] for e in rest if e["type"] == "approval_resolved")
        assert (resolved["approval_id"], resolved["decision"], resolved["approver"]) == (
            card["payload"]["approval_id"], "cancelled", None)
        assert not [e for e in rest if e["type"] == "tool_result"]
        actions = (await call(jp_fetch, "GET", "actions", params={"session": session_id}))["actions"]
        assert [(a["tool"], a["decision"], a["ok"]) for a in actions] == [("cluster_cancel", "cancelled", None)]
        assert (await call(jp_fetch, "GET", "approvals"))["approvals"] == []
        assert job_state(dev_cluster, job_id) in ("RUNNING", "PENDING")
    finally:
        scancel(dev_cluster, job_id)


async def test_a_bad_socket_message_is_an_error_frame_and_changes_nothing(jp_fetch, jp_ws_fetch, llm):
    session_id = (await open_session(jp_fetch))["session_id"]
    socket = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
    for bad, expected in [("not json", "a message is"), ('{"type": "dance"}', "a message is"),
                          ('{"type": "ask"}', "prompt: is required"),
                          ('{"type": "ask", "prompt": "  "}', "the prompt is empty"),
                          ('{"type": "approval", "approval_id": "apr_nope", "decision": "approved"}', "apr_nope")]:
        socket.write_message(bad)
        frame = await read_event(socket)
        assert frame["type"] == "server_error" and "seq" not in frame and expected in frame["message"], (bad, frame)
    socket.close()
    info = await call(jp_fetch, "GET", "sessions", session_id)
    assert (info["last_seq"], info["busy"]) == (0, False) and llm.requests == []


async def test_a_socket_on_an_unknown_session_is_refused(jp_fetch, jp_ws_fetch):
    from tornado.httpclient import HTTPClientError

    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("betty", "api", "sessions", "s-never-opened", "ws")
    assert refused.value.code == 404


async def test_approvals_answered_over_rest(jp_fetch, jp_root_dir):
    session_id = (await open_session(jp_fetch))["session_id"]
    started = await call(jp_fetch, "POST", "sessions", session_id, "tools", "wiki_write",
                         body={"args": NOTE, "wait": False})
    assert started["session_id"] == session_id and started["call_id"].startswith("call_")
    seen = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "approval_request")
    card = seen[-1]["payload"]
    assert card["call_id"] == started["call_id"] and card["preview"]["title"] == "create wiki/notes/server-test.md"
    listed = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
    assert listed == [{**card, "session_id": session_id, "task": None}], "the card, and whose it is"
    assert (await call(jp_fetch, "GET", "approvals", params={"session": "s-other"}))["approvals"] == []

    assert (await refusal(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "maybe"}))[0] == 400
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "edited"})
    assert code == 400 and "edited answers carry the edited arguments" in error
    resolution = await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "approved"})
    person = resolution["approver"]
    assert resolution == {"decision": "approved", "approver": person, "args": None, "reason": ""}
    assert by_a_person(person, "server API")
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "denied"})
    assert code == 409 and f"already resolved (approved by {person})" in error
    assert (await refusal(jp_fetch, "POST", "approvals", "apr_unknown", body={"decision": "approved"}))[0] == 404

    rest = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "tool_result",
                              after=seen[-1]["seq"])
    assert rest[-1]["payload"]["ok"] and rest[-1]["payload"]["call_id"] == started["call_id"]
    page = await call(jp_fetch, "GET", "wiki", "page", params={"name": "notes/server-test.md"})
    assert "Written through the server." in page["text"]


async def test_a_waiting_tool_call_answers_once_its_card_is_approved(jp_fetch):
    session_id = (await open_session(jp_fetch))["session_id"]
    waiting = asyncio.ensure_future(call(jp_fetch, "POST", "sessions", session_id, "tools", "wiki_write",
                                         body={"args": NOTE, "call_id": "call_from_the_test"}))
    seen = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "approval_request")
    assert seen[-1]["payload"]["call_id"] == "call_from_the_test" and not waiting.done()
    await call(jp_fetch, "POST", "approvals", seen[-1]["payload"]["approval_id"], body={"decision": "approved"})
    outcome = await waiting
    assert outcome == {"ok": True, "summary": "created wiki/notes/server-test.md",
                       "artifacts": ["wiki/notes/server-test.md"], "data": None, "text": None}


async def test_stop_cancels_the_sessions_open_cards(jp_fetch):
    session_id = (await open_session(jp_fetch))["session_id"]
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "wiki_write", body={"args": NOTE, "wait": False})
    seen = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "approval_request")
    assert await call(jp_fetch, "POST", "sessions", session_id, "stop") == {"stopped": True}
    rest = await events_until(jp_fetch, session_id, lambda events: events[-1]["type"] == "approval_resolved",
                              after=seen[-1]["seq"])
    assert rest[-1]["payload"]["decision"] == "cancelled"
    assert await call(jp_fetch, "POST", "sessions", session_id, "stop") == {"stopped": False}
