"""The action log as a timeline, without a server: lanes and their links, filters, a dry-run replay, the bug bundle.

The server's routes over the dev cluster are in ``test_server_timeline.py``.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.agent.actions import ActionLog, ActionRecord
from betty_jupyter.agent.models import Preview, Tier
from betty_jupyter.agent.timeline import Filters, bug_bundle, known_secrets, replay_calls, timeline

API_KEY = "sk-plantedConfigKey0123456789abcdef"
ENV_TOKEN = "planted-env-token-7f3e9a"
ARG_SECRET = "planted-arg-secret-51c2d0"
MODEL_KEY = "planted-model-key-93ab1e"
PREVIEW = Preview(kind="command", title="submit train.sh", text="sbatch train.sh")


def record(log: ActionLog, call_id: str, ts: float, **fields: Any) -> ActionRecord:
    values: dict[str, Any] = {"ts": ts, "session_id": "s-main", "call_id": call_id, "tool": "cluster_submit",
                              "tier": Tier.ALWAYS_ASK, "args": {"script": "train.sh"}, "preview": PREVIEW,
                              "decision": "approved", "approver": "ada (side panel)", "ok": True,
                              "summary": "job 42 submitted", "duration_ms": 40.0}
    return log.record(ActionRecord(**{**values, **fields}))


@pytest.fixture
def log(tmp_path: Path) -> ActionLog:
    """A person's session that delegates two tasks (one helper calls twice), an automation run, another session."""
    actions = ActionLog(tmp_path)
    record(actions, "c1", 1000.0)
    record(actions, "c2", 1010.0, tool="delegate_tasks", tier=0, decision="auto", approver=None,
           args={"tasks": [{"title": "read logs"}, {"title": "check quota"}]}, preview=None)
    record(actions, "c3", 1020.0, tool="cluster_read", tier=1, decision="auto", task="read logs", approver=None)
    record(actions, "c4", 1030.0, tool="cluster_queue", tier=0, decision="auto", task="check quota", approver=None)
    record(actions, "c5", 1040.0, tool="cluster_read", tier=1, decision="denied", task="read logs", ok=None)
    record(actions, "a1", 1050.0, session_id="automation-r1", tool="wiki_search", tier=0, decision="auto",
           task="Daily digest", approver=None)
    record(actions, "o1", 1060.0, session_id="s-other", tool="cluster_queue", tier=0, decision="auto", approver=None)
    return actions


def test_every_call_is_in_its_lane_and_helpers_link_to_the_call_that_started_them(log: ActionLog) -> None:
    answer = timeline(log, trigger_of=lambda run_id: {"r1": "schedule"}[run_id])
    lanes = {lane["id"]: lane for lane in answer["lanes"]}
    by_call = {call["call_id"]: call for call in answer["calls"]}
    assert [call["call_id"] for call in answer["calls"]] == ["c1", "c2", "c3", "c4", "c5", "a1", "o1"]
    assert by_call["c1"]["lane"] == by_call["c2"]["lane"] == "s-main"
    assert by_call["c3"]["lane"] == by_call["c5"]["lane"] != by_call["c4"]["lane"]
    helper = lanes[by_call["c3"]["lane"]]
    assert (helper["kind"], helper["started_by"], helper["title"]) == ("helper", "c2", "read logs")
    assert lanes[by_call["c4"]["lane"]]["started_by"] == "c2"
    automation = lanes["automation-r1"]
    assert (automation["kind"], automation["title"], automation["trigger"]) == ("automation", "Daily digest",
                                                                                "schedule")
    assert lanes["s-other"]["kind"] == "session"
    assert answer["sessions"] == ["automation-r1", "s-main", "s-other"]
    call = by_call["c5"]
    assert (call["decision"], call["approver"], call["ok"], call["duration_ms"]) == ("denied", "ada (side panel)",
                                                                                      None, 40.0)


def test_filters_keep_the_lanes_of_what_they_show_and_the_links_of_helpers(log: ActionLog) -> None:
    answer = timeline(log, Filters(session="s-main", tool="cluster_read"))
    assert [call["call_id"] for call in answer["calls"]] == ["c3", "c5"]
    assert [lane["started_by"] for lane in answer["lanes"]] == ["c2"]  # its starting call is filtered out, not lost
    denied = timeline(log, Filters(decision="denied"))
    assert [call["call_id"] for call in denied["calls"]] == ["c5"]
    assert timeline(log, Filters(session="s-nobody"))["calls"] == []


