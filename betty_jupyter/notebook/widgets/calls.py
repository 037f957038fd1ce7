"""A person's call in a cell: its approval card while it waits, then what it did."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable

import ipywidgets as widgets

from ...agent import events as ev
from ...errors import BettyError
from ...safe_text import html_text
from .approval import ApprovalCard, Respond
from .edit import Check

if TYPE_CHECKING:
    from ...agent.events import AnyEvent
    from ...agent.models import ToolOutcome
    from ..session import Call

Extra = Callable[["ToolOutcome"], "list[widgets.Widget]"]


def outcome_line(outcome: "ToolOutcome") -> str:
    """✓ or ✗ and the summary's first lines, as HTML."""
    mark = "✓" if outcome.ok else "✗"
    colour = "#2e7d32" if outcome.ok else "#c62828"
    lines = outcome.summary.strip().splitlines() or [""]
    more = "" if len(lines) <= 6 else f"<br><i>… {len(lines) - 6} more lines</i>"
    body = "<br>".join(html_text(line) for line in lines[:6])
    return f"<div class='betty-outcome' style='color:{colour}'>{mark} {body}{more}</div>"


class CallView(widgets.VBox):
    """Follows one :class:`Call`: shows its card when it asks, its outcome when it ends."""

    def __init__(self, call: "Call", respond: Respond, extra: Extra | None = None, check: Check | None = None) -> None:
        super().__init__([])
        self.add_class("betty-call")
        self.call, self._respond, self._extra, self._check = call, respond, extra, check
        self.card: ApprovalCard | None = None
        self.status = widgets.HTML(f"<i>{html_text(call.tool)}: waiting for your approval…</i>")
        self._lock = threading.Lock()
        self.children = [self.status]
        call.follow(self._on_event)
        if call.approval is not None:
            self._show_card()
        call.future.add_done_callback(self._done)

    def __repr__(self) -> str:
        return repr(self.call)

    def _on_event(self, event: "AnyEvent") -> None:
        if isinstance(event, ev.ApprovalRequestEvent):
            self._show_card()
        elif self.card is not None:
            self.card.on_event(event)

    def _show_card(self) -> None:
        with self._lock:
            if self.card is not None or self.call.approval is None:
                return
            self.card = ApprovalCard(self.call.approval, self._respond, check=self._check)
            self.children = [self.card, self.status]

    def _done(self, future: "Future[ToolOutcome]") -> None:
        error = future.exception()
        if error is not None:
            self.status.value = f"<div class='betty-outcome' style='color:#c62828'>✗ {html_text(str(error))}</div>"
            return
        outcome = future.result()
        self.status.value = outcome_line(outcome)
        if self._extra is not None and outcome.ok:
            # This runs on the thread that finished the call (Betty's loop): build the rest elsewhere.
            threading.Thread(target=self._add_extra, args=(outcome,), name="betty-call-view", daemon=True).start()

    def _add_extra(self, outcome: "ToolOutcome") -> None:
        assert self._extra is not None
        try:
            more = self._extra(outcome)
        except BettyError as error:
            more = [widgets.HTML(f"<small style='color:#c62828'>{html_text(str(error))}</small>")]
        self.children = [*self.children, *more]
