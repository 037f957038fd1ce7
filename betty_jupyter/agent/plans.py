"""Plans: the agent proposes its state-changing steps together, and a person answers them once, step by step.

When a request needs more than one step that changes something, the model first calls
``propose_plan`` with the steps in order (each a tool, its arguments and the earlier steps it
needs). Betty checks every step with the same code as a call of its own — the tool's argument
model, its tier, the session's policy (the mode and the person's rules), the tool's preview —
and refuses a plan with any refused step whole, before anyone is asked. Otherwise the plan is
one card (``propose_plan`` is tier 2): the person grants, denies or edits each step (an edit is
checked and previewed again the same way) and lets the granted steps run as a whole or ask
again one by one (:class:`PlanAnswer`, sent as the card's ``edited`` arguments).

An approval covers exactly what was previewed (:class:`ActivePlan`): a later call of the model
runs without a card only when its tool and canonical arguments (``Tool.rule_values``, the form
the person's rules see: ``cat -- x`` is ``cat x``) are a granted step's, the steps
it needs are done and its preview is still the one approved; any other call is decided as
usual (a tier 2 call shows its card), and a call that is a denied step is refused. A failed
step stops the plan: the steps left are not run. Each change is a ``plan_step`` event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import BettyError, ToolError
from . import events as ev
from .models import Preview, ToolArgs, ToolOutcome
from .turn import Approval
from .vocabulary import Decision, PlanRun, StepStatus

if TYPE_CHECKING:
    from .policy import Ruling
    from .registry import ToolRegistry
    from .tools.base import Tool, ToolContext

PLAN_TOOL = "propose_plan"
MAX_STEPS = 20
GRANTED = frozenset({StepStatus.APPROVED, StepStatus.EDITED})
"""The statuses of a step a person let run."""

Decide = Callable[["Tool[Any]", Any, int], "Ruling"]
"""The session's policy for one call: the tool, its parsed arguments, its tier."""


class PlannedCall(ToolArgs):
    """One step the model proposes: a tool, its arguments, and the earlier steps it needs."""

    tool: str = Field(min_length=1, max_length=80, description="the tool's name")
    args: dict[str, Any] = Field(default_factory=dict, description="its arguments, exactly as the call will send them")
    depends_on: list[int] = Field(default_factory=list, description="the numbers (1, 2, …) of earlier steps it needs")


class PlanArgs(ToolArgs):
    """The arguments of ``propose_plan``: what the plan is for, and its steps in order."""

    goal: str = Field(min_length=1, max_length=2000, description="what the plan achieves, in the researcher's words")
    steps: list[PlannedCall] = Field(min_length=2, max_length=MAX_STEPS, description="the calls, in order")

    @model_validator(mode="after")
    def _earlier_steps_only(self) -> "PlanArgs":
        for number, step in enumerate(self.steps, 1):
            later = [n for n in step.depends_on if not 1 <= n < number]
            if later:
                raise ValueError(f"step {number} depends on {later}: a step may only need earlier steps")
            if step.tool == PLAN_TOOL:
                raise ValueError(f"step {number}: a plan cannot contain another plan")
        return self


