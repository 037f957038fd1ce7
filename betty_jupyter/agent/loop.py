"""``AgentSession``: the tool-calling loop every face shares (side panel, ``%betty ask``, ``betty ask``).

The model proposes; code decides. Each tool call is parsed against its argument model
(a malformed call goes back to the model as an error, never a crash), decided by the
policy, previewed and approved when it must be, run, logged in full, and condensed before
it enters the context. Breakers on iterations and tokens stop a session cleanly and leave
it resumable.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import logging
import time
import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from ..errors import BettyError, ModelError, ToolError
from ..json_text import parse_json
from . import events as ev
from .approvals import DEFAULT_TIMEOUT
from .bulletin import ContextBulletin, sent_context, with_bulletin
from .actions import ActionRecord
from .condense import condense, estimate_tokens
from .llm import ToolCallRequest
from .models import ToolOutcome, card_digest
from .offer import ToolOffer
from .planner import PLAN_NOTE, planning_messages
from .second_approver import withdraw
from .site_gate import budget_fact, open_second, second_answer
from .tool_calls import HeldText, ReadReply, call_key, read_reply
from .turn import Answer, Approval
from .vocabulary import Decision, DoneReason

if TYPE_CHECKING:
    from pathlib import Path

    from .actions import ActionLog
    from .approvals import Approver, Resolution
    from .llm import ChatModel
    from .models import Preview
    from .policy import ApprovalPolicy, Ruling, SessionGrants
    from .registry import ToolRegistry
    from .second_approver import SecondRequest, SecondState
    from .task_specs import Delegator
    from .tools.base import Tool, ToolContext
    from .turn import Standing

log = logging.getLogger(__name__)

EMPTY_REPLY_NUDGE = {"role": "user", "content": "(Your reply was empty. Answer the person, or call one of your tools.)"}
"""Sent once, with the next request only, after a reply with neither text nor a call."""

DONE_AS_APPROVED = "(Done once, as the person approved: do not call it again. Tell the person what it did.)"
"""Told after a call a person approved on its card ran: what a model does next is report it, never repeat it."""

Gate = Callable[[str], Awaitable[None]]
"""Awaited before each tool call with the tool's name: a paused run waits there, a killed one raises."""


@dataclass(frozen=True)
class Limits:
    """Circuit breakers and the context budget of one session."""

    max_iterations: int = 12
    max_tokens: int = 400_000
    max_seconds: float | None = None
    """Wall time one ``ask`` may take (None: no limit); automations set it."""
    history_chars: int = 60_000
    keep_recent: int = 8


class CallGuard(Protocol):
    """Held around each tool call of a session: a delegated task's holds the lock of the wiki page it writes."""

    def holding(self, call: "ToolCallRequest") -> AbstractAsyncContextManager[None]:
        """Entered before the call is decided, left once it has ended."""
        ...


@dataclass(frozen=True)
class SessionParts:
    """Everything one session works with, complete before it is built; nothing replaces a part afterwards.

    Hosts do not fill this in: :func:`~betty_jupyter.agent.session.open_session` builds it from a
    :class:`~betty_jupyter.agent.session.SessionSpec`, the delegation from a child's parent.
    """

    session_id: str
    model: "ChatModel | None"
    registry: "ToolRegistry"
    context: "ToolContext"
    grants: "SessionGrants"
    broker: "Approver"
    stream: ev.EventStream
    actions: "ActionLog"
    system_prompt: str
    user: str | None = None
    limits: Limits = Limits()
    task: str | None = None
    """What this session works on for someone else (a delegated task, an automation): shown on its cards."""
    gate: Gate | None = None
    no_model_reason: str = ""
    parent: "AgentSession | None" = None
    """The session a delegated task works for: its policy decides the task's calls, read again at every call."""
    guard: CallGuard | None = None
    """Held around each tool call (a delegated task's page locks)."""
    delegation: "Callable[[AgentSession], Delegator] | None" = None
    """Makes the session's delegator, through which its ``delegate_tasks`` starts children (None: it cannot)."""
    offer: ToolOffer | None = None
    """Which of its tools the model is shown now (None: all of them, from the first request)."""
    planner: "ChatModel | None" = None
    """A stronger model that writes each turn's plan, which the session's model then carries out with its tools."""


