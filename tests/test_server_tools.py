"""Sessions and a person's own tool calls over REST; Betty's metrics on the server's /metrics."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from llm_server import respond, say
from prometheus_client.parser import text_string_to_metric_families
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    events_until,
    jp_server_config,
    llm,
    open_session,
    refusal,
    until,
)

pytestmark = pytest.mark.cluster

ESTIMATE = {"model": "Llama-3.1-8B", "method": "lora", "batch_size": 1, "seq_len": 1024}
PAGE = {"page": "notes/agent-call.md", "mode": "create", "body": "x\n",
        "frontmatter": {"name": "Agent call", "description": "a test page", "type": "note"}}


async def test_sessions_open_list_resume_and_switch_mode(jp_fetch):
    opened = await open_session(jp_fetch, mode="propose", session_id="s-panel")
    assert opened == {"session_id": "s-panel", "cluster": "betty-dev", "mode": "propose", "busy": False,
                      "last_seq": 0, "has_model": True, "user": "root", "model": "scripted", "model_setup": None,
                      "allowed_modes": ["off", "propose", "confirm", "auto"], "site_policy": None}
    assert await open_session(jp_fetch, session_id="s-panel", cluster=None, mode=None) == opened
    assert (await call(jp_fetch, "GET", "sessions"))["sessions"] == [opened]
    switched = await call(jp_fetch, "PUT", "sessions", "s-panel", "mode", body={"mode": "auto"})
    assert switched == {**opened, "mode": "auto"}
    assert await call(jp_fetch, "GET", "sessions", "s-panel") == switched

    code, error = await refusal(jp_fetch, "PUT", "sessions", "s-panel", "mode", body={"mode": "yolo"})
    assert code == 400 and error.startswith("mode: Input should be 'off', 'propose', 'confirm' or 'auto'")
    assert (await refusal(jp_fetch, "GET", "sessions", "s-nobody"))[0] == 404
    assert (await refusal(jp_fetch, "POST", "sessions", body={"cluster": "elsewhere"}))[0] == 404
    code, error = await refusal(jp_fetch, "POST", "sessions", body={"session_id": "../../etc"})
    assert code == 400 and "is not a session id" in error
    code, error = await refusal(jp_fetch, "POST", "sessions", body={"colour": "blue"})
    assert code == 400 and error == "colour: is not an argument of this tool"


async def test_ask_over_rest_and_a_busy_session_is_a_conflict(jp_fetch, llm):
    release = threading.Event()

    def held(request):  # the model answers only once the test has seen the session busy
        release.wait(60)
        return say("Hello from the scripted model.")

    llm.add(respond(held))
    session_id = (await open_session(jp_fetch))["session_id"]
    assert await call(jp_fetch, "POST", "sessions", session_id, "ask", body={"prompt": "hi"}) == {"after": 0}
    try:
        assert (await call(jp_fetch, "GET", "sessions", session_id))["busy"] is True
        code, error = await refusal(jp_fetch, "POST", "sessions", session_id, "ask", body={"prompt": "again"})
        assert code == 409 and "still answering" in error
    finally:
        release.set()
    events = await events_until(jp_fetch, session_id, lambda seen: seen[-1]["type"] == "done")
    assert [e["payload"]["text"] for e in events if e["type"] == "message"] == ["hi", "Hello from the scripted model."]
    code, error = await refusal(jp_fetch, "POST", "sessions", session_id, "ask", body={"prompt": " "})
    assert code == 400 and "the prompt is empty" in error
    waited = await call(jp_fetch, "GET", "sessions", session_id, "events", params={"after": events[-1]["seq"],
                                                                                    "wait": 0.2})
    assert waited == {"events": [], "last_seq": events[-1]["seq"]}
    assert (await refusal(jp_fetch, "GET", "sessions", session_id, "events", params={"wait": 31}))[0] == 400


async def test_tool_calls_with_and_without_waiting(jp_fetch):
    session_id = (await open_session(jp_fetch))["session_id"]
    outcome = await call(jp_fetch, "POST", "sessions", session_id, "tools", "gpu_estimate", body={"args": ESTIMATE})
    assert outcome["ok"] and outcome["data"]["kind"] == "json"
    assert outcome["data"]["value"]["model"] == "Llama-3.1-8B" and outcome["data"]["value"]["peak_gib"] > 14

    started = await call(jp_fetch, "POST", "sessions", session_id, "tools", "wiki_search",
                         body={"args": {"query": "dev cluster"}, "wait": False})
    assert set(started) == {"call_id", "session_id"}
    seen = await events_until(jp_fetch, session_id, lambda events: any(
        e["type"] == "tool_result" and e["payload"]["call_id"] == started["call_id"] for e in events))
    result = next(e["payload"] for e in seen if e["type"] == "tool_result" and e["payload"]["call_id"] == started["call_id"])
    assert result["ok"] and result["tool"] == "wiki_search" and "clusters/" in result["summary"]
    records = (await call(jp_fetch, "GET", "actions", params={"session": session_id, "limit": 1}))["actions"]
    assert [(r["tool"], r["call_id"], r["decision"]) for r in records] == [
        ("wiki_search", started["call_id"], "approved")]


@pytest.mark.parametrize(("tool", "body", "expected"), [
    ("gpu_estimat", {"args": ESTIMATE}, "there is no tool 'gpu_estimat'; did you mean gpu_estimate"),
    ("gpu_estimate", {"args": {"model": "Llama-3.1-8B"}}, "some values are missing or wrong — method: is required"),
    ("gpu_estimate", '{"args": {"model": ', "the request body is not valid JSON"),
    ("gpu_estimate", "[1, 2]", "the request body must be one JSON object, not list"),
    ("gpu_estimate", {"args": ESTIMATE, "call_id": "a b"}, "call_id: String should match pattern"),
    ("gpu_estimate", {"args": "model=x"}, "args: Input should be a valid dictionary"),
])
async def test_a_bad_tool_call_is_a_400_with_one_line(jp_fetch, tool, body, expected):
    session_id = (await open_session(jp_fetch))["session_id"]
    for wait in (True, False):
        sent = body if isinstance(body, str) else {**body, "wait": wait}
        code, error = await refusal(jp_fetch, "POST", "sessions", session_id, "tools", tool, body=sent)
        assert code == 400 and expected in error
    assert (await call(jp_fetch, "GET", "sessions", session_id))["last_seq"] == 0


async def test_a_submission_the_cluster_cannot_run_is_refused_in_the_line_the_panel_shows(jp_fetch):
    """The panel's own call: refused before any card, in one line that names the script's lines and the choices."""
    session_id = (await open_session(jp_fetch))["session_id"]
    script = ("#!/bin/bash\n#SBATCH --job-name=never\n#SBATCH --time=1\n#SBATCH --partition='<b>gpu-large</b>'\n"
              "#SBATCH --mem=10T\ntrue\n")
    outcome = await call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_submit",
                         body={"args": {"script": script, "goal": "never runs"}})
    assert not outcome["ok"] and outcome["summary"] == (
        "can't submit: line 4: partition '<b>gpu-large</b>' does not exist; choose cpu or gpu")
    assert (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"] == []


async def test_a_tool_call_in_an_unknown_session_is_a_404(jp_fetch):
    code, error = await refusal(jp_fetch, "POST", "sessions", "s-gone", "tools", "gpu_estimate",
                                body={"args": ESTIMATE})
    assert code == 404 and "no open session 's-gone'" in error


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def test_metrics_count_tool_calls_tokens_approvals_and_slurm_commands(jp_fetch, llm):
    llm.add(say("Nothing to do."))
    before = samples((await jp_fetch("metrics")).body.decode())
    session_id = (await open_session(jp_fetch))["session_id"]
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "gpu_estimate", body={"args": ESTIMATE})
    await call(jp_fetch, "GET", "partitions")
    await call(jp_fetch, "POST", "sessions", session_id, "tools", "wiki_write", body={"wait": False, "args": {
        "page": "notes/metrics.md", "mode": "create", "body": "x\n",
        "frontmatter": {"name": "Metrics", "description": "a test page", "type": "note"}}})
    card = (await events_until(jp_fetch, session_id, lambda seen: seen[-1]["type"] == "approval_request"))[-1]
    await call(jp_fetch, "POST", "approvals", card["payload"]["approval_id"], body={"decision": "denied"})
    await call(jp_fetch, "POST", "sessions", session_id, "ask", body={"prompt": "anything?"})
    await events_until(jp_fetch, session_id, lambda seen: seen[-1]["type"] == "done", after=card["seq"])
    after = samples((await jp_fetch("metrics")).body.decode())

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("betty_tool_calls_total", tool="gpu_estimate", decision="auto") == 1
    assert grew("betty_tool_calls_total", tool="cluster_partitions", decision="auto") == 1
    assert grew("betty_tool_calls_total", tool="wiki_write", decision="denied") == 1
    assert grew("betty_approval_wait_seconds_count") == 1
    assert grew("betty_slurm_command_seconds_count", command="sinfo") >= 1
    used = len(json.dumps(llm.requests[-1]["messages"], sort_keys=True)) // 4 + len("Nothing to do.") // 4
    assert grew("betty_llm_tokens_total") == used  # the scripted model's usage figures


async def test_a_session_lists_its_tools_with_their_tiers_and_schemas(jp_fetch):
    session_id = (await open_session(jp_fetch))["session_id"]
    tools = {tool["name"]: tool for tool in (await call(jp_fetch, "GET", "sessions", session_id, "tools"))["tools"]}
    assert {"cluster_queue", "cluster_submit", "gpu_estimate", "wiki_write"} <= set(tools)
    assert (tools["gpu_estimate"]["tier"], tools["cluster_queue"]["tier"], tools["cluster_submit"]["tier"]) == (0, 1, 2)
    submit = tools["cluster_submit"]
    assert submit["schema"]["type"] == "object" and "script" in submit["schema"]["required"]
    assert "title" not in submit["schema"] and submit["description"]
    assert (await refusal(jp_fetch, "GET", "sessions", "s-gone", "tools"))[0] == 404


async def test_an_agents_call_is_decided_as_the_agents_and_names_the_agent(jp_fetch):
    session_id = (await open_session(jp_fetch, mode="confirm", agent="an editor (MCP)"))["session_id"]

    async def card():
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        return pending[0] if pending else None

    reading = asyncio.ensure_future(call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_partitions",
                                         body={"caller": "agent"}))
    asked = await until("the tier 1 card an agent's read raises", card)  # a person's own read would just run
    assert (asked["tool"], asked["tier"], asked["task"]) == ("cluster_partitions", 1, "an editor (MCP)")
    await call(jp_fetch, "POST", "approvals", asked["approval_id"], body={"decision": "approved_for_session"})
    first = await reading
    assert first["ok"] and "gpu" in first["text"] and first["data"]["kind"] == "table"
    again = await call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_partitions",
                       body={"caller": "agent"})
    assert again["ok"]  # asked once per session
    records = (await call(jp_fetch, "GET", "actions", params={"session": session_id}))["actions"]
    assert [(r["tool"], r["decision"], r["task"]) for r in records] == [
        ("cluster_partitions", "approved_for_session", "an editor (MCP)"),
        ("cluster_partitions", "auto", "an editor (MCP)")]
    assert records[0]["approver"].endswith("(server API)") and records[1]["approver"] is None
    code, error = await refusal(jp_fetch, "POST", "sessions", body={"agent": "x\u001b[2J"})
    assert code == 400 and error.startswith("agent: String should match pattern")


async def test_a_card_whose_caller_hung_up_is_cancelled(jp_fetch, jp_http_port, jp_base_url, jp_auth_header):
    session_id = (await open_session(jp_fetch))["session_id"]
    body = json.dumps({"args": PAGE, "caller": "agent", "call_id": "call_hung_up"}).encode()
    _, writer = await asyncio.open_connection("localhost", jp_http_port)
    writer.write(f"POST {jp_base_url.rstrip('/')}/betty/api/sessions/{session_id}/tools/wiki_write HTTP/1.1\r\n"
                 f"Host: localhost:{jp_http_port}\r\nAuthorization: {jp_auth_header['Authorization']}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()

    async def pending():
        return (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]

    assert (await until("the card", pending))[0]["call_id"] == "call_hung_up"
    writer.close()
    await writer.wait_closed()

    async def logged():
        return (await call(jp_fetch, "GET", "actions", params={"session": session_id}))["actions"]

    record = (await until("the cancelled call in the action log", logged))[0]
    assert (record["call_id"], record["decision"], record["ok"]) == ("call_hung_up", "cancelled", None)
    assert await pending() == []
