"""A person's call in a cell: its approval card while it waits, then what it did.

Shown in its own output, the call keeps a record there once it is done (the card's
decision and the outcome); what follows it (a submitted job, followed live) gets an
output of its own just below, so the record of the decision never waits for the job.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable

import ipywidgets as widgets

from ...agent import events as ev
from ...agent.vocabulary import Decision
from ...errors import BettyError
from ...safe_text import html_text, visible
from .approval import ApprovalCard, Respond, StartEstimate
from .edit import Check
from .record import Note, Record, Recorded

if TYPE_CHECKING:
    from ...agent.events import AnyEvent
    from ...agent.models import ToolOutcome
    from ..session import Call

Extra = Callable[["ToolOutcome"], "list[widgets.Widget]"]
_GOES_ON = {Decision.APPROVED, Decision.APPROVED_FOR_SESSION, Decision.EDITED}
SHOWN_LINES = 6
"""How many lines of an outcome's summary a call shows."""


def outcome_line(outcome: "ToolOutcome") -> str:
    """✓ or ✗ and the summary's first lines, as HTML."""
    mark = "✓" if outcome.ok else "✗"
    colour = "var(--jp-success-color1)" if outcome.ok else "var(--jp-error-color1)"
    lines = outcome.summary.strip().splitlines() or [""]
    more = "" if len(lines) <= SHOWN_LINES else f"<br><i>… {len(lines) - SHOWN_LINES} more lines</i>"
    body = "<br>".join(html_text(line) for line in lines[:SHOWN_LINES])
    return f"<div class='betty-outcome' style='color:{colour}'>{mark} {body}{more}</div>"


def outcome_text(outcome: "ToolOutcome") -> str:
    """✓ or ✗ and the summary's first lines, as plain text."""
    lines = outcome.summary.strip().splitlines() or [""]
    more = [] if len(lines) <= SHOWN_LINES else [f"… {len(lines) - SHOWN_LINES} more lines"]
    return visible("\n".join([f"{'✓' if outcome.ok else '✗'} {lines[0]}", *lines[1:SHOWN_LINES], *more]))


class Followup(Recorded, widgets.VBox):
    """Where what follows a call appears (the job it submitted, followed live), in an output of its own."""

    def __repr__(self) -> str:
        return "<Betty what follows the call>"

    def fill(self, items: "list[widgets.Widget]") -> None:
        """Show ``items``; their milestones update this output's record."""
        for item in items:
            if isinstance(item, Recorded):
                item.recorded_in(self)
        self.children = items
        self.rerecord()

    @property
    def settled(self) -> bool:
        """Empty, or everything in it settled."""
        return all(item.settled for item in self.children if isinstance(item, Recorded))

    def record(self) -> Record:
        """The records of what it holds."""
        return Record.joined([item.record() for item in self.children if isinstance(item, Recorded)])


class CallView(Recorded, widgets.VBox):
    """Follows one :class:`Call`: shows its card when it asks, its outcome when it ends."""

    def __init__(self, call: "Call", respond: Respond, extra: Extra | None = None, check: Check | None = None,
                 estimate: StartEstimate | None = None) -> None:
        """``check`` and ``estimate`` go to the card (see :class:`ApprovalCard`)."""
        super().__init__([])
        self.add_class("betty-call")
        self.call, self._respond, self._extra, self._check = call, respond, extra, check
        self._estimate = estimate
        self.card: ApprovalCard | None = None
        self.followup = Followup()
        self._status_text = f"{call.tool}: waiting for your approval…"
        self.status = widgets.HTML(f"<i>{html_text(self._status_text)}</i>")
        self._lock = threading.Lock()
        self.children = [self.status]
        call.follow(self._on_event)
        if call.approval is not None:
            self._show_card()
        call.future.add_done_callback(self._done)

    def __repr__(self) -> str:
        return repr(self.call)

    @property
    def settled(self) -> bool:
        """Done: the outcome known and the card (if any) showing who answered it."""
        return self.call.future.done() and (self.card is None or self.card.decision is not None)

    def record(self) -> Record:
        """The card's record (if it asked), then how the call stands or what it did."""
        status = Record(str(self.status.value), visible(self._status_text))
        return Record.joined([self.card.record(), status] if self.card is not None else [status])

    def _ipython_display_(self) -> None:
        """The call in its output, and below it an output for what follows it."""
        super()._ipython_display_()
        if self._extra is not None:
            self.followup._ipython_display_()

    def _on_event(self, event: "AnyEvent") -> None:
        if isinstance(event, ev.ApprovalRequestEvent):
            self._show_card()
        elif self.card is not None:
            self.card.on_event(event)

    def _show_card(self) -> None:
        with self._lock:
            if self.card is not None or self.call.approval is None:
                return
            self.card = ApprovalCard(self.call.approval, self._respond, check=self._check, estimate=self._estimate)
            self.card.recorded_in(self)
            self.children = [self.card, self.status]

    def rerecord(self) -> None:
        """Once the card lets the call go on, the call runs: say so before the record catches up."""
        if self.card is not None and self.card.decision in _GOES_ON and not self.call.future.done():
            self._set_status(f"{self.call.tool}: running…", f"<i>{html_text(self.call.tool)}: running…</i>")
        super().rerecord()

    def _set_status(self, text: str, html: str) -> None:
        self._status_text, self.status.value = text, html

    def _done(self, future: "Future[ToolOutcome]") -> None:
        error = future.exception()
        if error is not None:
            self._set_status(f"✗ {error}", f"<div class='betty-outcome' style='color:var(--jp-error-color1)'>✗ {html_text(str(error))}</div>")
        else:
            outcome = future.result()
            self._set_status(outcome_text(outcome), outcome_line(outcome))
            if self._extra is not None and outcome.ok:
                # This runs on the thread that finished the call (Betty's loop): build the rest elsewhere.
                threading.Thread(target=self._add_extra, args=(outcome,), name="betty-call-view", daemon=True).start()
        self.rerecord()

    def _add_extra(self, outcome: "ToolOutcome") -> None:
        assert self._extra is not None
        try:
            more = self._extra(outcome)
        except BettyError as error:
            more = [Note(f"<small style='color:var(--jp-error-color1)'>{html_text(str(error))}</small>", str(error))]
        if self.followup.shown:
            self.followup.fill(more)
        else:
            self.children = [*self.children, *more]
