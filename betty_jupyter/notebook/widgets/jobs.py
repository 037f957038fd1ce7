"""The job table: the queue or the history, sortable, refreshable, with a cancel button per own job.

Its output keeps the table as static HTML and text too: as first shown, and again whenever a
cancel started from it is decided.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import TYPE_CHECKING, Callable, Sequence

import ipywidgets as widgets

from ...cluster.tables import readable, text_table
from ...errors import BettyError
from ...safe_text import html_text, visible
from .html import STATE_COLOURS
from .record import Note, Record, Recorded

if TYPE_CHECKING:
    import pandas as pd

Fetch = Callable[[], "pd.DataFrame"]
Cancel = Callable[[str], widgets.Widget]
INTERVALS = (("off", 0), ("every 15 s", 15), ("every 30 s", 30), ("every 60 s", 60), ("every 5 min", 300))
_ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def styled_html(frame: "pd.DataFrame", columns: Sequence[str], sort_by: str | None, ascending: bool) -> str:
    """``frame`` as an HTML table (durations as Slurm writes them), states coloured, sorted by ``sort_by``."""
    shown = frame
    if sort_by and sort_by in shown.columns:
        shown = shown.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
    if shown.empty:
        return "<i class='betty-empty'>no jobs</i>"
    table = readable(shown, columns)

    def colour(value: object) -> str:
        state = str(value).split(" ")[0]
        return f"color: {STATE_COLOURS[state]}; font-weight: bold" if state in STATE_COLOURS else ""

    # Styler writes values into the HTML as they are: every cell and header goes through the one escaper.
    # Its element ids come from the content, not at random, so the same table is the same HTML.
    uuid = hashlib.sha1(table.to_json().encode()).hexdigest()[:10]
    styler = table.style.set_uuid(uuid).hide(axis="index").format(html_text).format_index(html_text, axis=1)
    if "state" in table.columns:
        styler = styler.map(colour, subset=["state"])
    return str(styler.set_table_attributes('class="betty-jobs"').to_html())


class JobTable(Recorded, widgets.VBox):
    """A live table of jobs; ``frame`` holds the rows last read."""

    def __init__(self, title: str, frame: "pd.DataFrame", columns: Sequence[str], fetch: Fetch,
                 mine: str | None = None, cancel: Cancel | None = None) -> None:
        self.frame, self.columns, self._fetch, self.title = frame, list(columns), fetch, title
        self.mine, self._cancel = mine, cancel
        self.sort_by = widgets.Dropdown(options=["(as listed)", *self.columns], value="(as listed)",
                                        description="sort by", style={"description_width": "initial"},
                                        layout=widgets.Layout(width="auto"))
        # Buttons as wide as their labels, and room for each dropdown's label: nothing shows cut off.
        self.descending = widgets.ToggleButton(value=False, description="descending", icon="sort-amount-desc",
                                               layout=widgets.Layout(width="auto"))
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh", layout=widgets.Layout(width="auto"))
        self.refresh_button.add_class("betty-refresh")
        self.auto = widgets.Dropdown(options=INTERVALS, value=0, description="auto-refresh",
                                     style={"description_width": "initial"}, layout=widgets.Layout(width="auto"))
        self.auto.add_class("betty-auto-refresh")
        self.updated = widgets.HTML("")
        self.table = widgets.HTML("")
        self.table.add_class("betty-job-table")
        self.own = widgets.VBox([])
        self.actions = widgets.VBox([])
        self._timer_stop = threading.Event()
        self._timer: threading.Thread | None = None
        self.sort_by.observe(lambda _: self.render(), "value")
        self.descending.observe(lambda _: self.render(), "value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.auto.observe(lambda change: self._auto_changed(int(change["new"])), "value")
        bar = widgets.HBox([widgets.HTML(f"<b>{html_text(title)}</b>"), self.refresh_button, self.auto,
                            self.sort_by, self.descending, self.updated])
        super().__init__([bar, self.table, self.own, self.actions])
        self.add_class("betty-job-table-widget")
        self.render()

    def __repr__(self) -> str:
        return f"<Betty job table: {self.title}, {len(self.frame)} job(s)>"

    def record(self) -> Record:
        """The title, the table as read last, and the cancels started from it."""
        table = text_table(self.frame, self.columns) if not self.frame.empty else "no jobs"
        head = Record(f"<b>{html_text(self.title)}</b>", visible(self.title))
        body = Record(str(self.table.value), table)
        actions = [view.record() for view in self.actions.children if isinstance(view, Recorded)]
        return Record.joined([head, body, *actions])

    def render(self) -> None:
        """Show ``frame`` with the chosen order, and a cancel button per own active job."""
        sort_by = None if self.sort_by.value == "(as listed)" else str(self.sort_by.value)
        self.table.value = styled_html(self.frame, self.columns, sort_by, not self.descending.value)
        self.updated.value = f"<small>read {html_text(time.strftime('%H:%M:%S'))}</small>"
        self.own.children = [self._cancel_row(row) for row in self._own_active()]

    def _own_active(self) -> list[dict[str, str]]:
        if self._cancel is None or self.mine is None or self.frame.empty or "user" not in self.frame.columns:
            return []
        rows = self.frame[(self.frame["user"].astype(str) == self.mine)
                          & self.frame["state"].astype(str).str.split(" ").str[0].isin(_ACTIVE)]
        return [{"job_id": str(r["job_id"]), "name": str(r.get("name", "")), "state": str(r["state"])}
                for _, r in rows.iterrows()]

    def _cancel_row(self, job: dict[str, str]) -> widgets.Widget:
        button = widgets.Button(description=f"Cancel {job['job_id']}", icon="stop", button_style="danger",
                                layout=widgets.Layout(width="auto"))
        button.add_class("betty-cancel")
        button.on_click(lambda _: self._start_cancel(job["job_id"]))
        return widgets.HBox([button, widgets.HTML(f"{html_text(job['name'])} ({html_text(job['state'])})")])

    def _start_cancel(self, job_id: str) -> None:
        if self._cancel is None:
            return
        try:
            view = self._cancel(job_id)
        except BettyError as error:
            view = Note(f"<span style='color:#c62828'>✗ {html_text(str(error))}</span>", f"✗ {error}")
        if isinstance(view, Recorded):
            view.recorded_in(self)
        self.actions.children = [*self.actions.children, view]

    def refresh(self) -> None:
        """Read the jobs again (in a thread, so the kernel stays free)."""
        self.refresh_button.disabled = True
        self.updated.value = "<small>reading…</small>"

        def work() -> None:
            try:
                self.frame = self._fetch()
                self.render()
            except BettyError as error:
                self.updated.value = f"<small style='color:#c62828'>{html_text(str(error))}</small>"
            finally:
                self.refresh_button.disabled = False

        threading.Thread(target=work, name="betty-job-table", daemon=True).start()

    def _auto_changed(self, seconds: int) -> None:
        self._timer_stop.set()
        if seconds <= 0:
            return
        stop = threading.Event()
        self._timer_stop = stop

        def tick() -> None:
            while not stop.wait(seconds):
                self.refresh()

        self._timer = threading.Thread(target=tick, name="betty-auto-refresh", daemon=True)
        self._timer.start()

    def close(self) -> None:
        """Stop auto-refreshing, then close."""
        self._timer_stop.set()
        super().close()
