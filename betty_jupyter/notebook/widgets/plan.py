"""A plan's card in ``%betty ask``: every step with its tier and preview, each granted or denied, answered once.

The card is an :class:`~.approval.ApprovalCard` (its record, its collapse once answered, its one-line
refusals) whose buttons answer the plan: **Execute plan** (the granted steps run without another card
when the model calls them exactly as previewed), **Step by step** (each granted step still shows its
card) and **Deny plan**. Each step's button toggles it between granted and denied; its **Edit** opens the
single card's edit form (:class:`~.edit.EditForm`) on that step, each change checked as the plan's answer
with this step edited and previewed again as the step's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ...agent.models import Preview
from ...agent.plans import PLAN_TOOL
from ...agent.vocabulary import Decision, PlanRun
from ...errors import ToolError
from ...safe_text import html_text
from .approval import ApprovalCard, Respond, StartEstimate, preview_html
from .edit import Check, EditForm
from .rows import wrapping_row

if TYPE_CHECKING:
    from ...agent.events import ApprovalRequest

_GRANTED, _DENIED, _EDITED = "✓ granted", "✗ denied", "✎ edited"


class PlanCard(ApprovalCard):
    """A plan's card: one toggle per step, then Execute plan, Step by step or Deny plan."""

    def __init__(self, request: "ApprovalRequest", respond: Respond, answered_by: str | None = None,
                 check: Check | None = None) -> None:
        """Steps are read from the card's ``propose_plan`` arguments; their previews are in the card's preview.
        ``check``: how the plan's answer is checked and previewed again (without it no step offers Edit)."""
        super().__init__(request, respond, answered_by)
        self._plan_check = check
        self.edit.layout.display = "none"  # the plan is edited step by step
        planned = request.args.get("steps")
        self.planned: list[dict[str, Any]] = [step if isinstance(step, dict) else {} for step in
                                              (planned if isinstance(planned, list) else [])]
        self.steps = [_step_button(number, step) for number, step in enumerate(self.planned, 1)]
        self.step_edits = [self._step_edit_button(number) for number in range(1, len(self.steps) + 1)]
        self.step_forms: dict[int, EditForm] = {}
        """Each step's edit form, once opened (by its number)."""
        self.edited_steps: dict[int, dict[str, Any]] = {}
        """The arguments of each step kept as edited (by its number), each checked."""
        self.step_editing = widgets.VBox([])
        self.execute = widgets.Button(description="Execute plan", button_style="success",
                                      layout=widgets.Layout(width="auto"))
        self.execute.add_class("betty-plan-execute")
        self.execute.on_click(lambda _: self.answer_plan(PlanRun.WHOLE))
        self.one_by_one = widgets.Button(description="Step by step", button_style="info",
                                         layout=widgets.Layout(width="auto"))
        self.one_by_one.add_class("betty-plan-step-by-step")
        self.one_by_one.on_click(lambda _: self.answer_plan(PlanRun.STEP_BY_STEP))
        self.deny.description = "Deny plan"
        self.buttons.children = [self.execute, self.one_by_one, self.deny]
        children = list(self.children)
        rows = [wrapping_row([toggle, edit]) for toggle, edit in zip(self.steps, self.step_edits)]
        children.insert(children.index(self.buttons), widgets.VBox([*rows, self.step_editing]))
        self.children = children

    def _step_edit_button(self, number: int) -> widgets.Button:
        button = widgets.Button(description="Edit", icon="pencil", tooltip=f"Edit the arguments of step {number}",
                                layout=widgets.Layout(width="auto",
                                                      display="none" if self._plan_check is None else None))
        button.add_class("betty-plan-step-edit")
        button.on_click(lambda _: self.edit_step(number))
        return button

    def edit_step(self, number: int) -> EditForm:
        """Open step ``number``'s edit form (the single card's), each change checked as the plan's answer."""
        form = self.step_forms.get(number)
        if form is None:
            if self._plan_check is None:
                raise ToolError("this plan card has no server to check an edit: answer it as proposed or deny it")
            step = self.planned[number - 1]
            args = step.get("args")
            request = self.request.model_copy(update={"tool": str(step.get("tool", "?")),
                                                      "args": dict(args) if isinstance(args, dict) else {}})
            form = EditForm(request, self._step_check(number),
                            lambda preview: preview_html(request.model_copy(update={"preview": preview})))
            form.approve.description = f"Keep edit of step {number}"
            form.approve.on_click(lambda _: self._keep_edit(number))
            self.step_forms[number] = form
        self.step_editing.children = [widgets.HTML(f"<b>Step {html_text(str(number))}</b>"), form]
        return form

    def _step_check(self, number: int) -> Check:
        plan_check = self._plan_check
        assert plan_check is not None

        def check(approval_id: str, args: Mapping[str, Any]) -> Preview:
            answer: list[dict[str, Any]] = [{"decision": Decision.APPROVED} for _ in self.steps]
            answer[number - 1] = {"decision": Decision.EDITED, "args": dict(args)}
            whole = plan_check(approval_id, {"steps": answer, "run": PlanRun.WHOLE})
            return step_preview(whole, number)
        return check

    def _keep_edit(self, number: int) -> None:
        form = self.step_forms[number]
        if form.checked is None:
            return
        self.edited_steps[number] = form.checked
        button = self.steps[number - 1]
        button.description = _EDITED + ":" + button.description.split(":", 1)[1]
        self.step_editing.children = []

    def granted(self) -> list[bool]:
        """Whether each step is granted now (as proposed or as edited)."""
        return [not step.description.startswith(_DENIED) for step in self.steps]

    def answer_plan(self, run: PlanRun) -> None:
        """Answer with each step as its toggle says: every step granted as proposed to run whole is a plain
        approval; an edited step carries its checked arguments."""
        steps: list[dict[str, Any]] = []
        for number, (button, yes) in enumerate(zip(self.steps, self.granted()), 1):
            if not yes:
                steps.append({"decision": Decision.DENIED})
            elif button.description.startswith(_EDITED):
                steps.append({"decision": Decision.EDITED, "args": self.edited_steps[number]})
            else:
                steps.append({"decision": Decision.APPROVED})
        if run == PlanRun.WHOLE and all(step["decision"] == Decision.APPROVED for step in steps):
            self._answer(Decision.APPROVED, None)
            return
        self._answer(Decision.EDITED, {"steps": steps, "run": run})

    def _edit_buttons(self) -> list[widgets.Button]:
        # lets the card disable (and, after a refusal, enable again) the plan's own buttons with its own
        return [self.execute, self.one_by_one, *self.steps, *self.step_edits,
                *(form.approve for form in self.step_forms.values())]


