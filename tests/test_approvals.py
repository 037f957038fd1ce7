"""The approval broker: answers, timeouts, cancellation, edits re-validated, and failing closed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from betty_jupyter.agent.approvals import ApprovalBroker, ApprovalError, Resolution
from betty_jupyter.agent.models import Tier
from betty_jupyter.agent.tools import ToolError
from betty_jupyter.agent.tools.catalog import WikiWrite
from betty_jupyter.agent.tools.base import revalidated


@dataclass(frozen=True)
class Asked:
    """Stands in for the ``approval_request`` payload: the broker needs only its id."""

    approval_id: str


def answered(decision: str, args: dict | None = None) -> Resolution:
    async def scenario() -> Resolution:
        broker = ApprovalBroker()
        waiting = broker.request(Asked("a1"), session_id="s")
        assert [r.approval_id for r in broker.pending()] == ["a1"]
        broker.respond("a1", decision, "alice", args)
        resolution = await waiting
        assert broker.pending() == []
        return resolution

    return asyncio.run(scenario())


@pytest.mark.parametrize("decision, approved", [
    ("approved", True), ("approved_for_session", True), ("denied", False),
])
def test_an_answer_resolves_the_request(decision, approved) -> None:
    resolution = answered(decision)
    assert resolution.decision == decision and resolution.approver == "alice"
    assert resolution.approved is approved and resolution.args is None


def test_an_edit_carries_the_edited_arguments() -> None:
    resolution = answered("edited", {"command": "squeue --me"})
    assert resolution.approved and resolution.args == {"command": "squeue --me"}


def test_an_unanswered_request_times_out_and_fails_closed() -> None:
    async def scenario() -> None:
        broker = ApprovalBroker(timeout=30)
        resolution = await broker.request(Asked("slow"), timeout=0.05)
        assert resolution.decision == "timed_out" and not resolution.approved and "0.05 s" in resolution.reason
        with pytest.raises(ApprovalError, match="already resolved \\(timed_out\\)"):
            broker.respond("slow", "approved", "alice")
        assert broker.pending() == []

    asyncio.run(scenario())


def test_cancel_all_closes_open_requests_one_session_or_all() -> None:
    async def scenario() -> None:
        broker = ApprovalBroker()
        mine, other, third = (broker.request(Asked("m"), session_id="s1"), broker.request(Asked("o"), session_id="s2"),
                              broker.request(Asked("t"), session_id="s2"))
        assert broker.cancel_all("the side panel disconnected", session_id="s1") == ["m"]
        assert (await mine).decision == "cancelled" and not other.done()
        assert [r.approval_id for r in broker.pending("s2")] == ["o", "t"]
        assert sorted(broker.cancel_all("server stopping")) == ["o", "t"]
        for future in (other, third):
            resolution = await future
            assert resolution.decision == "cancelled" and resolution.reason == "server stopping"
            assert not resolution.approved

    asyncio.run(scenario())


def test_answers_that_cannot_be_taken_are_clear_errors() -> None:
    async def scenario() -> None:
        broker = ApprovalBroker()
        waiting = broker.request(Asked("a1"))
        with pytest.raises(ApprovalError, match="no open approval 'nope'"):
            broker.respond("nope", "approved", "alice")
        with pytest.raises(ApprovalError, match="'maybe' is not one of approved, approved_for_session, edited, denied"):
            broker.respond("a1", "maybe", "alice")
        with pytest.raises(ApprovalError, match="not one of"):
            broker.respond("a1", "timed_out", "alice")
        with pytest.raises(ApprovalError, match="edited arguments"):
            broker.respond("a1", "edited", "alice")
        with pytest.raises(ApprovalError, match="edited arguments"):
            broker.respond("a1", "approved", "alice", {"x": 1})
        assert not waiting.done()
        broker.respond("a1", "denied", "bob")
        with pytest.raises(ApprovalError, match="already resolved \\(denied by bob\\)"):
            broker.respond("a1", "approved", "alice")
        assert (await waiting).decision == "denied"
        with pytest.raises(ApprovalError, match="fresh id"):
            broker.request(Asked("a1"))

    asyncio.run(scenario())


def test_a_waiter_that_goes_away_closes_its_request() -> None:
    async def scenario() -> None:
        broker = ApprovalBroker()

        async def wait() -> Resolution:
            return await broker.request(Asked("w"))

        task = asyncio.create_task(wait())
        await asyncio.sleep(0)
        assert [r.approval_id for r in broker.pending()] == ["w"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert broker.pending() == []
        with pytest.raises(ApprovalError, match="already resolved \\(cancelled\\)"):
            broker.respond("w", "approved", "alice")

    asyncio.run(scenario())


@pytest.fixture
def ctx(offline_context):
    return offline_context


def test_edited_arguments_are_validated_and_previewed_again(ctx) -> None:
    tool = WikiWrite()
    args, preview = asyncio.run(revalidated(tool, ctx, {"page": "log.md", "mode": "append", "text": "edited line"}))
    assert args.text == "edited line" and preview.kind == "diff" and "+- " in preview.text
    assert tool.tier_for(args) == Tier.AUTO
    created = ('{"page": "howto/x.md", "mode": "create", "body": "x\\n", '
               '"frontmatter": {"name": "X", "description": "d", "type": "howto"}}')
    args, preview = asyncio.run(revalidated(tool, ctx, created))
    assert tool.tier_for(args) == Tier.ALWAYS_ASK and preview.title == "create wiki/howto/x.md"


@pytest.mark.parametrize("edited, words", [
    ({"page": "log.md", "mode": "append"}, "append takes text only"),
    ({"page": "log.md", "mode": "append", "text": "x", "sudo": True}, "sudo: is not an argument"),
    ({"page": "../x.md", "mode": "append", "text": "x"}, "refused page name"),
    ({"page": "log.md", "mode": "update", "body": "all gone\n"}, "append-only"),
    ("not json", "not valid JSON"),
])
def test_invalid_edits_are_refused(ctx, edited, words) -> None:
    with pytest.raises(ToolError, match=words) as refused:
        asyncio.run(revalidated(WikiWrite(), ctx, edited))
    assert str(refused.value).startswith("the edited call is refused: ")
    assert "all gone" not in (ctx.workspace.wiki / "log.md").read_text()
