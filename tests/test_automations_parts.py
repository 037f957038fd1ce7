"""Automations' parts without a server: cron times, templates, definitions, the store's leases and secrets,
the triggers, the first message and the pause/kill gate."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from betty_jupyter.agent import events as ev
from betty_jupyter.agent.automations import cron, templates, triggers
from betty_jupyter.agent.automations.control import RunControl
from betty_jupyter.agent.automations.definitions import DIGEST, DIGEST_ID, AutomationSpec, Trigger
from betty_jupyter.agent.automations.runner import first_message
from betty_jupyter.agent.automations.store import AutomationStore

NOTE = AutomationSpec(name="Note taker", prompt="Write a note.")
HOOK = AutomationSpec(name="CI failed", prompt="Look at {{ payload.build.id }}.",
                      trigger=Trigger(kind="webhook", template="Build {{ payload.build.id }} of {{ payload.repo }}"))


@pytest.fixture
def store(tmp_path: Path) -> AutomationStore:
    return AutomationStore(tmp_path / ".betty" / "automations.sqlite", max_failures=2)


# ----- cron ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "after", "expected"), [
    ("0 8 * * *", datetime(2026, 3, 2, 7, 59), datetime(2026, 3, 2, 8, 0)),
    ("0 8 * * *", datetime(2026, 3, 2, 8, 0), datetime(2026, 3, 3, 8, 0)),  # strictly after
    ("*/15 * * * *", datetime(2026, 3, 2, 10, 1), datetime(2026, 3, 2, 10, 15)),
    ("30 6 * * 1-5", datetime(2026, 3, 6, 7, 0), datetime(2026, 3, 9, 6, 30)),  # Friday → Monday
    ("0 0 1 * *", datetime(2026, 12, 15), datetime(2027, 1, 1)),
    ("@daily", datetime(2026, 3, 2, 12, 0), datetime(2026, 3, 3, 0, 0)),
])
def test_the_next_time_a_schedule_fires(expression: str, after: datetime, expected: datetime) -> None:
    zone = timezone(timedelta(hours=1))
    assert cron.next_time(expression, after.replace(tzinfo=zone)) == expected.replace(tzinfo=zone)


def test_next_unix_is_after_and_within_a_day_for_a_daily_schedule() -> None:
    now = time.time()
    due = cron.next_unix("0 8 * * *", now)
    assert now < due <= now + 86_400


@pytest.mark.parametrize(("expression", "says"), [
    ("0 8 * *", "needs five fields"), ("0 8 * * * *", "needs five fields"), ("61 8 * * *", "is not valid"),
    ("0 25 * * *", "is not valid"), ("a b c d e", "is not valid"), ("", "needs five fields"),
])
def test_a_bad_cron_expression_is_one_line_saying_why(expression: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        cron.check(expression)
    assert "\n" not in str(refused.value)


# ----- templates ---------------------------------------------------------------------------------------
def test_fields_are_mapped_by_path_and_missing_ones_are_named() -> None:
    payload = {"build": {"id": 42, "ok": False, "steps": [{"name": "lint"}, {"name": "test"}]},
               "repo": "lab/model", "tags": ["a", "b"]}
    rendered = templates.render("{{ payload.build.id }} {{payload.repo}} {{ payload.build.steps.1.name }} "
                                "{{ payload.build.ok }} {{ payload.tags }} [{{ payload.nope.deeper }}]",
                                {"payload": payload})
    assert rendered.text == '42 lab/model test false ["a","b"] []'
    assert rendered.missing == ["payload.nope.deeper"]
    assert "payload.nope.deeper was not in what fired this run" in rendered.with_note()


def test_nothing_in_a_template_is_evaluated() -> None:
    for bad in ("{{ payload.x + 1 }}", "{{ payload.__class__() }}", "{{ payload['x'] }}", "{{ }}", "{{ x|upper }}"):
        with pytest.raises(ValueError, match="is not a field path"):
            templates.check(bad, ["payload"])
    with pytest.raises(ValueError, match="start with payload"):
        templates.check("{{ job.id }}", ["payload"])
    with pytest.raises(ValueError, match="never closed"):
        templates.check("{{ payload.x", ["payload"])
    assert templates.render("{{ payload.__class__ }}", {"payload": {}}).text == ""


def test_a_long_field_is_cut() -> None:
    text = templates.render("{{ payload.log }}", {"payload": {"log": "x" * 10_000}}).text
    assert len(text) < 4100 and text.endswith("(6000 more characters)")


# ----- definitions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "says"), [
    ({"name": "x", "prompt": "p", "trigger": {"kind": "schedule"}}, "needs cron"),
    ({"name": "x", "prompt": "p", "trigger": {"kind": "schedule", "cron": "0 8 * *"}}, "five fields"),
    ({"name": "x", "prompt": "p", "trigger": {"kind": "manual", "cron": "0 8 * * *"}}, "belongs to a schedule"),
    ({"name": "x", "prompt": "p", "trigger": {"kind": "job", "states": ["EXPLODED"]}}, "unknown job state"),
    ({"name": "x", "prompt": "{{ payload.a }}"}, "start with run, automation"),
    ({"name": "x", "prompt": "p", "trigger": {"kind": "manual", "template": "t"}}, "belongs to a webhook"),
    ({"name": "x", "prompt": "p", "persona": "../betty"}, "persona"),
    ({"name": "  ", "prompt": "p"}, "give the automation a name"),
    ({"name": "x", "prompt": "p", "limits": {"iterations": 0}}, "iterations"),
    ({"name": "x", "prompt": "p", "colour": "red"}, "colour"),
])
def test_a_definition_is_checked_when_it_is_made(body: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        AutomationSpec.model_validate(body)


def test_job_states_are_normalised_and_the_digest_is_a_schedule() -> None:
    spec = AutomationSpec(name="x", prompt="{{ job.id }} ended {{ job.state }}",
                          trigger=Trigger(kind="job", states=["failed", " TIMEOUT", "FAILED"]))
    assert spec.trigger.states == ["FAILED", "TIMEOUT"]
    assert (DIGEST.trigger.kind, DIGEST.trigger.cron, DIGEST.persona) == ("schedule", "0 8 * * *", "digest")
    assert "cluster_submit" not in (DIGEST.tools or []) and "cluster_cancel" not in (DIGEST.tools or [])


# ----- the store ------------------------------------------------------------------------------------------
def test_a_webhook_secret_is_kept_hashed_and_compared_exactly(store: AutomationStore) -> None:
    automation, secret = store.create(HOOK)
    assert automation.webhook and secret and len(secret) >= 40
    assert store.verify_secret(automation.id, secret)
    for wrong in ("", secret[:-1], secret + "x", secret.upper(), "x" * len(secret)):
        assert not store.verify_secret(automation.id, wrong)
    assert not store.verify_secret("no-such-automation", secret)
    with closing(sqlite3.connect(store.path)) as db:
        dump = "\n".join(db.iterdump())
    assert secret not in dump
    _, none = store.create(NOTE)
    assert none is None


def test_a_secret_is_made_when_an_automation_becomes_a_webhook_and_dropped_when_it_stops(store) -> None:
    automation, _ = store.create(NOTE)
    became, secret = store.replace(automation.id, HOOK)
    assert became.webhook and secret and store.verify_secret(automation.id, secret)
    again, kept = store.replace(automation.id, HOOK)
    assert again.webhook and kept is None and store.verify_secret(automation.id, secret)
    plain, _ = store.replace(automation.id, NOTE)
    assert not plain.webhook and not store.verify_secret(automation.id, secret)


def test_a_delivery_seen_before_is_the_same_run(store: AutomationStore) -> None:
    automation, _ = store.create(HOOK)
    first, new = store.enqueue(automation.id, "webhook", {"a": 1}, "webhook:d-1")
    again, second_new = store.enqueue(automation.id, "webhook", {"a": 2}, "webhook:d-1")
    other, other_new = store.enqueue(automation.id, "webhook", {"a": 3}, None)
    assert new and not second_new and other_new
    assert again.id == first.id and again.payload == {"a": 1}
    assert len(store.runs(automation.id)) == 2


def test_one_run_per_automation_at_a_time_and_a_dead_servers_run_is_resumed(store: AutomationStore) -> None:
    automation, _ = store.create(NOTE)
    first, _ = store.enqueue(automation.id, "manual")
    second, _ = store.enqueue(automation.id, "manual")
    claimed = store.claim("server-a", lease_seconds=0.2)
    assert [run.id for run in claimed] == [first.id]
    assert store.get(automation.id).status == "active"
    assert store.claim("server-b", 60) == []  # one at a time
    usage = {"tokens": 120, "iterations": 2, "seconds": 1.5}
    assert store.renew(first.id, "server-a", 0.2, usage) is not None
    assert store.sweep(keep="server-a") == []  # the sweeper's own runs are alive
    time.sleep(0.3)
    assert store.sweep() == [first.id]
    resumed = store.run(first.id)
    assert (resumed.status, resumed.owner, resumed.tokens, resumed.attempts) == ("queued", None, 120, 1)
    assert store.renew(first.id, "server-a", 60, usage) is None  # the dead server lost it
    assert [run.id for run in store.claim("server-b", 60)] == [first.id]
    assert store.run(first.id).attempts == 2
    assert not store.finish(first.id, "server-a", "done", usage)
    assert store.finish(first.id, "server-b", "done", usage, result="all good")
    assert (store.run(first.id).status, store.get(automation.id).status) == ("done", "idle")
    assert [run.id for run in store.claim("server-b", 60)] == [second.id]


def test_a_run_that_keeps_taking_its_server_down_is_failed_not_resumed(tmp_path: Path) -> None:
    store = AutomationStore(tmp_path / "a.sqlite", max_attempts=2)
    automation, _ = store.create(NOTE)
    run, _ = store.enqueue(automation.id, "manual")
    for owner in ("a", "b"):
        store.claim(owner, lease_seconds=-1)
        store.sweep()
    ended = store.run(run.id)
    assert (ended.status, ended.code, ended.attempts) == ("failed", "resumed_too_often", 2)
    assert "stopped 2 times" in ended.result


def test_failures_in_a_row_suspend_and_resume_starts_over(store: AutomationStore) -> None:
    automation, _ = store.create(NOTE)
    usage = {"tokens": 1, "iterations": 1, "seconds": 0.1}
    for status in ("failed", "done", "breaker", "killed", "failed"):
        run, _ = store.enqueue(automation.id, "manual")
        store.claim("me", 60)
        store.finish(run.id, "me", status, usage)
    suspended = store.get(automation.id)
    assert (suspended.status, suspended.failures) == ("error-suspended", 2)
    queued, _ = store.enqueue(automation.id, "manual")
    assert store.claim("me", 60) == []  # a suspended automation's runs wait
    resumed = store.resume(automation.id)
    assert (resumed.status, resumed.failures) == ("idle", 0)
    assert [run.id for run in store.claim("me", 60)] == [queued.id]


def test_pause_holds_queued_runs_and_kill_ends_them(store: AutomationStore) -> None:
    automation, _ = store.create(NOTE)
    running, _ = store.enqueue(automation.id, "manual")
    store.claim("me", 60)
    queued, _ = store.enqueue(automation.id, "manual")
    store.pause(automation.id)
    assert store.status(automation.id) == "paused"
    assert sorted(store.request_kill(automation.id)) == sorted([running.id, queued.id])
    assert store.run(queued.id).status == "killed"
    assert store.run(running.id).kill_requested and store.run(running.id).status == "running"
    assert store.resume(automation.id).status == "active"  # its run still goes on (until it stops)


def test_the_digest_is_installed_once_paused_and_stays_deleted(store: AutomationStore) -> None:
    store.install_digest()
    digest = store.get(DIGEST_ID)
    assert digest is not None and digest.status == "paused" and digest.trigger.cron == "0 8 * * *"
    assert store.delete(DIGEST_ID)
    store.install_digest()
    assert store.get(DIGEST_ID) is None


# ----- triggers ---------------------------------------------------------------------------------------------
def test_a_due_schedule_fires_once_per_slot_and_counts_afresh_after_a_pause(store: AutomationStore) -> None:
    automation, _ = store.create(AutomationSpec(name="s", prompt="p", trigger=Trigger(kind="schedule",
                                                                                      cron="0 8 * * *")))
    now = datetime(2026, 3, 2, 7, 0).astimezone().timestamp()
    queued, due = triggers.fire_schedules(store, now)
    eight = datetime(2026, 3, 2, 8, 0).astimezone().timestamp()
    assert queued == [] and due == eight
    queued, due = triggers.fire_schedules(store, eight + 3 * 86_400)  # the server was off for three days
    assert len(queued) == 1 and queued[0].delivery_id == f"schedule:{int(eight)}"
    assert due == eight + 4 * 86_400
    assert triggers.fire_schedules(store, eight + 3 * 86_400)[0] == []
    store.set_next_due(automation.id, eight)
    assert triggers.fire_schedules(store, eight + 60)[0] == []  # that slot already ran
    store.pause(automation.id)
    assert triggers.fire_schedules(store, eight + 9 * 86_400) == ([], None)
    assert store.get(automation.id).next_due is None


def job_update(state: str, cluster: str = "dev", interrupted: int = 0) -> Any:
    chain = {"segments": [{"job_id": "77", "interruptions": [f"2026-03-02 10:0{i}:00" for i in range(interrupted)]}]}
    experiment = SimpleNamespace(job_id="77", cluster=cluster, slug="2026-03-02-train", page="experiments/x.md",
                                 notebook="notebooks/experiments/x.ipynb", chain=chain)
    job = SimpleNamespace(name="train", exit_code="1:0", reason=None)
    return SimpleNamespace(experiment=experiment, job=job, state=state, previous="RUNNING")


def test_a_job_trigger_fires_on_its_states_and_cluster_once_per_change(store: AutomationStore) -> None:
    failed, _ = store.create(AutomationSpec(name="f", prompt="{{ job.id }}",
                                            trigger=Trigger(kind="job", states=["FAILED"])))
    anything, _ = store.create(AutomationSpec(name="any", prompt="p", trigger=Trigger(kind="job", cluster="other")))
    store.create(NOTE)
    runs = triggers.job_changed(store, job_update("FAILED"))
    assert [run.automation for run in runs] == [failed.id]
    assert runs[0].payload["id"] == "77" and runs[0].delivery_id == "job:dev:77:FAILED"
    assert triggers.job_changed(store, job_update("FAILED")) == []
    assert [r.automation for r in triggers.job_changed(store, job_update("COMPLETED", "other"))] == [anything.id]
    # a requeued job waits again after each interruption: each is a change of its own, once
    requeued, _ = store.create(AutomationSpec(name="r", prompt="p", trigger=Trigger(kind="job", states=["REQUEUED"])))
    assert triggers.job_changed(store, job_update("PENDING")) == []  # waiting as usual: not a requeue
    for count in (1, 2):
        (run,) = triggers.job_changed(store, job_update("PENDING", interrupted=count))
        assert run.automation == requeued.id and run.delivery_id == f"job:dev:77:PENDING:{count}"
        assert run.payload["interruptions"] == count and run.payload["state"] == "PENDING"
    assert triggers.job_changed(store, job_update("PENDING", interrupted=2)) == []


# ----- the first message ---------------------------------------------------------------------------------------
def test_the_first_message_has_the_persona_the_scratchpad_rules_and_the_mapped_delivery(store) -> None:
    automation, _ = store.create(HOOK)
    run, _ = store.enqueue(automation.id, "webhook", {"build": {"id": "b-9"}}, "webhook:1")
    text = first_message(automation, run.model_copy(update={"attempts": 1}), "You triage builds.", "")
    assert "CI failed" in text and "You triage builds." in text and "Read your scratchpad first" in text
    assert "Look at b-9." in text and "Build b-9 of \n" in text + "\n" and "payload.repo was not in" in text
    assert "resumed now" not in text
    again = first_message(automation, run.model_copy(update={"attempts": 2}), "", "- step 1 done")
    assert "resumed now (attempt 2)" in again and "- step 1 done" in again


# ----- the gate ---------------------------------------------------------------------------------------------------
def test_the_gate_holds_while_paused_and_kill_waits_for_the_running_tool() -> None:
    async def scenario() -> list[str]:
        paused = {"now": True}
        control = RunControl(lambda: paused["now"])
        seen: list[str] = []
        started = asyncio.Event()

        async def the_run() -> str:
            await control.gate("wiki_search")
            seen.append("wiki_search ran")
            started.set()
            await asyncio.sleep(3600)
            return "never"

        control.task = asyncio.get_running_loop().create_task(the_run())
        await asyncio.sleep(0.05)
        assert control.paused_before == "wiki_search" and seen == []
        paused["now"] = False
        control.wake()
        await started.wait()
        assert control.paused_before is None
        control(event("tool_call", ev.ToolCallInfo(call_id="c1", tool="wiki_search", args={}, tier=0)))
        control.stop("killed")
        await asyncio.sleep(0.05)
        assert not control.task.done()  # the tool is running: it is not cut off
        control(event("tool_result", ev.ToolResultInfo(call_id="c1", tool="wiki_search", ok=True, decision="auto",
                                                       summary="", duration_ms=1)))
        await asyncio.gather(control.task, return_exceptions=True)
        assert control.task.cancelled()
        return seen

    assert asyncio.run(scenario()) == ["wiki_search ran"]


def event(kind: str, payload: Any) -> ev.Event:
    return ev.EventStream("s-test").emit(kind, payload)


def test_a_kill_asked_before_the_run_started_stops_it_as_it_starts() -> None:
    async def scenario() -> bool:
        control = RunControl(lambda: False)
        control.stop("killed")
        control.attach(asyncio.get_running_loop().create_task(asyncio.sleep(3600, "never")))
        await asyncio.gather(control.task, return_exceptions=True)
        return control.task.cancelled()

    assert asyncio.run(scenario())
