"""Plans with no cluster: the scripted model over real HTTP proposes a plan, Betty checks it with its own policy,
one card answers it per step, and only the granted calls run exactly as previewed.

Betty's scripted transport stands in for Slurm (these run in the fast tier); the same journey with a real
submission to the dev cluster is in ``test_plans.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, calls, say

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.plans import PlanArgs
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import ToolError
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.notebook.widgets.plan import PlanCard, card_for

ESTIMATE = {"model": "Llama-3.1-8B", "method": "lora"}
HOSTILE = "<img src=x onerror=alert(1)> '; rm -rf ~"


def page(name: str, body: str) -> dict[str, Any]:
    return {"page": f"notes/{name}.md", "mode": "create", "body": body,
            "frontmatter": {"name": name, "description": "a note the plan writes", "type": "note"}}


def plan(*steps: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], list[int]], goal: str = "notes") -> Any:
    return call("propose_plan", {"goal": goal, "steps": [
        {"tool": s[0], "args": s[1], "depends_on": list(s[2]) if len(s) > 2 else []} for s in steps]})


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


Answer = Callable[[Any, Any], Any]
"""What the person does with a card: (session, approval request) -> awaitable of nothing."""


async def converse(workspace: Workspace, llm: ScriptedLLM, cluster: ScriptedTransport, answer: Answer,
                   mode: str = "confirm", rules: dict[str, list[str]] | None = None) -> tuple[str, list[Any], str]:
    """One turn; every card goes to ``answer``; (done reason, events, session id)."""
    broker = ApprovalBroker(timeout=60)
    events: list[Any] = []
    tasks: set[asyncio.Task[Any]] = set()
    box: dict[str, Any] = {}

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            task = asyncio.get_running_loop().create_task(answer(box["session"], broker, event.payload))
            tasks.add(task)

    config = BettyConfig(clusters=[{"name": "scripted", "transport": "local", "readable_roots": ["/data"]}],
                         llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3},
                         rules=rules or {})
    session = await open_session(workspace, config, SessionSpec(mode=mode, broker=broker, listeners=(person,),
                                                                transport=cluster))
    box["session"] = session
    reason = await session.ask("write my notes")
    for task in tasks:
        await task  # an answer's own failure fails the test
    return reason, events, session.session_id


def of(events: list[Any], kind: str) -> list[Any]:
    return [e.payload for e in events if e.type == kind]


def test_a_plan_is_answered_once_per_step_and_runs_exactly_what_was_approved(workspace) -> None:
    edited = page("b", "the edited body\n")
    cluster = ScriptedTransport()

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        assert request.tool == "propose_plan", "no step of the plan shows a card of its own"
        # An edit Betty refuses is one line and loses nothing: the card stays open for the right answer.
        with pytest.raises(ToolError) as refused:
            await session.repreview(request.tool, request.args, {"steps": [
                {"decision": "approved"}, {"decision": "approved"},
                {"decision": "edited", "args": {**edited, "mode": "rewrite"}}, {"decision": "denied"}]})
        assert "step 3 (wiki_write): the edited call is refused" in str(refused.value)
        assert "\n" not in str(refused.value)
        assert [a.approval_id for a in broker.pending()] == [request.approval_id]
        answer_ = {"steps": [{"decision": "approved"}, {"decision": "approved"},
                             {"decision": "edited", "args": edited}, {"decision": "denied"}]}
        preview = await session.repreview(request.tool, request.args, answer_)
        assert "the edited body" in preview.text and "3. wiki_write (tier 2)" in preview.text
        broker.respond(request.approval_id, "edited", "tester", answer_)

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_read", {"page": "index.md"}), ("gpu_estimate", ESTIMATE),
                     ("wiki_write", page("b", "the model's body\n"), [1]), ("wiki_write", page("c", HOSTILE))),
                call("wiki_read", {"page": "index.md"}), call("gpu_estimate", ESTIMATE),
                call("wiki_write", edited), call("wiki_write", page("c", HOSTILE)), say("Done."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, cluster, answer))
        told = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert reason == "finished", [e.type for e in events]
    (shown,) = of(events, "plan")
    assert [(s.index, s.tool, s.tier, s.status, s.depends_on) for s in shown.calls] == [
        (1, "wiki_read", 0, "proposed", []), (2, "gpu_estimate", 0, "proposed", []),
        (3, "wiki_write", 2, "proposed", [1]), (4, "wiki_write", 2, "proposed", [])]
    assert all(s.preview is not None for s in shown.calls) and HOSTILE in shown.calls[3].preview.text
    assert len(of(events, "approval_request")) == 1, "one card for the whole plan"
    assert '"body": "the edited body\\n"' in told and "step 4 wiki_write denied: do not call it" in told
    # The edited step ran with exactly the approved arguments; the denied one never ran.
    assert (workspace.wiki / "notes" / "b.md").read_text().endswith("the edited body\n")
    assert not (workspace.wiki / "notes" / "c.md").exists()
    steps = [(s.index, s.status) for s in of(events, "plan_step")]
    assert steps == [(1, "approved"), (2, "approved"), (3, "edited"), (4, "denied"),
                     (1, "running"), (1, "done"), (2, "running"), (2, "done"), (3, "running"), (3, "done")]
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.decision, r.approver, r.ok) for r in records] == [
        ("propose_plan", "edited", "tester", True), ("wiki_read", "auto", None, True),
        ("gpu_estimate", "auto", None, True), ("wiki_write", "edited", "tester", True),
        ("wiki_write", "refused", None, False)]
    assert records[3].args == {**edited, "text": None} and "the edited body" in records[3].preview.text
    assert "denied step 4" in records[4].summary


def test_a_call_that_differs_from_its_approved_step_comes_back_as_a_card(workspace) -> None:
    cards: list[Any] = []

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        cards.append(request)
        broker.respond(request.approval_id, "approved" if request.tool == "propose_plan" else "denied", "tester")

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_write", page("a", "first\n")), ("wiki_write", page("b", "second\n"), [1])),
                call("wiki_write", page("a", "first\n")), call("wiki_write", page("b", "a value filled in later\n")),
                say("Stopped."))
        reason, events, _ = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer))
    assert reason == "denied"
    assert [c.tool for c in cards] == ["propose_plan", "wiki_write"]
    assert "a value filled in later" in cards[1].preview.text
    assert (workspace.wiki / "notes" / "a.md").exists() and not (workspace.wiki / "notes" / "b.md").exists()
    # The turn ended with step 2 still granted: it is shown as not run.
    assert [(s.index, s.status) for s in of(events, "plan_step")][-1] == (2, "not_run")


def test_a_failed_step_stops_the_plan_and_the_rest_is_not_run(workspace) -> None:
    cluster = ScriptedTransport().on("squeue", stderr="slurm_load_jobs error: Socket timed out\n", exit_code=1)

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        broker.respond(request.approval_id, "approved" if request.tool == "propose_plan" else "denied", "tester")

    with ScriptedLLM() as llm:
        llm.add(plan(("cluster_run", {"command": "squeue --me"}), ("wiki_write", page("a", "x\n"), [1]),
                     ("wiki_write", page("b", "y\n"))),
                call("cluster_run", {"command": "squeue --me"}), call("wiki_write", page("b", "y\n")), say("Stopped."))
        reason, events, _ = asyncio.run(converse(workspace, llm, cluster, answer))
    steps = [(s.index, s.status) for s in of(events, "plan_step")]
    assert steps[3:] == [(1, "running"), (1, "failed"), (2, "not_run"), (3, "not_run")]
    (replanned,) = of(events, "replanning")
    assert "step 1 (cluster_run) failed" in replanned.reason and "steps 2, 3 not run" in replanned.reason
    # Once the plan stopped, its step 3 is an ordinary call again: its card came back, and was denied.
    assert [r.tool for r in of(events, "approval_request")] == ["propose_plan", "wiki_write"]
    assert reason == "denied" and not (workspace.wiki / "notes" / "b.md").exists()


def test_step_by_step_each_granted_step_still_shows_its_card(workspace) -> None:
    cards: list[Any] = []

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        cards.append(request)
        if request.tool == "propose_plan":
            broker.respond(request.approval_id, "edited", "tester", {
                "steps": [{"decision": "approved"}, {"decision": "approved"}], "run": "step_by_step"})
        else:
            broker.respond(request.approval_id, "approved", "carol")

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_write", page("a", "x\n")), ("wiki_write", page("b", "y\n"), [1])),
                call("wiki_write", page("a", "x\n")), call("wiki_write", page("b", "y\n")), say("Done."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer))
    assert reason == "finished" and [c.tool for c in cards] == ["propose_plan", "wiki_write", "wiki_write"]
    assert [(s.index, s.status) for s in of(events, "plan_step")][2:] == [
        (1, "running"), (1, "done"), (2, "running"), (2, "done")]
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.approver) for r in records] == [
        ("propose_plan", "tester"), ("wiki_write", "carol"), ("wiki_write", "carol")]


def test_one_granted_step_covers_one_call_even_when_the_model_sends_it_twice_at_once(workspace) -> None:
    cards: list[Any] = []

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        cards.append(request)
        broker.respond(request.approval_id, "approved" if request.tool == "propose_plan" else "denied", "tester")

    twice = {"page": "index.md", "mode": "append", "text": "- one line, once\n"}
    spelt_again = {**twice, "body": None}  # the same step (a call repeated exactly is answered, not run)
    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_write", twice), ("wiki_write", page("b", "y\n"))),
                calls([("wiki_write", twice), ("wiki_write", spelt_again)]), say("Stopped."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer))
    assert reason == "denied" and [(c.tool, c.tier) for c in cards] == [("propose_plan", 2), ("wiki_write", 2)]
    assert (workspace.wiki / "index.md").read_text().count("one line, once") == 1
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert sorted((r.tool, r.decision) for r in records) == [
        ("propose_plan", "approved"), ("wiki_write", "approved"), ("wiki_write", "denied")]
    assert [(s.index, s.status) for s in of(events, "plan_step")].count((1, "done")) == 1


@pytest.mark.parametrize("step, why", [
    (("cluster_run", {"command": "cat /etc/shadow"}), "outside"),
    (("cluster_cancel", {"job_id": "12"}), "refused by your rule deny cluster_cancel"),
    (("no_such_tool", {}), "there is no tool"),
])
def test_a_plan_with_a_forbidden_step_is_refused_in_code_before_anyone_is_asked(workspace, step, why) -> None:
    cluster = ScriptedTransport()

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        raise AssertionError(f"a card was shown for {request.tool}")

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_read", {"page": "index.md"}), step, ("wiki_write", page("a", "x\n"))), say("I see."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, cluster, answer,
                                                          rules={"deny": ["cluster_cancel"]}))
        told = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert reason == "finished" and not of(events, "approval_request")
    (shown,) = of(events, "plan")
    assert [s.status for s in shown.calls] == ["proposed", "refused", "proposed"]
    assert why in shown.calls[1].reason and why in told and "refused by Betty's policy" in told
    assert not cluster.ran("cat") and not cluster.ran("scancel") and not (workspace.wiki / "notes" / "a.md").exists()
    (record,) = ActionLog(workspace.root).read(session_id=session_id)
    assert (record.tool, record.decision, record.ok) == ("propose_plan", "refused", False)


def test_propose_mode_shows_the_plan_and_runs_nothing(workspace) -> None:
    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        raise AssertionError("propose mode asks nothing")

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_write", page("a", "x\n")), ("wiki_write", page("b", "y\n"))), say("Here is the plan."))
        reason, events, _ = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer, mode="propose"))
    assert reason == "finished" and not of(events, "approval_request") and not of(events, "plan_step")
    result = of(events, "tool_result")[0]
    assert result.decision == "proposed" and "1. wiki_write (tier 2)" in result.summary
    assert not (workspace.wiki / "notes").exists() or not any((workspace.wiki / "notes").iterdir())


def test_a_plan_must_need_earlier_steps_only() -> None:
    with pytest.raises(ValueError, match="step 1 depends on \\[2\\]"):
        PlanArgs.model_validate({"goal": "g", "steps": [{"tool": "a", "depends_on": [2]}, {"tool": "b"}]})


def test_a_granted_step_is_held_by_one_call_at_a_time_and_waits_for_the_steps_it_needs() -> None:
    from betty_jupyter.agent.events import EventStream
    from betty_jupyter.agent.plans import ActivePlan, Step

    first = Step(1, "wiki_write", {"page": "a.md"}, status="approved")
    second = Step(2, "cluster_submit", {"script": "s"}, depends_on=[1], status="edited")
    active = ActivePlan("plan_1", [first, second], "whole", "tester", EventStream("s"))
    assert active.claim("cluster_submit", {"script": "s"}) is None, "step 1 is not done yet"
    assert active.claim("wiki_write", {"page": "a.md"}) is first
    assert active.claim("wiki_write", {"page": "a.md"}) is None, "held by the first call"
    assert active.claim("wiki_write", {"page": "b.md"}) is None, "other arguments are no step"
    active.release(first)
    assert active.claim("wiki_write", {"page": "a.md"}) is first


def test_the_notebook_plan_card_edits_a_step_with_the_single_card_editor(workspace) -> None:
    """``%betty ask``'s plan card: a step's Edit is the single card's form, each change checked by the session as
    the plan's answer; a refused edit is one line and keeps the text; the kept edit is what runs."""
    edited = page("b", f"the person's body {HOSTILE}\n")
    shown: list[Any] = []

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        loop = asyncio.get_running_loop()

        def check(_: str, args: Any) -> Any:  # the server's preview route, as a kernel's backend calls it
            return asyncio.run_coroutine_threadsafe(session.repreview(request.tool, request.args, args), loop).result()

        def person() -> None:
            card = card_for(request, lambda i, d, a, digest: broker.respond(i, d, "tester", a, digest), check=check)
            assert isinstance(card, PlanCard) and [b.disabled for b in card.step_edits] == [False, False]
            form = card.edit_step(1)
            assert form.fields["body"].value == "the model's body\n" and form.checked is not None
            form.fields["mode"].value = "rewrite"  # refused: the page does not exist yet
            assert form.checked is None and form.approve.disabled
            shown.append(form.status.value)
            form.fields["mode"].value = "create"
            form.fields["body"].value = edited["body"]
            assert form.checked is not None and "the person&#x27;s body" in form.preview.value
            assert "<img" not in form.preview.value, "the step's new preview is text"
            form.approve.click()
            assert card.steps[0].description.startswith("✎ edited: 1.")
            card.steps[1].click()  # step 2 denied
            card.execute.click()

        await asyncio.to_thread(person)

    with ScriptedLLM() as llm:
        llm.add(plan(("wiki_write", page("b", "the model's body\n")), ("wiki_write", page("c", "c\n"))),
                call("wiki_write", edited), say("Done."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer))
    assert reason == "finished", [e.type for e in events]
    (refusal,) = shown
    assert "step 1 (wiki_write): the edited call is refused" in refusal and "\n" not in refusal
    assert (workspace.wiki / "notes" / "b.md").read_text().endswith(edited["body"])
    assert not (workspace.wiki / "notes" / "c.md").exists()
    records = ActionLog(workspace.root).read(session_id=session_id)
    assert [(r.tool, r.decision) for r in records] == [("propose_plan", "edited"), ("wiki_write", "edited")]
    assert records[1].args["body"] == edited["body"]
