"""A plan's card in ``%betty ask``: every step with its tier and preview, each granted or denied, answered once.

The card is an :class:`~.approval.ApprovalCard` (its record, its collapse once answered, its one-line
refusals) whose buttons answer the plan: **Execute plan** (the granted steps run without another card
when the model calls them exactly as previewed), **Step by step** (each granted step still shows its
card) and **Deny plan**. Each step's button toggles it between granted and denied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ...agent.plans import PLAN_TOOL
from ...agent.vocabulary import Decision, PlanRun
from .approval import ApprovalCard, Respond, StartEstimate
from .edit import Check

if TYPE_CHECKING:
    from ...agent.events import ApprovalRequest

_GRANTED, _DENIED = "✓ granted", "✗ denied"


class PlanCard(ApprovalCard):
    """A plan's card: one toggle per step, then Execute plan, Step by step or Deny plan."""

    def __init__(self, request: "ApprovalRequest", respond: Respond, answered_by: str | None = None) -> None:
        """Steps are read from the card's ``propose_plan`` arguments; their previews are in the card's preview."""
        super().__init__(request, respond, answered_by)
        planned = request.args.get("steps")
        self.steps = [_step_button(number, step) for number, step in
                      enumerate(planned if isinstance(planned, list) else [], 1)]
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
        children.insert(children.index(self.buttons), widgets.VBox(self.steps))
        self.children = children

    def granted(self) -> list[bool]:
        """Whether each step is granted now."""
        return [step.description.startswith(_GRANTED) for step in self.steps]

    def answer_plan(self, run: PlanRun) -> None:
        """Answer with each step as its toggle says: every step granted to run whole is a plain approval."""
        granted = self.granted()
        if run == PlanRun.WHOLE and all(granted):
            self._answer(Decision.APPROVED, None)
            return
        self._answer(Decision.EDITED, {"steps": [{"decision": Decision.APPROVED if yes else Decision.DENIED}
                                                 for yes in granted], "run": run})

    def _edit_buttons(self) -> list[widgets.Button]:
        # lets the card disable (and, after a refusal, enable again) the plan's own buttons with its own
        return [self.execute, self.one_by_one, *self.steps]


def _step_button(number: int, step: Any) -> widgets.Button:
    tool = step.get("tool", "?") if isinstance(step, dict) else "?"
    button = widgets.Button(description=f"{_GRANTED}: {number}. {str(tool)[:60]}", layout=widgets.Layout(width="auto"))
    button.add_class("betty-plan-step")

    def toggle(_: Any) -> None:
        granted = button.description.startswith(_GRANTED)
        button.description = button.description.replace(_GRANTED if granted else _DENIED,
                                                         _DENIED if granted else _GRANTED, 1)

    button.on_click(toggle)
    return button


def card_for(request: "ApprovalRequest", respond: Respond, answered_by: str | None = None, check: Check | None = None,
             estimate: StartEstimate | None = None) -> ApprovalCard:
    """The card for ``request``: a :class:`PlanCard` for a plan, an :class:`ApprovalCard` for any other call."""
    if request.tool == PLAN_TOOL:
        return PlanCard(request, respond, answered_by)
    return ApprovalCard(request, respond, answered_by, check=check, estimate=estimate)
