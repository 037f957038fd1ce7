"""A real ``jupyter server`` killed (SIGKILL) in the middle of an automation run: the next server's sweeper
resumes the run once its lease ran out, the run reads its scratchpad first, and it finishes exactly once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import run_betty
import polling
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, respond, say, stall

from betty_jupyter.agent.automations.store import AutomationStore, store_path

pytestmark = pytest.mark.cluster

LEASE = 3.0
GUARD = 180.0  # a guard against a hang, not a measurement
LOG_LINE = "nightly check: the queue is quiet"
DONE_NOTE = "- appended the nightly check to log.md (done)"


def until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true; that value."""
    return polling.until(what, check, GUARD, every=0.2)


@pytest.fixture
def project(dev_cluster: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    """A project made by ``betty init``; Betty's settings (the dev cluster, a short lease) made in the test."""
    root = tmp_path / "project"
    made = run_betty("init", str(root))
    assert made.returncode == 0, made.stderr
    jupyter_config = tmp_path / "jupyter-config"
    jupyter_config.mkdir()
    (jupyter_config / "jupyter_server_config.json").write_text(json.dumps(
        {"BettyApp": {"automation_lease_seconds": LEASE}}))
    return {"root": root, "env": {**os.environ, **dev_cluster, "JUPYTER_CONFIG_DIR": str(jupyter_config)},
            "runtime": tmp_path}


def betty_settings(project: dict[str, Any], dev_cluster: dict[str, str], llm: ScriptedLLM) -> dict[str, str]:
    """The environment of a server on the dev cluster with the scripted model."""
    clusters = json.loads(Path(dev_cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]
    settings = project["runtime"] / "betty.json"
    settings.write_text(json.dumps({"BettyConfig": {**clusters, "llm": {
        "base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1}}}))
    return {**project["env"], "BETTY_CONFIG": str(settings)}


def resumed_from_the_scratchpad(request: dict[str, Any]) -> Any:
    """The resumed run's first message carries the scratchpad rules and the notes written before the crash."""
    first = next(m["content"] for m in request["messages"] if m["role"] == "user")
    assert "Read your scratchpad first" in first
    assert "resumed now (attempt 2)" in first and DONE_NOTE in first
    return say("The scratchpad says the nightly check is already in log.md; nothing left to do.")


def test_a_run_cut_off_by_a_killed_server_is_resumed_and_finishes_once(project, dev_cluster):
    root: Path = project["root"]
    with ScriptedLLM([
        call("scratchpad", {"action": "read"}),
        call("wiki_write", {"page": "log.md", "mode": "append", "text": LOG_LINE}),
        call("scratchpad", {"action": "append", "text": DONE_NOTE}),
        stall(600, say("never: the server is killed while it waits for this")),
        respond(resumed_from_the_scratchpad),
    ]) as llm:
        env = betty_settings(project, dev_cluster, llm)
        first = JupyterServer(root, env, runtime_dir(project, "first"))
        try:
            made = first.request("POST", "automations", {"name": "Nightly check", "prompt": "Log the nightly check."})
            run_id = first.request("POST", f"automations/{made['id']}/run")["run_id"]
            until("the run reaching its fourth model turn", lambda: len(llm.requests) == 4)
        finally:
            first.process.kill()  # SIGKILL: no shutdown hook runs, the run's lease is left to run out
            first.process.wait(30)
            first.stop()

        store = AutomationStore(store_path(root / ".betty"))
        cut_off = store.run(run_id)
        assert (cut_off.status, cut_off.attempts) == ("running", 1) and cut_off.owner
        assert (root / "wiki" / "log.md").read_text().count(LOG_LINE) == 1

        second = JupyterServer(root, env, runtime_dir(project, "second"))
        try:
            done = until("the resumed run ending", lambda: _ended(second, made["id"], run_id))
            runs = second.request("GET", f"automations/{made['id']}/runs")["runs"]
        finally:
            second.stop()

    assert llm.errors == [] and len(llm.requests) == 5
    assert (done["status"], done["attempts"]) == ("done", 2)
    assert "already in log.md" in done["result"]
    assert [run["id"] for run in runs] == [run_id], "one run, finished once"
    assert (root / "wiki" / "log.md").read_text().count(LOG_LINE) == 1, "the side effect happened once"
    scratchpad = root / ".betty" / "scratchpads" / f"automation-{run_id}.md"
    assert DONE_NOTE in scratchpad.read_text()
    writes = [e for e in done["events"] if e["type"] == "tool_result" and e["payload"]["tool"] == "wiki_write"]
    assert [(e["attempt"], e["payload"]["ok"]) for e in writes] == [(1, True)]
    assert sorted({e["attempt"] for e in done["events"]}) == [1, 2]


def runtime_dir(project: dict[str, Any], name: str) -> Path:
    """A fresh Jupyter runtime folder (and the server's log) for one server."""
    path = project["runtime"] / name
    path.mkdir()
    return path


def _ended(server: JupyterServer, automation_id: str, run_id: str) -> dict[str, Any] | None:
    run = server.request("GET", f"automations/{automation_id}/runs/{run_id}")
    return run if run["status"] in ("done", "failed", "breaker", "killed") else None
