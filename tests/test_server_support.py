"""Fixtures and helpers the server tests share: a Jupyter server with Betty on the dev cluster and a scripted model.

No tests here; ``test_server_*.py`` files import what they use.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any, Callable

import pytest
from conftest import ssh
from llm_server import ScriptedLLM
from tornado.httpclient import HTTPClientError

from betty_jupyter.wiki import init_workspace

SOCKET_TIMEOUT = 60.0  # a guard against a hang, not a measurement
GUARD = 120.0  # likewise, for a condition polled over the API


@pytest.fixture
def llm():
    """A scripted chat model on 127.0.0.1; tests add its steps."""
    with ScriptedLLM() as scripted:
        yield scripted


def server_config(llm: ScriptedLLM, ssh_profile, root) -> dict[str, Any]:
    """Betty enabled, its workspace the server's root (with the seed wiki), the dev cluster over SSH."""
    init_workspace(root)
    return {
        "ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
        "BettyConfig": {
            "clusters": [{**ssh_profile.to_dict(), "name": "betty-dev"}],
            "llm": {"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1},
        },
        "BettyApp": {"approval_timeout": 300.0},
    }


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):
    """The server the tests talk to: :func:`server_config`."""
    return server_config(llm, ssh_profile, jp_root_dir)


async def call(jp_fetch, method: str, *parts: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
    """One request to ``/betty/api/…``; the decoded JSON answer (raises HTTPClientError on an error status)."""
    kwargs: dict[str, Any] = {"method": method}
    if method in ("POST", "PUT"):
        kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body if body is not None else {})
    response = await jp_fetch("betty", "api", *parts, params=params, **kwargs)
    return json.loads(response.body)


async def refusal(jp_fetch, method: str, *parts: str, body: Any = None,
                  params: dict[str, Any] | None = None) -> tuple[int, str]:
    """A request that must be refused: (status, the one-line error)."""
    with pytest.raises(HTTPClientError) as refused:
        await call(jp_fetch, method, *parts, body=body, params=params)
    error = json.loads(refused.value.response.body)["error"]
    assert "\n" not in error and error.strip() == error and error
    return refused.value.code, error


async def open_session(jp_fetch, **body: Any) -> dict[str, Any]:
    """POST sessions; the Session."""
    return await call(jp_fetch, "POST", "sessions", body=body)


async def events_until(jp_fetch, session_id: str, done, after: int = 0) -> list[dict[str, Any]]:
    """Long-poll the session's events after ``after`` until ``done(events)`` holds; every event seen."""
    seen: list[dict[str, Any]] = []
    for _ in range(60):
        answer = await call(jp_fetch, "GET", "sessions", session_id, "events", params={"after": after, "wait": 10})
        seen += answer["events"]
        after = answer["last_seq"]
        if done(seen):
            return seen
    pytest.fail(f"the awaited event did not come; saw {[e['type'] for e in seen]}")


async def read_event(socket) -> dict[str, Any]:
    """The next frame of a chat socket, decoded (fails when the socket closed)."""
    message = await asyncio.wait_for(socket.read_message(), SOCKET_TIMEOUT)
    assert message is not None, "the socket closed"
    return json.loads(message)


async def read_until(socket, type_: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """Frames until one of ``type_`` (all kept in ``seen``); that frame."""
    while True:
        frame = await read_event(socket)
        seen.append(frame)
        if frame["type"] == type_:
            return frame


def rows_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of an Outcome whose data is a table ({columns: [{name, type}], rows: [[…]]}), by column name."""
    assert answer["ok"], answer["summary"]
    assert answer["data"]["kind"] == "table"
    names = [column["name"] for column in answer["data"]["value"]["columns"]]
    return [dict(zip(names, row)) for row in answer["data"]["value"]["rows"]]


def sleeper(dev_cluster: dict[str, str], seconds: int = 300) -> tuple[str, str]:
    """A job submitted straight through OpenSSH (not through Betty): (job id, its unique name)."""
    name = f"server-{uuid.uuid4().hex[:8]}"
    made = ssh(dev_cluster, f"sbatch --parsable --job-name={name} --time=10 --wrap 'sleep {seconds}'")
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip().split(";")[0]
    assert re.fullmatch(r"\d+", job_id), made.stdout
    return job_id, name


def job_state(dev_cluster: dict[str, str], job_id: str) -> str:
    """The job's state as squeue says it ('' once it left the queue)."""
    return ssh(dev_cluster, f"squeue --noheader --format=%T --jobs={job_id}").stdout.strip()


def scancel(dev_cluster: dict[str, str], job_id: str) -> None:
    """Clean up a job a test made."""
    ssh(dev_cluster, f"scancel {job_id}")


async def until(what: str, check: Callable[[], Any], guard: float = GUARD) -> Any:
    """Poll the coroutine function ``check`` until it returns something true; that value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    while loop.time() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.1)
    pytest.fail(f"{what} did not happen")


async def submit_and_approve(jp_fetch, script: str, goal: str) -> str:
    """A person submits ``script`` through a session's ``cluster_submit`` and approves its card; the job id."""
    session_id = (await open_session(jp_fetch))["session_id"]
    submitting = asyncio.ensure_future(call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_submit",
                                            body={"args": {"script": script, "goal": goal}}))

    async def card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        return pending[0] if pending else None

    await call(jp_fetch, "POST", "approvals", (await until("the submit card", card))["approval_id"],
               body={"decision": "approved"})
    outcome = await submitting
    assert outcome["ok"], outcome["summary"]
    return re.search(r"job (\d+)", outcome["summary"]).group(1)


async def sweep_and_approve(jp_fetch, script: str, grid: list[str], goal: str, **more: Any) -> str:
    """A person runs ``script`` over ``grid`` with ``cluster_sweep`` (and ``more`` of its arguments: a search's) and
    approves its one card; the slug."""
    session_id = (await open_session(jp_fetch))["session_id"]
    sweeping = asyncio.ensure_future(call(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_sweep",
                                          body={"args": {"script": script, "grid": grid, "goal": goal, **more}}))

    async def card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals", params={"session": session_id}))["approvals"]
        return pending[0] if pending else None

    await call(jp_fetch, "POST", "approvals", (await until("the sweep's card", card))["approval_id"],
               body={"decision": "approved"})
    outcome = await sweeping
    assert outcome["ok"], outcome["summary"]
    return str(outcome["data"]["value"]["slug"])