class StepAnswer(BaseModel):
    """A person's answer to one step: grant it as previewed, grant it with edited arguments, or deny it."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal[Decision.APPROVED, Decision.EDITED, Decision.DENIED]
    args: dict[str, Any] | None = Field(None, description="the step's edited arguments, only with edited")

    @model_validator(mode="after")
    def _args_only_when_edited(self) -> "StepAnswer":
        if (self.decision == Decision.EDITED) != (self.args is not None):
            raise ValueError("an edited step carries its edited arguments, and only an edited step does")
        return self


class PlanAnswer(BaseModel):
    """A person's answer to a plan card, sent as the ``edited`` arguments of its ``propose_plan`` call."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepAnswer] = Field(description="one answer per step, in the plan's order")
    run: PlanRun = PlanRun.WHOLE

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> "PlanAnswer":
        """An answer from its JSON; ToolError naming what is wrong, in one line."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "answer"
            message = str(first["msg"]).removeprefix("Value error, ")
            raise ToolError(f"the answer to the plan is refused: {where}: {message}") from None


@dataclass
class Step:
    """One step of a plan as Betty checked it."""

    number: int
    tool: str
    args: dict[str, Any]
    """Its canonical arguments (a refused step's as the model sent them)."""
    tier: int = 0
    depends_on: list[int] = field(default_factory=list)
    preview: Preview | None = None
    status: StepStatus = StepStatus.PROPOSED
    reason: str = ""
    parsed: Any = None
    """The parsed arguments the call runs with (None for a refused step)."""
    claimed: bool = False
    """A call that is this step is being decided or run now: no other call is this step meanwhile."""
    canonical: dict[str, Any] | None = None
    """Its arguments as the person's rules see them (``Tool.rule_values``): what a later call is compared by."""

    def is_call(self, tool: str, canonical: Mapping[str, Any]) -> bool:
        """Whether a call of ``tool`` whose rule values are ``canonical`` is this step, however it was spelt."""
        return self.tool == tool and (self.canonical if self.canonical is not None else self.args) == canonical

    def info(self) -> ev.PlanStep:
        """The step as the ``plan`` event carries it."""
        return ev.PlanStep(index=self.number, tool=self.tool, args=self.args, tier=self.tier, preview=self.preview,
                           depends_on=self.depends_on, status=self.status, reason=self.reason)

    def line(self) -> str:
        """One line: its number, tool, tier and what it does (or why it is refused)."""
        after = f" after step {', '.join(map(str, self.depends_on))}" if self.depends_on else ""
        what = self.preview.title if self.preview is not None and not self.reason else self.reason
        return f"{self.number}. {self.tool} (tier {self.tier}){after}: {what}"


async def check_step(number: int, tool_name: str, raw: Mapping[str, Any], depends_on: list[int],
                     registry: "ToolRegistry", context: "ToolContext", decide: Decide) -> Step:
    """One step checked as its own call would be: the tool, its arguments, the policy, its preview."""
    step = Step(number, tool_name, dict(raw), depends_on=list(depends_on))
    try:
        tool = registry.get(tool_name)
        parsed = tool.parse(dict(raw))
    except BettyError as error:
        return replace(step, status=StepStatus.REFUSED, reason=str(error))
    step = replace(step, args=parsed.model_dump(mode="json"), tier=int(tool.tier_for(parsed)), parsed=parsed,
                   canonical=tool.rule_values(context, parsed))
    ruling = decide(tool, parsed, step.tier)
    if ruling.action == "deny":
        return replace(step, status=StepStatus.REFUSED, reason=f"refused by Betty's policy: {ruling.reason}")
    try:
        preview = await tool.dry_run(context, parsed)
    except ToolError as error:
        return replace(step, status=StepStatus.REFUSED, reason=str(error))
    if preview.details.get("refused") is True:  # a preview that shows the allowlist's refusal (cluster_run)
        return replace(step, preview=preview, status=StepStatus.REFUSED, reason=preview.text.splitlines()[0])
    return replace(step, preview=preview)


async def check_plan(plan: PlanArgs, registry: "ToolRegistry", context: "ToolContext", decide: Decide) -> list[Step]:
    """Every step of ``plan`` checked, in order (a refused one says why)."""
    return [await check_step(number, planned.tool, planned.args, planned.depends_on, registry, context, decide)
            for number, planned in enumerate(plan.steps, 1)]


async def answered(steps: list[Step], answer: PlanAnswer, registry: "ToolRegistry", context: "ToolContext",
                   decide: Decide) -> list[Step]:
    """The steps as a person answered them, edits checked and previewed again; ToolError (one line) for an
    answer that does not fit the plan or an edit Betty refuses (nothing is kept of it)."""
    if len(answer.steps) != len(steps):
        raise ToolError(f"the answer names {len(answer.steps)} steps; the plan has {len(steps)}: answer each one")
    result = []
    for step, said in zip(steps, answer.steps):
        if said.decision == Decision.DENIED:
            result.append(replace(step, status=StepStatus.DENIED))
        elif said.decision == Decision.APPROVED:
            result.append(replace(step, status=StepStatus.APPROVED))
        else:
            edited = await check_step(step.number, step.tool, said.args or {}, step.depends_on, registry, context,
                                      decide)
            if edited.status == StepStatus.REFUSED:
                raise ToolError(f"step {step.number} ({step.tool}): the edited call is refused: {edited.reason}")
            result.append(replace(edited, status=StepStatus.EDITED))
    for step in result:  # in order: a step needing a step that will not run will not run either
        blocked = [n for n in step.depends_on if result[n - 1].status not in GRANTED]
        if step.status in GRANTED and blocked:
            step.status, step.reason = StepStatus.NOT_RUN, f"it needs step {blocked[0]}, which was denied"
    return result


def plan_preview(goal: str, steps: list[Step]) -> Preview:
    """The plan card's preview: each step's line, tier and own preview, exactly as its card would show it.

    The structured steps are the ``plan`` event's; the details only count them.
    """
    parts = []
    for step in steps:
        body = step.preview.text if step.preview is not None else ""
        parts.append(step.line() + ("\n" + _indented(body) if body else ""))
    return Preview(kind="text", title=f"plan: {goal} ({len(steps)} steps)", text="\n\n".join(parts),
                   details={"steps": len(steps), "granted": sum(step.status in GRANTED for step in steps)})


def answer_preview(goal: str, steps: list[Step]) -> Preview:
    """The preview of a person's answer to an open plan card: the plan's preview, and in its details each step as
    answered (the ``plan`` event's structure), so a face shows an edited step's own new preview."""
    preview = plan_preview(goal, steps)
    calls = [step.info().model_dump(mode="json") for step in steps]
    return Preview(kind=preview.kind, title=preview.title, text=preview.text, details={**preview.details, "calls": calls})


def plan_event(plan_id: str, call_id: str, goal: str, steps: list[Step]) -> ev.Plan:
    """The ``plan`` event's payload."""
    return ev.Plan(steps=[step.line() for step in steps], plan_id=plan_id, call_id=call_id, goal=goal,
                   calls=[step.info() for step in steps])


def told(steps: list[Step], run: PlanRun) -> str:
    """What the model reads once a person answered the plan: which steps it may call, with which arguments."""
    lines = []
    for step in steps:
        if step.status in GRANTED:
            lines.append(f"step {step.number} {step.tool} {step.status}: call it with exactly {_json(step.args)}")
        else:
            lines.append(f"step {step.number} {step.tool} {step.status}: do not call it"
                         + (f" ({step.reason})" if step.reason else ""))
    how = ("each granted step runs without another card when called exactly so" if run == PlanRun.WHOLE
           else "each granted step still asks the person as it comes")
    return ("The person answered the plan; " + how + ". Call the granted steps in order; a call with other "
            "arguments asks the person again.\n" + "\n".join(lines))


class ActivePlan:
    """A plan a person answered, as the session runs it: which calls it covers, and each step's progress.

    It is the :class:`~.turn.Standing` ``propose_plan`` leaves for the rest of the turn."""

    def __init__(self, plan_id: str, steps: list[Step], run: PlanRun, approver: str | None,
                 stream: ev.EventStream) -> None:
        self.plan_id, self.steps, self.run, self.approver, self._stream = plan_id, steps, run, approver, stream

    def announce(self) -> None:
        """A ``plan_step`` event for each step's answer."""
        for step in self.steps:
            self._emit(step, summary=step.reason, args=step.args if step.status in GRANTED else None)

    def refusal(self, tool: str, canonical: Mapping[str, Any]) -> str | None:
        """Why this call never runs when it is a step the person denied; ``canonical``: its rule values."""
        denied = next((s for s in self.steps if s.status == StepStatus.DENIED and s.is_call(tool, canonical)), None)
        return None if denied is None else f"the person denied step {denied.number} of the plan; it does not run"

    def claim(self, tool: str, canonical: Mapping[str, Any]) -> Step | None:
        """The granted step this call is (by its rule values), when every step it needs is done and no other
        call holds it; it is held for this call until :meth:`release`. None when the call is no step of the plan."""
        for step in self.steps:
            if step.status in GRANTED and not step.claimed and step.is_call(tool, canonical) and all(
                    self.steps[n - 1].status == StepStatus.DONE for n in step.depends_on):
                step.claimed = True
                return step
        return None

    def release(self, step: Step) -> None:
        """The call that held ``step`` has ended (run, refused or answered otherwise)."""
        step.claimed = False

    def covers(self, step: Step, preview: Preview) -> bool:
        """Whether the approval stands for this call: the plan runs whole and the call shows what was approved."""
        return self.run == PlanRun.WHOLE and step.preview is not None and (
            preview.title, preview.text) == (step.preview.title, step.preview.text)

    async def approval(self, step: Step, tool: "Tool[Any]", args: Any, context: "ToolContext") -> Approval | None:
        """The plan's approval of this exact call, when it stands (the call still previews as approved)."""
        try:
            preview = await tool.dry_run(context, args)
        except BettyError:
            return None  # the call's own card says what is wrong now
        if not self.covers(step, preview):
            return None
        decision = Decision.EDITED if step.status == StepStatus.EDITED else Decision.APPROVED
        return Approval(decision, self.approver, step.preview)

    def running(self, step: Step, call_id: str) -> None:
        """The model called ``step``: it runs now."""
        step.status = StepStatus.RUNNING
        self._emit(step, call_id=call_id, args=step.args)

    def ran(self, step: Step, call_id: str, outcome: ToolOutcome) -> str | None:
        """``step`` ended; when it failed the plan stops, and the returned line says so."""
        summary = outcome.summary.splitlines()[0] if outcome.summary else ""
        step.status = StepStatus.DONE if outcome.ok else StepStatus.FAILED
        self._emit(step, call_id=call_id, summary=summary)
        if outcome.ok:
            return None
        left = self.stop(f"step {step.number} failed")
        return (f"step {step.number} ({step.tool}) failed: {summary[:200]}; the plan stopped"
                + (f", steps {', '.join(str(s.number) for s in left)} not run" if left else ""))

    def stop(self, why: str) -> list[Step]:
        """Every granted step that has not run will not: each gets a ``not_run`` event; returns them."""
        left = [step for step in self.steps if step.status in GRANTED]
        for step in left:
            step.status, step.reason = StepStatus.NOT_RUN, why
            self._emit(step, summary=why)
        return left

    def _emit(self, step: Step, *, call_id: str | None = None, summary: str = "",
              args: dict[str, Any] | None = None) -> None:
        self._stream.emit("plan_step", ev.PlanStepUpdate(plan_id=self.plan_id, index=step.number, tool=step.tool,
                                                         status=step.status, call_id=call_id, args=args,
                                                         summary=summary))


def _indented(text: str) -> str:
    return "\n".join(f"   {line}" for line in text.splitlines())


def _json(args: Mapping[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)
