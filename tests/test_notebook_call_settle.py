"""A person's call in a notebook settles the moment it ends or asks a person, from whichever thread that happens."""

from __future__ import annotations

import threading
import time

from betty_jupyter.agent.events import ApprovalRequest, ApprovalRequestEvent
from betty_jupyter.agent.models import Preview, ToolOutcome
from betty_jupyter.notebook.session import Call


def request() -> ApprovalRequest:
    return ApprovalRequest(approval_id="a1", call_id="c1", tool="cluster_submit", tier=2, args={},
                           preview=Preview(kind="script", title="submit", text="echo hi\n"), reason="tier 2")


def test_a_call_that_ends_in_another_thread_settles_as_done() -> None:
    call = Call("c1", "cluster_queue")
    assert call._wait(0) is None, "nothing happened yet"
    worker = threading.Timer(0.01, call.future.set_result, [ToolOutcome(ok=True, summary="3 jobs")])
    worker.start()
    assert call.settle() is True
    assert call.state() == "done"


def test_a_call_that_asks_a_person_settles_as_waiting_and_stays_so() -> None:
    call = Call("c1", "cluster_submit")
    event = ApprovalRequestEvent(session_id="s", seq=1, ts=time.time(), payload=request())
    threading.Timer(0.01, call.on_event, [event]).start()
    assert call.settle() is False
    assert call.state() == "waiting for your approval"
    assert call._wait(0) is False, "still waiting: not done"
    call.future.set_result(ToolOutcome(ok=True, summary="submitted"))
    assert call._wait(0) is True