def step_preview(whole: Preview, number: int) -> Preview:
    """Step ``number``'s own preview in the preview of a plan's answer (its ``details.calls``); ToolError when the
    answer's preview does not carry it."""
    calls = whole.details.get("calls")
    step = calls[number - 1] if isinstance(calls, list) and len(calls) >= number else None
    if not isinstance(step, dict) or not isinstance(step.get("preview"), dict):
        raise ToolError(f"the preview of the plan does not show step {number}")
    return Preview.model_validate(step["preview"])


def _step_button(number: int, step: Any) -> widgets.Button:
    tool = step.get("tool", "?") if isinstance(step, dict) else "?"
    button = widgets.Button(description=f"{_GRANTED}: {number}. {str(tool)[:60]}", layout=widgets.Layout(width="auto"))
    button.add_class("betty-plan-step")

    def toggle(_: Any) -> None:
        mark, rest = button.description.split(":", 1)
        button.description = (_GRANTED if mark == _DENIED else _DENIED) + ":" + rest

    button.on_click(toggle)
    return button


def card_for(request: "ApprovalRequest", respond: Respond, answered_by: str | None = None, check: Check | None = None,
             estimate: StartEstimate | None = None) -> ApprovalCard:
    """The card for ``request``: a :class:`PlanCard` for a plan, an :class:`ApprovalCard` for any other call."""
    if request.tool == PLAN_TOOL:
        return PlanCard(request, respond, answered_by, check=check)
    return ApprovalCard(request, respond, answered_by, check=check, estimate=estimate)
