"""The agent's event protocol: every type round-trips, numbering per session, reconnects, threads, the schema."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from betty_jupyter.agent import events
from betty_jupyter.agent.events import (
    EVENT_TYPES, ApprovalRequest, ApprovalResolved, Budget, Done, ErrorInfo, Event, EventStream, JobUpdateInfo,
    Message, MessageDelta, Plan, PlanStepUpdate, Replanning, SecondApproval, ToolCallInfo, ToolResultInfo, parse_event,
)
from betty_jupyter.agent.models import Preview, Tier
from betty_jupyter.schemas import events_schema

PREVIEW = Preview(kind="command", title="Submit train.sh", text="sbatch --partition=debug train.sh",
                  details={"partition": "debug"})
HOSTILE = "a'; echo x\n0 — ünïcode \u2028 \"quoted\" \\ back"

EXAMPLES: dict[str, BaseModel] = {
    "message_delta": MessageDelta(text="Hel"),
    "message": Message(role="assistant", text=HOSTILE),
    "plan": Plan(steps=["read the queue", "submit"]),
    "plan_step": PlanStepUpdate(plan_id="plan_1", index=2, tool="cluster_submit", status="failed", call_id="c2",
                                summary="sbatch: error: invalid partition"),
    "tool_call": ToolCallInfo(call_id="call_1", tool="submit_job", args={"script": HOSTILE, "nodes": 2},
                              tier=Tier.ALWAYS_ASK),
    "approval_request": ApprovalRequest(approval_id="ap_1", call_id="call_1", tool="submit_job", tier=2,
                                        args={"script": "train.sh"}, preview=PREVIEW, reason="tier 2 always asks"),
    "approval_resolved": ApprovalResolved(approval_id="ap_1", call_id="call_1", decision="edited", approver="ada",
                                          args={"script": "train.sh", "partition": "gpu"}),
    "second_approval": SecondApproval(approval_id="ap_1", call_id="call_1", state="waiting",
                                      approvers=["hpcadmin", "ops"], since=1714550400.0),
    "tool_result": ToolResultInfo(call_id="call_1", tool="submit_job", ok=True, decision="edited", approver="ada",
                                  summary="job 42 submitted",
                                  duration_ms=12.5, output_ref=".betty/actions/outputs/call_1.txt",
                                  artifacts=["wiki/experiments/x.md"]),
    "error": ErrorInfo(message="the model did not answer in 120 s", code="model_timeout", retryable=True),
    "replanning": Replanning(reason="the submission was denied"),
    "job_update": JobUpdateInfo(job_id="42", cluster="dev", state="RUNNING", previous="PENDING",
                                page="experiments/x.md"),
    "budget": Budget(iterations=3, max_iterations=20, tokens=1200, max_tokens=50_000),
    "done": Done(reason="finished"),
}


def test_the_examples_cover_every_type() -> None:
    assert set(EXAMPLES) == set(EVENT_TYPES)
    assert len(EVENT_TYPES) == 14
    assert {type(p) for p in EXAMPLES.values()} == set(events.PAYLOADS.values())


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_every_type_round_trips_through_json(kind: str) -> None:
    event = EventStream("s-1").emit(kind, EXAMPLES[kind])
    text = event.model_dump_json()
    wire = json.loads(text)
    assert set(wire) == {"type", "session_id", "seq", "ts", "payload"}
    assert wire["type"] == kind
    for parsed in (Event.model_validate_json(text), Event.model_validate(wire), parse_event(wire), parse_event(text)):
        assert parsed == event
        assert type(parsed) is type(event)
        assert type(parsed.payload) is type(EXAMPLES[kind])


def test_the_tier_is_sent_as_a_plain_number() -> None:
    event = EventStream("s").emit("tool_call", EXAMPLES["tool_call"])
    assert json.loads(event.model_dump_json())["payload"]["tier"] == 2


def test_a_union_narrows_by_type() -> None:
    event = parse_event({"type": "tool_call", "session_id": "s", "seq": 1, "ts": 1.0,
                         "payload": {"call_id": "c", "tool": "t", "args": {}, "tier": 0}})
    assert event.type == "tool_call"
    assert event.payload.call_id == "c", "mypy narrows the payload by the type"
    assert isinstance(event.payload, ToolCallInfo)


def test_seq_counts_from_one_per_session_and_ts_is_unix_time() -> None:
    first, second = EventStream("a"), EventStream("b")
    seen = [first.emit("message_delta", MessageDelta(text=str(i))) for i in range(5)]
    other = second.emit("done", Done(reason="stopped"))
    assert [e.seq for e in seen] == [1, 2, 3, 4, 5]
    assert other.seq == 1 and other.session_id == "b"
    assert all(e.session_id == "a" for e in seen)
    assert all(a.ts <= b.ts for a, b in zip(seen, seen[1:]))
    assert 1.6e9 < seen[0].ts < 1e10
    assert first.last_seq == 5


def test_since_returns_exactly_what_follows() -> None:
    stream = EventStream("s")
    for i in range(10):
        stream.emit("message_delta", MessageDelta(text=str(i)))
    assert [e.seq for e in stream.since(0)] == list(range(1, 11))
    assert [e.seq for e in stream.since(7)] == [8, 9, 10]
    assert stream.since(10) == []
    assert stream.since(99) == []
    assert [e.seq for e in stream.since(-5)] == list(range(1, 11))


def test_only_the_newest_events_are_kept() -> None:
    stream = EventStream("s", max_events=3)
    for i in range(7):
        stream.emit("message_delta", MessageDelta(text=str(i)))
    assert [e.seq for e in stream.since(0)] == [5, 6, 7]
    assert [e.seq for e in stream.since(5)] == [6, 7]
    with pytest.raises(ValueError):
        EventStream("s", max_events=0)


@given(st.integers(min_value=1, max_value=30), st.integers(min_value=1, max_value=40), st.integers(-3, 45))
def test_since_matches_a_plain_list(max_events: int, count: int, seq: int) -> None:
    stream = EventStream("s", max_events=max_events)
    for i in range(count):
        stream.emit("message_delta", MessageDelta(text=str(i)))
    kept = list(range(1, count + 1))[-max_events:]
    assert [e.seq for e in stream.since(seq)] == [n for n in kept if n > seq]


def test_subscribers_get_each_event_until_they_unsubscribe() -> None:
    stream = EventStream("s")
    got: list[int] = []
    stop = stream.subscribe(lambda e: got.append(e.seq))
    stream.emit("message_delta", MessageDelta(text="a"))
    stop()
    stop()
    stream.emit("message_delta", MessageDelta(text="b"))
    assert got == [1]


def test_a_reconnecting_subscriber_gets_what_it_missed_then_what_is_new() -> None:
    stream = EventStream("s")
    for i in range(4):
        stream.emit("message_delta", MessageDelta(text=str(i)))
    got: list[int] = []
    stream.subscribe(lambda e: got.append(e.seq), after=2)
    stream.emit("done", Done(reason="finished"))
    assert got == [3, 4, 5]


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    stream = EventStream("s")
    got: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("socket closed")

    stream.subscribe(broken)
    stream.subscribe(lambda e: got.append(e.seq))
    event = stream.emit("done", Done(reason="error"))
    assert event.seq == 1 and got == [1]
    assert "subscriber failed" in caplog.text


def test_emits_from_eight_threads_keep_seq_unique_gapless_and_in_order() -> None:
    stream = EventStream("s", max_events=100_000)
    delivered: list[int] = []
    stream.subscribe(lambda e: delivered.append(e.seq))
    barrier = threading.Barrier(8)
    returned: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        barrier.wait()
        mine = [stream.emit("message_delta", MessageDelta(text=f"{n}-{i}")).seq for i in range(500)]
        with lock:
            returned.extend(mine)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(returned) == list(range(1, 4001))
    assert delivered == list(range(1, 4001))
    assert [e.seq for e in stream.since(0)] == list(range(1, 4001))
    texts = {e.payload.text for e in stream.since(0) if isinstance(e.payload, MessageDelta)}
    assert len(texts) == 4000


def test_an_unknown_type_is_a_clear_validation_error() -> None:
    stream = EventStream("s")
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        stream.emit("shout", MessageDelta(text="x"))
    with pytest.raises(ValidationError, match="'shout'"):
        parse_event({"type": "shout", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {}})
    assert stream.last_seq == 0, "a refused event uses no number"


def test_a_missing_field_names_the_field() -> None:
    with pytest.raises(ValidationError) as error:
        parse_event({"type": "tool_result", "session_id": "s", "seq": 1, "ts": 1.0,
                     "payload": {"call_id": "c", "tool": "t", "ok": True, "duration_ms": 1}})
    assert "tool_result.payload.summary" in str(error.value)
    assert "Field required" in str(error.value)
    with pytest.raises(ValidationError, match="seq"):
        Event.model_validate({"type": "done", "session_id": "s", "ts": 1.0, "payload": {"reason": "finished"}})


@pytest.mark.parametrize("bad", [
    {"type": "done", "session_id": "s", "seq": 0, "ts": 1.0, "payload": {"reason": "finished"}},
    {"type": "done", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"reason": "bored"}},
    {"type": "tool_call", "session_id": "s", "seq": 1, "ts": 1.0,
     "payload": {"call_id": "c", "tool": "t", "args": {}, "tier": 3}},
    {"type": "message", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"role": "system", "text": "x"}},
    {"type": "message", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"role": "user", "text": "x", "txt": "y"}},
    {"type": "message", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"role": "user", "text": "x"}, "extra": 1},
    {"session_id": "s", "seq": 1, "ts": 1.0, "payload": {"text": "x"}},
    "not json {",
])
def test_malformed_events_are_refused(bad: Any) -> None:
    with pytest.raises(ValidationError):
        parse_event(bad)


def test_a_payload_of_the_wrong_model_is_refused_where_it_is_emitted() -> None:
    stream = EventStream("s")
    with pytest.raises(ValidationError, match="instance of Done"):
        stream.emit("done", Message(role="user", text="x"))
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ToolResultInfo(call_id="c", tool="t", ok=True, decision="auto", summary="", duration_ms=1,
                       output_reff="x")  # type: ignore[call-arg]


def test_event_itself_is_not_built_directly() -> None:
    with pytest.raises(TypeError, match="emit"):
        Event(type="done", session_id="s", seq=1, ts=1.0, payload=Done(reason="finished"))


def test_events_are_frozen() -> None:
    event = EventStream("s").emit("done", Done(reason="finished"))
    with pytest.raises(ValidationError):
        event.seq = 7


def test_the_schema_tags_every_type_and_requires_the_envelope() -> None:
    schema = events_schema()
    mapping = schema["discriminator"]["mapping"]
    assert set(mapping) == set(EVENT_TYPES)
    for kind, ref in mapping.items():
        definition = schema["$defs"][ref.split("/")[-1]]
        assert definition["properties"]["type"]["const"] == kind
        assert definition["required"] == ["type", "session_id", "seq", "ts", "payload"]
    assert schema["$defs"]["ApprovalResolved"]["properties"]["decision"]["enum"] == [
        "approved", "approved_for_session", "edited", "denied", "timed_out", "cancelled"]


def test_events_validate_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(events_schema())
    stream = EventStream("s")
    for kind, payload in EXAMPLES.items():
        validator.validate(json.loads(stream.emit(kind, payload).model_dump_json()))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"type": "done", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"reason": "x"}})