def test_a_helper_of_a_call_that_waited_for_its_tasks_links_to_it_though_it_is_logged_last(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    tasks = {"tasks": [{"title": "read logs"}]}
    record(log, "h1", 1005.0, tool="cluster_read", task="read logs")
    record(log, "d1", 1010.0, tool="delegate_tasks", args=tasks, duration_ms=8000.0)  # ran from 1002 to 1010
    record(log, "h2", 1030.0, tool="cluster_read", task="read logs")
    record(log, "d2", 1040.0, tool="delegate_tasks", args=tasks, duration_ms=20000.0)
    lanes = {lane["id"]: lane for lane in timeline(log)["lanes"]}
    by_call = {call["call_id"]: call["lane"] for call in timeline(log)["calls"]}
    assert lanes[by_call["h1"]]["started_by"] == "d1" and lanes[by_call["h2"]]["started_by"] == "d2"


def test_a_task_without_a_delegation_naming_it_is_the_sessions_own(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    record(log, "m1", 1000.0, task="claude-code (MCP)")  # an MCP client's call: its session, no helper
    record(log, "d1", 1010.0, tool="delegate_tasks", args={"tasks": [{"title": "read logs"}]})
    answer = timeline(log)
    assert [lane["kind"] for lane in answer["lanes"]] == ["session"]


def test_replay_makes_previews_only_and_says_what_changed(log: ActionLog) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def preview(tool: str, args: dict[str, Any]) -> Preview:
        asked.append((tool, args))
        return PREVIEW if tool == "cluster_submit" else Preview(kind="text", title=f"{tool} now", text="")

    lines = replay_calls(log, Filters(session="s-main"), preview)
    assert [(line["call_id"], line["status"]) for line in lines] == [
        ("c1", "same"), ("c2", "not recorded"), ("c3", "changed"), ("c4", "changed"), ("c5", "changed")]
    assert "title: 'submit train.sh' → 'cluster_read now'" in lines[2]["diff"]
    assert lines[2]["current"]["title"] == "cluster_read now"
    assert [tool for tool, _ in asked] == ["cluster_submit", "delegate_tasks", "cluster_read", "cluster_queue",
                                          "cluster_read"]


def planted(tmp_path: Path) -> tuple[ActionLog, dict[str, Any], dict[str, str], list[dict[str, Any]]]:
    """A log, a configuration, an environment and events, each holding a planted secret."""
    log = ActionLog(tmp_path)
    record(log, "p1", 1000.0, args={"script": f"export WANDB_API_KEY={ARG_SECRET}\npython train.py",
                                    "hf_token": ARG_SECRET},
           summary=f"ran with {ARG_SECRET}")
    key_file = tmp_path / "model.key"
    key_file.write_text(MODEL_KEY + "\n")
    config = {"clusters": [{"name": "dev", "transport": "local", "env": {"SLURM_TOKEN": ENV_TOKEN}}],
              "default_cluster": None, "llm": {"base_url": "http://127.0.0.1:1", "api_key": API_KEY,
                                               "api_key_file": str(key_file)}, "rules": {}}
    environ = {"PATH": "/usr/bin", "MY_SERVICE_TOKEN": ENV_TOKEN, "HOME": "/home/ada"}
    events = [{"type": "tool_call", "session_id": "s-main", "seq": 1, "ts": 1000.0,
               "payload": {"call_id": "p1", "tool": "cluster_submit",
                           "args": {"script": f"echo {ENV_TOKEN} {MODEL_KEY}", "token": ARG_SECRET}}},
              {"type": "message", "session_id": "s-main", "seq": 2, "ts": 1001.0,
               "payload": {"role": "assistant", "text": f"Your key is {API_KEY}"}}]
    return log, config, environ, events


def test_the_bug_bundle_holds_no_planted_secret(tmp_path: Path) -> None:
    log, config, environ, events = planted(tmp_path)
    data = bug_bundle(log, "s-main", events, config, environ)
    for secret in (API_KEY, ENV_TOKEN, ARG_SECRET, MODEL_KEY):
        assert secret.encode() not in data, secret
    files = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(files.namelist()) == ["README.txt", "actions.jsonl", "config.json", "events.jsonl"]
    actions = [json.loads(line) for line in files.read("actions.jsonl").decode().splitlines()]
    assert [(line["call_id"], line["args"]["hf_token"]) for line in actions] == [("p1", "[redacted]")]
    shown = [json.loads(line) for line in files.read("events.jsonl").decode().splitlines()]
    assert shown[0]["payload"]["args"]["script"] == "echo [redacted] [redacted]"
    assert shown[1]["payload"]["text"] == "Your key is [redacted]"
    kept = json.loads(files.read("config.json"))
    assert kept["llm"]["base_url"] == "http://127.0.0.1:1" and kept["llm"]["api_key"] == "[redacted]"
    assert kept["clusters"][0]["env"] == {"SLURM_TOKEN": "[redacted]"}


def test_known_secrets_name_the_models_key_by_its_variable(tmp_path: Path) -> None:
    found = known_secrets({"llm": {"api_key_env": "LAB_LLM"}}, {"LAB_LLM": MODEL_KEY, "USER": "ada"})
    assert MODEL_KEY in found and "ada" not in found