class AgentSession:
    """One conversation: its messages, grants, budget, and the parts it was built with (read-only)."""

    def __init__(self, parts: SessionParts, policy: "ApprovalPolicy", *, messages: list[dict[str, Any]] | None = None,
                 tokens: int = 0) -> None:
        self._parts, self._policy = parts, policy
        self._context = (parts.context if parts.delegation is None
                         else replace(parts.context, delegator=parts.delegation(self)))
        self.messages = messages or [{"role": "system", "content": parts.system_prompt}]
        self.tokens = tokens
        """Tokens used so far: the budget is per session, across resumes (and a delegated task's count here too)."""
        self._standing: "Standing[Any] | None" = None
        """What a person's answer left standing for the rest of this turn (a plan), asked about every later call."""
        self.offer = parts.offer if parts.offer is not None else ToolOffer(parts.registry, progressive=False)
        """The tools its model is shown now (it only grows)."""
        self._arguments = {**{tool.name: tuple(tool.Args.model_fields) for tool in parts.registry},
                           **self.offer.own_arguments()}

    # ----- what it was built with ----------------------------------------------------------------
    @property
    def session_id(self) -> str:
        """The id its events, approvals and action log carry (a delegated task's is its parent's)."""
        return self._parts.session_id

    @property
    def model(self) -> "ChatModel | None":
        """The chat model (None: no model is configured; a person's own calls still run)."""
        return self._parts.model

    @property
    def registry(self) -> "ToolRegistry":
        """The tools this session may call."""
        return self._parts.registry

    @property
    def context(self) -> "ToolContext":
        """What its tools use: the cluster link, the workspace, the scratchpad, the delegator."""
        return self._context

    @property
    def grants(self) -> "SessionGrants":
        """The tools a person approved for the whole session."""
        return self._parts.grants

    @property
    def broker(self) -> "Approver":
        """Where its approval cards wait for a person."""
        return self._parts.broker

    @property
    def stream(self) -> ev.EventStream:
        """Its events."""
        return self._parts.stream

    @property
    def actions(self) -> "ActionLog":
        """The action log each of its calls is written to."""
        return self._parts.actions

    @property
    def user(self) -> str | None:
        """The person's login name on the cluster, when it answered."""
        return self._parts.user

    @property
    def limits(self) -> Limits:
        """Its breakers and context budget."""
        return self._parts.limits

    @property
    def task(self) -> str | None:
        """What it works on for someone else (a delegated task, an automation): shown on its cards."""
        return self._parts.task

    @property
    def before_tool(self) -> Gate | None:
        """The gate awaited before each tool call (an automation's pause and kill switch)."""
        return self._parts.gate

    @property
    def parent(self) -> "AgentSession | None":
        """The session this one works on a delegated task for."""
        return self._parts.parent

    @property
    def policy(self) -> "ApprovalPolicy":
        """The policy deciding its calls now; a delegated task's is its parent's, never a mode the parent has left."""
        return self._policy if self._parts.parent is None else self._parts.parent.policy

    def set_policy(self, policy: "ApprovalPolicy") -> None:
        """The mode switch: decide the next calls with ``policy`` (grants are kept, children follow)."""
        self._policy = policy

    # ----- the loop --------------------------------------------------------------------------
    async def ask(self, prompt: str, context: "ContextBulletin | None" = None) -> str:
        """Answer ``prompt``, calling tools as the model asks and the policy allows; returns the done reason.

        ``context``: the bulletin the person sent with it; the model reads it quoted after their words, the
        transcript's message keeps their words and the bulletin apart.

        A person's denial ends the turn (``denied``) once the reply's other calls are answered: the
        model is told the call did not run, and hears of it again only with the person's next prompt.
        A plan answered in this turn covers its calls until the turn ends; its steps left then are not run.
        """
        try:
            return await self._turn(prompt, context)
        finally:
            if self._standing is not None:
                self._standing.stop("the turn ended before it ran")
                self._standing = None

    async def _turn(self, prompt: str, context: "ContextBulletin | None") -> str:
        said = ev.Message(role="user", text=prompt, model=None, context=sent_context(context))
        if self.model is None:
            self.stream.emit("message", said)
            self.stream.emit("error", ev.ErrorInfo(message=self._parts.no_model_reason or "no chat model is configured",
                                                   code="no_model"))
            self.stream.emit("done", ev.Done(reason=DoneReason.ERROR))
            return DoneReason.ERROR
        self.messages.append({"role": "user", "content": with_bulletin(prompt, context)})
        self.stream.emit("message", said)
        began = time.monotonic()
        if self._parts.planner is not None:
            await self._planned(self._parts.planner)
        told: dict[str, str] = {}  # what each call of this turn was told, by call_key: a repeat is answered from it
        nudge: list[dict[str, Any]] = []
        for iteration in range(1, self.limits.max_iterations + 1):
            if self.limits.max_seconds is not None and time.monotonic() - began > self.limits.max_seconds:
                return self._stop("time_limit", f"stopped after {self.limits.max_seconds:g} s of wall time; "
                                  "ask again to continue")
            if self.tokens >= self.limits.max_tokens:
                return self._stop("token_limit", f"this session used its {self.limits.max_tokens} tokens; "
                                  "start a new session or raise llm.max_tokens")
            await self._compact()
            try:
                reply = await self._reply(nudge)
            except ModelError as error:
                self.stream.emit("error", ev.ErrorInfo(message=str(error), code="model", retryable=error.retryable))
                self.stream.emit("done", ev.Done(reason=DoneReason.ERROR))
                return DoneReason.ERROR
            self.tokens += reply.tokens
            self.stream.emit("budget", ev.Budget(iterations=iteration, max_iterations=self.limits.max_iterations,
                                                 tokens=self.tokens, max_tokens=self.limits.max_tokens))
            if not reply.text and not reply.tool_calls:
                if nudge:  # a second empty reply: said, not taken as an answer
                    self.stream.emit("error", ev.ErrorInfo(message="the model answered with nothing, twice; ask again, "
                                                           "or try another model", code="empty_reply", retryable=True))
                    self.stream.emit("done", ev.Done(reason=DoneReason.ERROR))
                    return DoneReason.ERROR
                nudge = [EMPTY_REPLY_NUDGE]
                self.stream.emit("replanning", ev.Replanning(reason="the model's reply was empty; asking once more"))
                continue
            nudge = []
            self._remember_reply(reply.text, reply.tool_calls)
            if not reply.tool_calls:
                self.stream.emit("done", ev.Done(reason=DoneReason.FINISHED))
                return DoneReason.FINISHED
            answers = await self._answer_reply(reply.tool_calls, told)
            self.messages.extend({"role": "tool", "tool_call_id": call.call_id, "content": answer.told}
                                 for call, answer in zip(reply.tool_calls, answers))
            if any(answer.denied for answer in answers):
                # A person's "no" ends the turn in code: the model is never asked what to try instead.
                self.stream.emit("done", ev.Done(reason=DoneReason.DENIED))
                return DoneReason.DENIED
        return self._stop("iteration_limit", f"stopped after {self.limits.max_iterations} model turns without an "
                          "answer; ask again to continue")

    def _stop(self, code: str, message: str) -> str:
        self.stream.emit("error", ev.ErrorInfo(message=message, code=code, retryable=False))
        self.stream.emit("done", ev.Done(reason=DoneReason.BREAKER))
        return DoneReason.BREAKER

    async def _reply(self, nudge: list[dict[str, Any]]) -> ReadReply:
        """The model's next reply, read: calls written as text found, text that may be a call held back as it streams."""
        assert self.model is not None
        held = HeldText()

        def delta(text: str) -> None:
            if shown := held.take(text):
                self.stream.emit("message_delta", ev.MessageDelta(text=shown))

        reply = await self.model.complete(self.messages + nudge, self.offer.schemas(), delta, self._retrying)
        read = read_reply(reply, self._arguments)
        if read.note:
            self.stream.emit("replanning", ev.Replanning(reason=read.note))
        return read

    async def _planned(self, planner: "ChatModel") -> None:
        """The planner's plan for this turn, shown and handed to the session's model; a planner that fails is said,
        and the session's model works without a plan."""
        try:
            reply = await planner.complete(planning_messages(self.messages, self.registry), [], lambda text: None,
                                           self._retrying)
        except ModelError as error:
            self.stream.emit("replanning", ev.Replanning(reason=f"the planner did not answer ({error}); "
                                                                "going on without a plan"))
            return
        self.tokens += reply.tokens
        plan = reply.text.strip()
        if not plan:
            return
        self.stream.emit("message", ev.Message(role="assistant", text=f"Plan:\n{plan}", model=planner.settings.model))
        self.messages.append({"role": "user", "content": f"{PLAN_NOTE}\n{plan}"})

    async def _answer_reply(self, calls: "list[ToolCallRequest]", told: dict[str, str]) -> list[Answer]:
        """Every call of one reply answered: the offer's own by the offer, a call repeated in this turn from what it
        was told, the others decided and run (together) through the gate."""
        keys = [call_key(call) if not self._follows_progress(call.name) else f"{index}\n{uuid.uuid4()}"
                for index, call in enumerate(calls)]
        fresh = [i for i, key in enumerate(keys) if key not in told and keys.index(key) == i]
        ran = dict(zip(fresh, await asyncio.gather(*(self._offered_call(calls[i]) for i in fresh))))
        told.update((keys[i], answer.told) for i, answer in ran.items())
        repeated = [calls[i].name for i in range(len(calls)) if i not in ran]
        if repeated:
            self.stream.emit("replanning", ev.Replanning(
                reason=f"the model repeated {', '.join(dict.fromkeys(repeated))} with the same arguments; "
                       "answered from the earlier result, not run again"))
        return [ran[i] if i in ran else _repeat(calls[i], told[keys[i]]) for i in range(len(calls))]

    def _follows_progress(self, name: str) -> bool:
        return name in self.registry and self.registry.get(name).follows_progress

    async def _offered_call(self, call: "ToolCallRequest") -> Answer:
        if self.offer.answers(call.name):
            told = self.offer.answer(call.arguments)
            return Answer(ToolOutcome(ok=True, summary=told), told)
        self.offer.show([call.name])  # a tool of the session called by name is offered from now on
        return await self._call(call)

    def _retrying(self, reason: str) -> None:
        self.stream.emit("replanning", ev.Replanning(reason=f"asking the model again: {reason}"))

    def _remember_reply(self, text: str, calls: "list[ToolCallRequest]") -> None:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        for call in calls:
            call.call_id = call.call_id or f"call_{uuid.uuid4().hex[:12]}"
        if calls:
            message["tool_calls"] = [{"id": c.call_id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        self.messages.append(message)
        if text:
            self.stream.emit("message", ev.Message(role="assistant", text=text,
                                                   model=self.model.settings.model if self.model else None))

    # ----- one tool call ---------------------------------------------------------------------
    async def run_tool(self, tool: str, args: Mapping[str, Any], person: str | None,
                       call_id: str | None = None) -> ToolOutcome:
        """A call a person typed (a magic, a panel button): the same policy, approvals and action log.

        ``person`` names who asked and where (it is the approver of calls that need no card);
        ``None`` makes it another agent's call (an MCP client's), decided as this session's agent's are.
        ``call_id`` lets the caller follow the call's events (default: a fresh one).
        Tier 2 still waits for an approval of its exact preview; refusals come back as
        ``ToolOutcome(ok=False)``.
        """
        call = ToolCallRequest(call_id=call_id or f"call_{uuid.uuid4().hex[:12]}", name=tool,
                               arguments=json.dumps(dict(args), default=str))
        return (await self._call(call, person)).outcome

    async def _call(self, call: "ToolCallRequest", person: str | None = None) -> Answer:
        """Everything about one call (held by the guard when the session has one)."""
        if self._parts.guard is None:
            return await self._answer(call, person)
        async with self._parts.guard.holding(call):
            return await self._answer(call, person)

    async def _answer(self, call: "ToolCallRequest", person: str | None) -> Answer:
        """Everything about one call: what it did, and what the model is told."""
        began = time.perf_counter()
        try:
            tool = self.registry.get(call.name)
            args = tool.parse(call.arguments)
        except BettyError as error:
            refused = self._refused(call, None, f"{error}", began)
            return replace(refused, told=f"{refused.told} Write the call again, correctly.")
        if tool.person_only and person is None:
            return self._refused(call, tool, f"only the person calls {tool.name} (from the notebook)", began)
        tier = int(tool.tier_for(args))
        if self.before_tool is not None:
            await self.before_tool(tool.name)
        self.stream.emit("tool_call", ev.ToolCallInfo(call_id=call.call_id, tool=tool.name,
                                                      args=args.model_dump(mode="json"), tier=tier))
        decision = self._decide(tool, args, tier, person)
        if decision.action == "deny":
            return self._refused(call, tool, f"refused by Betty's policy: {decision.reason}", began, tier)
        # lazy: every tool module; the server's start loads the loop without them
        from .tools.session_tool import SessionTool

        if isinstance(tool, SessionTool):
            return await tool.answer(_CallFace(self, call, tool, person, began), args, tier, decision.action)
        # A plan's step is matched however it is spelt: by its rule values.
        standing, values = self._standing, tool.rule_values(self.context, args)
        if standing is not None and (refusal := standing.refusal(tool.name, values)) is not None:
            return self._refused(call, tool, refusal, began, tier)
        if decision.action == "propose":
            return await self._propose(call, tool, args, tier, began)
        # Claimed before any await: two identical calls in one reply never both run as the one granted step.
        held = None if standing is None else standing.claim(tool.name, values)
        try:
            # A call a person typed is approved by typing it; the agent's calls that need no card run as auto.
            approval = Approval(Decision.AUTO) if person is None else Approval(Decision.APPROVED, person)
            if decision.action == "ask":
                covered = (None if standing is None or held is None
                           else await standing.approval(held, tool, args, self.context))
                if covered is not None:
                    approval = covered
                else:
                    asked = await self._approval(call, tool, args, tier, decision.reason)
                    if isinstance(asked, Answer):
                        return asked
                    args, approval = asked
                    if (edit_refused := self._edit_refusal(call, tool, tier, args, approval, person)) is not None:
                        return edit_refused
                    if (changed := await self._changed_since_card(call, tool, tier, args, approval)) is not None:
                        return changed
                    if standing is not None:  # an edited card may now be (or no longer be) a granted step
                        if held is not None:
                            standing.release(held)
                        held = standing.claim(tool.name, tool.rule_values(self.context, args))
            return await self._run(call, tool, tier, args, approval, began, standing if held is not None else None,
                                   held)
        finally:
            if standing is not None and held is not None:
                standing.release(held)

    async def _run(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: Approval,
                   began: float, standing: "Standing[Any] | None" = None, held: Any = None) -> Answer:
        """Run a decided call, and follow it as what it holds of the standing answer (a plan's step)."""
        if standing is not None and held is not None:
            standing.running(held, call.call_id)
        if approval.preview is not None:
            refusal = None if approval.second else self._site_refusal(approval.preview)
            if refusal is not None:  # an edited card or a plan's step above the site's limits
                return self._refused_after(call, tool, tier, args, approval, refusal)
            args = tool.bound(args, approval.preview)
        if tier == 2 and (unkept := self._audit_unreachable()) is not None:  # a change the site could not audit
            return self._refused_after(call, tool, tier, args, approval, unkept)
        outcome = await tool.execute(self.context, args)
        self._log(call, tool, tier, args, approval, outcome, began)
        if standing is not None and held is not None and (stopped := standing.ran(held, call.call_id, outcome)):
            self.stream.emit("replanning", ev.Replanning(reason=stopped))
        told = condense(outcome, self.user)
        if outcome.ok and tier == 2 and approval.decision in (Decision.APPROVED, Decision.EDITED):
            told += f"\n\n{DONE_AS_APPROVED}"
        return Answer(outcome, told)

    def _decide(self, tool: "Tool[Any]", args: Any, tier: int, person: str | None) -> "Ruling":
        """The policy's decision, the rules seeing the canonical arguments and the reads made on the person's behalf."""
        values = tool.rule_values(self.context, args)
        reads = tool.reads_for(self.context, args)
        if person is None:
            return self.policy.decide(tool.name, values, tier, self.grants, reads)
        return self.policy.decide_for_person(tool.name, values, tier, reads)

    def _edit_refusal(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: Approval,
                      person: str | None) -> Answer | None:
        """An edited card is decided again as a call of its own: the rules that deny the edited arguments refuse it,
        approved or not (the person's edit cannot carry a call past the rules)."""
        if approval.decision != Decision.EDITED:
            return None
        again = self._decide(tool, args, tier, person)
        if again.action != "deny":
            return None
        return self._refused_after(call, tool, tier, args, approval, f"refused by Betty's policy: {again.reason}")

    def _site_refusal(self, preview: "Preview") -> str | None:
        """Why the site refuses the job a preview shows (its limits: nodes, wall time, GPU-hours), or None."""
        if preview.kind != "script":
            return None
        if preview.details.get("end mail") is True and self.policy.site.source and not self.policy.site.end_mail:
            return f"{self.policy.site.where} does not offer Slurm's end mail (mail.end_mail); leave end_mail out"
        return self.policy.site.job_refusal(preview.text)

    async def _approval(self, call: "ToolCallRequest", tool: "Tool[Any]", args: Any, tier: int,
                        reason: str) -> tuple[Any, "Approval"] | Answer:
        """Preview, ask, wait: the (possibly edited) args and the decision, or the outcome when it does not run."""
        from .tools.base import revalidated  # lazy: every tool module; the server's start loads the loop without them

        try:
            preview = await tool.preview(self.context, args)
        except BettyError as error:
            return self._refused(call, tool, str(error), time.perf_counter(), tier)
        site = self.policy.site
        refusal = self._site_refusal(preview)
        if refusal is not None and site.limits.above != "second":  # never a card for a job the site refuses
            return self._refused(call, tool, refusal, time.perf_counter(), tier)
        await budget_fact(site, self.context, preview)
        digest = card_digest(tool.name, args.model_dump(mode="json"), preview)
        second = None
        if refusal is not None:
            try:
                second = open_second(site, refusal, tool.name, args.model_dump(mode="json"), preview, digest)
            except (BettyError, OSError) as error:
                return self._refused(call, tool, f"{refusal}, and {error}", time.perf_counter(), tier)
        preview.say_again()
        approval_id = new_approval_id()
        resolution = await self._card(call, tool, tier, args, preview, reason, digest, approval_id)
        approval = Approval(resolution.decision, resolution.approver, preview, digest)
        if second is not None and resolution.approved:
            return await self._second(call, tool, tier, args, approval, resolution, second, approval_id)
        if second is not None:
            withdraw(second[0], second[1].request_id)
        if not resolution.approved:
            return self._not_approved(call, tool, tier, args, approval, resolution)
        if resolution.decision == Decision.EDITED and resolution.args is not None:
            try:
                args, approval.preview = await revalidated(tool, self.context, resolution.args)
            except BettyError as error:
                return self._refused(call, tool, str(error), time.perf_counter(), tier)
            approval.digest = card_digest(tool.name, args.model_dump(mode="json"), approval.preview)
        self.grants.grant(tool.name)  # tier 1 asks once per session per tool; tier 2 ignores grants
        return args, approval

    async def _second(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: Approval,
                      resolution: "Resolution", second: "tuple[Path, SecondRequest]",
                      approval_id: str) -> tuple[Any, Approval] | Answer:
        """A job above the site's limits that the person approved: it runs once a second approver approves this
        very card too; both answers are logged and audited (``approver``: the person, then the approver). The card
        says meanwhile whom it waits for and since when, then how it ended (``second_approval`` events)."""
        if resolution.decision == Decision.EDITED:
            withdraw(second[0], second[1].request_id)
            return self._refused_after(call, tool, tier, args, approval, "an edited job above your site's limits "
                                       "needs a card of its own for the second approver; call it again")
        approvers, since = list(self.policy.site.limits.approvers), time.time()

        def said(state: "SecondState", approver: str | None = None, why: str = "") -> None:
            self.stream.emit("second_approval", ev.SecondApproval(
                approval_id=approval_id, call_id=call.call_id, state=state, approvers=approvers, since=since,
                approver=approver, why=why))

        said("waiting")
        state, approver, why = await second_answer(self.policy.site, *second, self.broker_timeout)
        said(state, approver, why)
        if state != "approved":
            approver = None
        approval.approver = f"{resolution.approver or 'the person'}, then {approver or 'no'} (second approver)"
        if approver is None:
            return self._refused_after(call, tool, tier, args, approval, f"not run: {why}")
        approval.second = approver
        return args, approval

    @property
    def broker_timeout(self) -> float:
        """How long a card waits for an answer (the broker's own, else Betty's default)."""
        return float(getattr(self.broker, "timeout", DEFAULT_TIMEOUT))

    async def _card(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, preview: "Preview",
                    reason: str, digest: str, approval_id: str) -> "Resolution":
        """Show the card ``approval_id`` (bound to ``digest``), wait for the person's answer (or none), and say how
        it ended."""
        request = ev.ApprovalRequest(approval_id=approval_id, call_id=call.call_id,
                                     tool=tool.name, tier=tier, args=args.model_dump(mode="json"),
                                     preview=preview, reason=reason, task=self.task, digest=digest)
        self.stream.emit("approval_request", request)
        resolution = await self.broker.request(request, session_id=self.session_id)
        self.stream.emit("approval_resolved", ev.ApprovalResolved(
            approval_id=request.approval_id, call_id=call.call_id, decision=resolution.decision,
            approver=resolution.approver, args=resolution.args))
        return resolution

    async def _changed_since_card(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any,
                                  approval: Approval) -> Answer | None:
        """None when what the call would run now is still what the answered card showed (its digest); else the
        call is refused in one line (the tool's own, when its check of the approved digest refuses), the person
        and the model told that nothing ran, and the log keeps who approved which card."""
        if approval.digest is None or approval.preview is None:
            return None
        bound = tool.bound(args, approval.preview)
        try:
            now = await tool.dry_run(self.context, bound)
        except BettyError as error:
            return self._refused_after(call, tool, tier, bound, approval, str(error))
        if card_digest(tool.name, args.model_dump(mode="json"), now) == approval.digest:
            return None
        shown = approval.preview.inputs
        changed = sorted(name for name in {*now.inputs, *shown} if shown.get(name) != now.inputs.get(name))
        what = ", ".join(changed) if changed else f"the {now.kind}"
        return self._refused_after(call, tool, tier, bound, approval, f"not run: {what} changed after the card was "
                                   "shown, so it is not what was approved; call it again to show a new card")

    def _refused_after(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: Approval,
                       message: str) -> Answer:
        """An approved call refused before it ran: logged with its approver and the card's digest."""
        outcome = ToolOutcome(ok=False, summary=message)
        self._log(call, tool, tier, args, Approval(Decision.REFUSED, approval.approver, approval.preview,
                                                   approval.digest), outcome, time.perf_counter())
        return Answer(outcome, f"error: {message}")

    def _not_approved(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: Approval,
                      resolution: "Resolution") -> Answer:
        self._log(call, tool, tier, args, approval, None, time.perf_counter())
        outcome = ToolOutcome(ok=False, summary=f"not run: {resolution.decision}"
                              + (f" ({resolution.reason})" if resolution.reason else ""))
        return Answer(outcome, f"The person did not approve this call ({resolution.decision}), "
                      "so it did not run. Do not retry it unless they ask.",
                      denied=resolution.decision == Decision.DENIED)

    async def repreview(self, tool: str, proposal: Mapping[str, Any], edited: Mapping[str, Any]) -> "Preview":
        """The preview of a person's edit of an open card of ``tool`` (``proposal``: the call's arguments), checked
        and previewed by the same tool and policy code as the model's call; ToolError (one line) when it is refused,
        also by the site (its limits, its mail offer), whose refusal would otherwise come only after the approval.
        Nothing runs and nothing is kept."""
        # lazy: every tool module; the server's start loads the loop without them
        from .tools.base import revalidated
        from .tools.session_tool import SessionTool

        found = self.registry.get(tool)
        if isinstance(found, SessionTool):
            call = ToolCallRequest(call_id="", name=found.name, arguments="{}")
            return await found.review(_CallFace(self, call, found, None, time.perf_counter()), proposal, edited)
        preview = (await revalidated(found, self.context, edited))[1]
        if (refusal := self._site_refusal(preview)) is not None:
            raise ToolError(refusal)
        return preview

    def _stand(self, standing: "Standing[Any]") -> None:
        if self._standing is not None:
            self._standing.stop("a newer plan replaced it")
        self._standing = standing

    async def _propose(self, call: "ToolCallRequest", tool: "Tool[Any]", args: Any, tier: int,
                       began: float) -> Answer:
        try:
            preview = await tool.preview(self.context, args)
        except BettyError as error:
            return self._refused(call, tool, str(error), began, tier)
        outcome = ToolOutcome(ok=True, summary=f"proposed, not run (Betty is in propose mode):\n{preview.text}")
        self._log(call, tool, tier, args, Approval(Decision.PROPOSED, None, preview), outcome, began)
        return Answer(outcome, outcome.summary)

    def _refused(self, call: "ToolCallRequest", tool: "Tool[Any] | None", message: str, began: float,
                 tier: int = 0) -> Answer:
        outcome = ToolOutcome(ok=False, summary=message)
        self._record(call, call.name, tier, _raw_args(call.arguments), Approval(Decision.REFUSED), outcome, began)
        return Answer(outcome, f"error: {message}")

    def _log(self, call: "ToolCallRequest", tool: "Tool[Any]", tier: int, args: Any, approval: "Approval",
             outcome: ToolOutcome | None, began: float) -> None:
        self._record(call, tool.name, tier, args.model_dump(mode="json"), approval, outcome, began)

    def _record(self, call: "ToolCallRequest", tool: str, tier: int, args: dict[str, Any], approval: "Approval",
                outcome: ToolOutcome | None, began: float) -> None:
        """The action log first (full output beside it), then the ``tool_result`` event pointing at it."""
        duration = _ms(began)
        record = self.actions.record(ActionRecord(
            ts=time.time(), session_id=self.session_id, call_id=call.call_id, tool=tool, tier=tier, task=self.task,
            args=args,
            preview=approval.preview, digest=approval.digest, decision=approval.decision, approver=approval.approver,
            ok=None if outcome is None else outcome.ok,
            summary="" if outcome is None else outcome.summary, output_ref=None, duration_ms=duration,
            artifacts=[] if outcome is None else outcome.artifacts,
        ), full_output=_full_output(outcome, self.user))
        self._audit(record)
        if outcome is not None:
            self.stream.emit("tool_result", ev.ToolResultInfo(
                call_id=call.call_id, tool=tool, ok=outcome.ok, decision=approval.decision, approver=approval.approver,
                summary=outcome.summary, duration_ms=duration,
                output_ref=record.output_ref, artifacts=outcome.artifacts))

    def _audit_unreachable(self) -> str | None:
        """Why the site's audit could not take a record now, or None (also when the site keeps none)."""
        audit = self.policy.site.audit
        if not audit.kept:
            return None
        try:
            return audit.unreachable(getpass.getuser())
        except KeyError:
            return f"the site's audit ({audit.describe()}) cannot be written: this user has no login name; nothing ran"

    def _audit(self, record: ActionRecord) -> None:
        """The record (as the action log keeps it: secrets blanked) where the site keeps its audit, too."""
        audit = self.policy.site.audit
        if not audit.kept:
            return
        try:
            audit.write(record.model_dump_json(), getpass.getuser())
        except (OSError, KeyError) as error:
            log.error("Betty could not write to the site's audit (%s): %s", audit.describe(), error)

    # ----- the context budget ------------------------------------------------------------------
    async def _compact(self) -> None:
        """When history outgrows its budget, summarise older turns; the scratchpad stays exact."""
        size = sum(len(json.dumps(m, default=str)) for m in self.messages)
        if size <= self.limits.history_chars:
            return
        cut = self._turn_boundary()
        if cut is None:
            return
        older = self.messages[1:cut]
        if self.model is None:
            return
        try:
            summary = await self.model.summarise(json.dumps(older, default=str)[: self.limits.history_chars])
        except ModelError:
            return  # keep the full history; the token breaker still bounds the session
        pinned = _read(self.context.scratchpad)
        note = f"Summary of the earlier conversation:\n{summary}"
        if pinned:
            note += f"\n\nPinned notes (exact, from the scratchpad):\n{pinned}"
        self.messages[1:cut] = [{"role": "user", "content": note}]
        self.tokens += estimate_tokens(note)

    def _turn_boundary(self) -> int | None:
        """Where older turns end: at a user message, so no tool call is split from its answer."""
        users = [i for i, m in enumerate(self.messages) if m["role"] == "user" and i > 1]
        keep_from = len(self.messages) - self.limits.keep_recent
        candidates = [i for i in users if i <= keep_from]
        return candidates[-1] if candidates else None


class _CallFace:
    """The session as a :class:`~.tools.session_tool.SessionTool` sees it, bound to one call (a SessionFace)."""

    def __init__(self, session: AgentSession, call: "ToolCallRequest", tool: "Tool[Any]", person: str | None,
                 began: float) -> None:
        self._session, self._call, self._tool, self._person, self._began = session, call, tool, person, began

    @property
    def registry(self) -> "ToolRegistry":
        """The session's tools."""
        return self._session.registry

    @property
    def context(self) -> "ToolContext":
        """What the session's tools use."""
        return self._session.context

    @property
    def stream(self) -> ev.EventStream:
        """The session's events."""
        return self._session.stream

    @property
    def call_id(self) -> str:
        """The id of the call being answered."""
        return self._call.call_id

    def decide(self, tool: "Tool[Any]", args: Any, tier: int) -> "Ruling":
        """The session's policy for a call of ``tool`` made by whoever made this one."""
        return self._session._decide(tool, args, tier, self._person)

    def site_refusal(self, preview: "Preview") -> str | None:
        """Why the site refuses the job ``preview`` shows (above its limits), or None."""
        return self._session._site_refusal(preview)

    async def card(self, tier: int, args: Any, preview: "Preview", reason: str) -> "tuple[Resolution, Approval]":
        """This call's card, bound to ``preview``, and the person's answer (or none) with its approval."""
        digest = card_digest(self._tool.name, args.model_dump(mode="json"), preview)
        resolution = await self._session._card(self._call, self._tool, tier, args, preview, reason, digest,
                                               new_approval_id())
        return resolution, Approval(resolution.decision, resolution.approver, preview, digest)

    def log(self, tier: int, args: Any, approval: Approval, outcome: ToolOutcome | None) -> None:
        """This call in the action log and the events."""
        self._session._log(self._call, self._tool, tier, args, approval, outcome, self._began)

    def refused(self, message: str, tier: int) -> Answer:
        """This call refused in one line, logged."""
        return self._session._refused(self._call, self._tool, message, self._began, tier)

    def not_approved(self, tier: int, args: Any, approval: Approval, resolution: "Resolution") -> Answer:
        """This call's card was not approved: logged, and the model told it did not run."""
        return self._session._not_approved(self._call, self._tool, tier, args, approval, resolution)

    def stand(self, standing: "Standing[Any]") -> None:
        """``standing`` covers the later calls of this turn, replacing (and stopping) any older one."""
        self._session._stand(standing)


def new_approval_id() -> str:
    """A fresh card's id (``apr_`` and 12 hex digits)."""
    return f"apr_{uuid.uuid4().hex[:12]}"


def _repeat(call: "ToolCallRequest", earlier: str) -> Answer:
    told = (f"{earlier}\n\n(This is the answer of your earlier call of {call.name} with the same arguments in this "
            "turn; it was not run again. Do not call it again: answer the person now, in plain words, from it.)")
    return Answer(ToolOutcome(ok=True, summary="answered from the earlier result, not run again"), told)


def _full_output(outcome: ToolOutcome | None, user: str | None) -> str | None:
    """What the action log keeps beside a call: its full output, or for a table the bounded answer the model is
    told (a 20,000-job queue is counted and paged there, not copied)."""
    if outcome is None:
        return None
    if outcome.paging is not None and not outcome.full:
        return condense(outcome, user)
    return outcome.full or None


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 3)


def _raw_args(arguments: str) -> dict[str, Any]:
    try:
        parsed = parse_json(arguments)
    except ValueError:
        return {"_raw": arguments[:2000]}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments[:2000]}


def _read(path: Any) -> str:
    try:
        return str(path.read_text()).strip()
    except OSError:
        return ""
