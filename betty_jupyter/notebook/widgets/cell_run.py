"""A ``%%betty run`` cell's job in the cell: its state, the end of its output, then what came back.

Everything the job printed, its traceback and its problems are untrusted text: each goes through
:func:`~.html.pre_html` (Betty's one escaping helper). Figures come back as PNG bytes and are shown
as images. The Cancel button asks for ``scancel`` through its approval card, shown below it.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ...errors import BettyError
from ...safe_text import html_text, visible
from ..cell_run import CellOutcome, outcome_summary
from .html import pre_html, state_badge_html
from .record import Record, Recorded

if TYPE_CHECKING:
    from ..cell_run import CellRun


class CellRunView(Recorded, widgets.VBox):
    """Follows one :class:`~..cell_run.CellRun`: live state and output tail, then output, figures and values.

    Its record (what a saved notebook keeps) is the state, the output and the traceback as escaped text and
    the figures as PNG images; once the job has ended and any cancel card is answered, the record alone.
    """

    def __init__(self, run: "CellRun") -> None:
        super().__init__([])
        self.add_class("betty-cell-run")
        self.run = run
        self.status = widgets.HTML(self._status_html(run.state, "submitted; waiting for the first look"))
        self.status.add_class("betty-cell-status")
        self.cancel = widgets.Button(description="Cancel job", button_style="warning", icon="stop",
                                    layout=widgets.Layout(width="auto"))
        self.cancel.add_class("betty-cell-cancel")
        self.cancel.on_click(lambda _: self._ask_cancel())
        self.out = widgets.HTML("")
        self.out.add_class("betty-cell-out")
        self.err = widgets.HTML("")
        self.err.add_class("betty-cell-err")
        self.figures = widgets.VBox([])
        self.figures.add_class("betty-cell-figures")
        self.cards = widgets.VBox([])
        self.children = [self.status, self.cancel, self.out, self.err, self.figures, self.cards]
        self._state = run.state
        run.listeners.append(self.on_look)
        if run.outcome is not None:
            self.on_look({"ended": run.outcome})

    def __repr__(self) -> str:
        return repr(self.run)

    @property
    def settled(self) -> bool:
        """The job has ended, what it brought back is shown, and a cancel card (if any) is answered."""
        return self.run.outcome is not None and all(
            card.settled for card in self.cards.children if isinstance(card, Recorded))

    def record(self) -> Record:
        """The state, the output and traceback as text, the figures as images."""
        outcome = self.run.outcome
        pictures = "".join(f"<img src='{html_text('data:image/png;base64,' + base64.b64encode(png).decode())}'>"
                           for png in (outcome.figures if outcome else []))
        parts = [self.status.value, self.out.value, self.err.value, pictures,
                 *(str(child.value) for child in self.figures.children if isinstance(child, widgets.HTML))]
        cards = [card.record() for card in self.cards.children if isinstance(card, Recorded)]
        text = [visible(repr(self.run)), outcome.stdout if outcome else "", outcome.error or "" if outcome else ""]
        return Record.joined([Record("".join(parts), "\n".join(t for t in text if t)), *cards])

    def _status_html(self, state: str, line: str) -> str:
        job = f"job {self.run.job_id} " if self.run.job_id else ""
        return f"<div>{html_text(job)}{state_badge_html(state)} <small>{html_text(line)}</small></div>"

    def on_look(self, look: dict[str, Any]) -> None:
        """One look at the job (from the following thread), or ``{"ended": outcome}``."""
        if "ended" in look:
            self._ended(look["ended"])
        elif "problem" in look:
            self.status.value = self._status_html(self.run.state, f"could not look at the job: {look['problem']}")
        else:
            self.status.value = self._status_html(str(look["state"]), str(look.get("line", "")))
            self._tails(str(look.get("out", "")), str(look.get("err", "")))
            if look["state"] != self._state:  # a milestone: the saved notebook's record catches up
                self._state = str(look["state"])
                self.rerecord()

    def _tails(self, out: str, err: str) -> None:
        self.out.value = pre_html(out, "betty-pre betty-cell-stdout") if out else ""
        self.err.value = pre_html(err, "betty-pre betty-cell-stderr") if err else ""

    def _ended(self, outcome: CellOutcome) -> None:
        self.cancel.disabled = True
        self.cancel.layout.display = "none"
        self.status.value = self._status_html(outcome.state, outcome_summary(outcome))
        self._tails(outcome.stdout, outcome.stderr)
        images: list[widgets.Widget] = [widgets.Image(value=png, format="png") for png in outcome.figures]
        notes = [*outcome.problems]
        if outcome.error:
            images.append(widgets.HTML(pre_html(outcome.error, "betty-pre betty-cell-traceback")))
        if notes:
            images.append(widgets.HTML(pre_html("\n".join(notes), "betty-pre betty-cell-problems")))
        self.figures.children = images
        self.rerecord()

    def _ask_cancel(self) -> None:
        try:
            card = self.run.cancel()
        except BettyError as error:
            self.cards.children = [widgets.HTML(f"<small style='color:var(--jp-error-color1)'>{html_text(str(error))}</small>")]
            return
        if isinstance(card, Recorded):
            card.recorded_in(self)
        self.cards.children = [card]
