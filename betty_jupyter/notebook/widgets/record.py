"""What a saved notebook keeps of a widget: its record beside its view, and the record alone once settled.

A widget's view lives only as long as its kernel. After a restart JupyterLab shows "Error
displaying widget: model not found" for every output that still names a widget, even when
that output carries text/html too (the widget view always wins). So every widget Betty
shows in its own output publishes, with its view, a static record — text/html and
text/plain saying what it shows — and once it is settled (a card answered, a call done, a
job ended, a chat finished) it replaces its output with the record alone, through a display
update: the saved notebook keeps who decided what, and what came of it. A widget that never
settles (a queue table, the GPU calculator) keeps its view in the open notebook, and the
server saves the file with its record alone (:mod:`betty_jupyter.saved_records`), so a
notebook reopened after a restart shows the table or the estimate, not an error.

A widget shown inside another (a card in a chat) has no output of its own: it tells the
widget around it (:meth:`Recorded.recorded_in`), whose record holds the inner one's.
The record is refreshed only at such milestones, not at every change: each update
redraws the widget's view in the browser.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, NamedTuple, cast

import ipywidgets as widgets
from IPython.display import display, update_display

from ...safe_text import visible
from ...saved_records import WIDGET_VIEW

_lock = threading.RLock()


class Record(NamedTuple):
    """What a widget shows, as a saved notebook keeps it: ``html`` built through the escaping helpers, and ``text``."""

    html: str
    text: str

    @staticmethod
    def joined(records: "list[Record]") -> "Record":
        """Several records one after the other."""
        return Record("".join(r.html for r in records), "\n".join(r.text for r in records if r.text))


class Recorded:
    """A widget that leaves its record in the output it is shown in. Put it before the ipywidgets class.

    Subclasses say what they show (:meth:`record`) and when nothing more will change
    (:attr:`settled`), and call :meth:`rerecord` when the record must catch up (a milestone).
    """

    _outputs: tuple[str, ...] = ()
    _within: "Recorded | None" = None

    def record(self) -> Record:
        """What the widget shows now."""
        raise NotImplementedError

    @property
    def settled(self) -> bool:
        """Whether nothing more will change: its output then keeps the record alone, without the view."""
        return False

    @property
    def shown(self) -> bool:
        """Whether it was shown in an output of its own."""
        return bool(self._outputs)

    def recorded_in(self, outer: "Recorded") -> None:
        """This widget is shown inside ``outer``: its milestones update ``outer``'s record."""
        self._within = outer

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The record as HTML (in a ``betty-record`` element) and as text (under the widget's one-line summary),
        beside the widget's view until it is settled."""
        record = self.record()
        bundle: dict[str, Any] = {}
        if not self.settled:
            bundle = {k: v for k, v in cast(Any, super())._repr_mimebundle_(**kwargs).items() if k == WIDGET_VIEW}
        record_html = record.html
        bundle.update({"text/html": f"<div class='betty-record'>{record_html}</div>",  # saved_records.RECORD_START
                       "text/plain": visible(repr(self)) + (f"\n{record.text}" if record.text else "")})
        return bundle

    def _ipython_display_(self) -> None:
        """Shown in a new output of the running cell, which :meth:`rerecord` keeps up to date."""
        display_id = f"betty-{uuid.uuid4().hex}"
        with _lock:
            self._outputs = (*self._outputs, display_id)
            display(self._repr_mimebundle_(), raw=True, display_id=display_id)

    def rerecord(self) -> None:
        """Bring every output showing this widget (or the widget around it) up to date with its record."""
        with _lock:
            if self._outputs:
                bundle = self._repr_mimebundle_()
                for display_id in self._outputs:
                    update_display(bundle, raw=True, display_id=display_id)
            if self._within is not None:
                self._within.rerecord()


class Note(Recorded, widgets.HTML):
    """A piece of text shown as ``html`` (escaped by whoever built it), with ``text``, the same in plain words."""

    def __init__(self, html: str, text: str) -> None:
        super().__init__(html)
        self.text = text

    @property
    def settled(self) -> bool:
        """Always: a note has nothing live in it."""
        return True

    def record(self) -> Record:
        """The line itself."""
        return Record(self.value, visible(self.text))
