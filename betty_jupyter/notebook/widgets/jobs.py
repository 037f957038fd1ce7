"""The job table: the queue or the history, a page of rows at a time, sortable, filterable by state,
refreshable, with one cancel action for the person's own jobs on the page.

However many jobs there are, the table shows one page of rows: its HTML, its record and its
cancel choices grow with the page, not with the queue. Its output keeps the page as static
HTML and text too (with the total): as first shown, and again whenever a cancel started from
it is decided.

A table keeps its page, not every row read: the rows stay only while the person keeps the magic's
DataFrame, or while it is the newest table that read them itself (one table's rows at most); another
page, order or state filter of a table whose rows are gone reads the jobs again. So a notebook that
shows the queue many times holds what is on screen, not every queue it ever read.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Callable, Sequence

import ipywidgets as widgets

from ...cluster.parsing import job_count
from ...cluster.tables import readable, text_table
from ...errors import BettyError
from ...safe_text import html_text, terminal_line, visible
from .html import STATE_COLOURS
from .record import Note, Record, Recorded
from .rows import WHOLE_ROW, wrapping_row

if TYPE_CHECKING:
    import pandas as pd

Fetch = Callable[[], "pd.DataFrame"]
Cancel = Callable[[str], widgets.Widget]
INTERVALS = (("off", 0), ("every 15 s", 15), ("every 30 s", 30), ("every 60 s", 60), ("every 5 min", 300))
PAGE_ROWS = 50
"""How many rows one page of a job table shows."""
ALL_STATES = "(every state)"
"""The state filter's choice that shows every row."""
_AS_LISTED = "(as listed)"
_ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def _state_word(value: object) -> str:
    """A job's state without what follows it (``CANCELLED by 1000`` is ``CANCELLED``)."""
    return str(value).split(" ")[0]


def styled_html(frame: "pd.DataFrame", columns: Sequence[str], sort_by: str | None, ascending: bool) -> str:
    """``frame`` as an HTML table (durations as Slurm writes them), states coloured, sorted by ``sort_by``.

    Every header and cell goes through the one escaper; the same rows give the same HTML.
    """
    shown = frame
    if sort_by and sort_by in shown.columns:
        shown = shown.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
    if shown.empty:
        return "<i class='betty-empty'>no jobs</i>"
    table = readable(shown, columns)
    head = "".join(f"<th>{html_text(column)}</th>" for column in table.columns)
    state_at = list(table.columns).index("state") if "state" in table.columns else -1
    rows = []
    for values in table.itertuples(index=False):
        cells = []
        for at, value in enumerate(values):
            colour = STATE_COLOURS.get(_state_word(value)) if at == state_at else None
            if colour:
                cells.append(f'<td style="color: {html_text(colour)}; font-weight: bold">{html_text(value)}</td>')
            else:
                cells.append(f"<td>{html_text(value)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="betty-jobs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


_newest: "tuple[weakref.ref[JobTable], pd.DataFrame] | None" = None
"""The newest table that read its rows itself, and those rows: the only rows a table keeps on its own."""
_newest_lock = threading.Lock()


class JobTable(Recorded, widgets.VBox):
    """A live table of jobs, a page at a time; :attr:`frame` is every row last read, while kept (see above)."""

    def __init__(self, title: str, frame: "pd.DataFrame", columns: Sequence[str], fetch: Fetch,
                 mine: str | None = None, cancel: Cancel | None = None, page_rows: int = PAGE_ROWS) -> None:
        self.columns, self._fetch, self.title = list(columns), fetch, title
        self.mine, self._cancel, self.page_rows = mine, cancel, max(1, page_rows)
        self.page = 0
        self._rows: "Callable[[], pd.DataFrame | None]" = lambda: None
        self._count = job_count(frame)
        self._shown: "pd.DataFrame" = frame.iloc[0:0].copy()
        self._total = 0
        self.sort_by = widgets.Dropdown(options=[_AS_LISTED, *self.columns], value=_AS_LISTED,
                                        description="sort by", style={"description_width": "initial"},
                                        layout=widgets.Layout(width="auto"))
        # Buttons as wide as their labels, and room for each dropdown's label: nothing shows cut off.
        self.descending = widgets.ToggleButton(value=False, description="descending", icon="sort-amount-desc",
                                               layout=widgets.Layout(width="auto"))
        self.state = widgets.Dropdown(options=[ALL_STATES], value=ALL_STATES, description="state",
                                      style={"description_width": "initial"}, layout=widgets.Layout(width="auto"))
        self.state.add_class("betty-state-filter")
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh", layout=widgets.Layout(width="auto"))
        self.refresh_button.add_class("betty-refresh")
        self.auto = widgets.Dropdown(options=INTERVALS, value=0, description="auto-refresh",
                                     style={"description_width": "initial"}, layout=widgets.Layout(width="auto"))
        self.auto.add_class("betty-auto-refresh")
        self.updated = widgets.HTML("")
        self.previous = widgets.Button(description="previous", icon="chevron-left", layout=widgets.Layout(width="auto"))
        self.previous.add_class("betty-page-previous")
        self.next = widgets.Button(description="next", icon="chevron-right", layout=widgets.Layout(width="auto"))
        self.next.add_class("betty-page-next")
        self.position = widgets.HTML("")
        self.position.add_class("betty-page-position")
        # A table wider than a narrow notebook scrolls sideways inside its own box, not cut off at the edge.
        self.table = widgets.HTML("", layout=widgets.Layout(overflow="auto", max_width="100%"))
        self.table.add_class("betty-job-table")
        # A job's name may be long: the dropdown narrows to the notebook's width rather than spill past it.
        self.cancel_job = widgets.Dropdown(options=[], description="your job", style={"description_width": "initial"},
                                           layout=widgets.Layout(width="auto", max_width=WHOLE_ROW))
        self.cancel_job.add_class("betty-cancel-job")
        self.cancel_button = widgets.Button(description="Cancel…", icon="stop", button_style="danger",
                                            layout=widgets.Layout(width="auto"))
        self.cancel_button.add_class("betty-cancel")
        self.own = wrapping_row([])
        self.actions = widgets.VBox([])
        self._timer_stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._render_lock = threading.RLock()
        for control in (self.sort_by, self.descending, self.state):
            control.observe(lambda _: self.render(page=0), "value")
        self.previous.on_click(lambda _: self.render(page=self.page - 1))
        self.next.on_click(lambda _: self.render(page=self.page + 1))
        self.refresh_button.on_click(lambda _: self.refresh())
        self.cancel_button.on_click(lambda _: self._start_cancel(self.cancel_job.value))
        self.auto.observe(lambda change: self._auto_changed(int(change["new"])), "value")
        heading = widgets.HTML(f"<b>{html_text(title)}</b>")
        heading.add_class("betty-job-title")
        bar = wrapping_row([heading, self.refresh_button, self.auto, self.sort_by, self.descending, self.state,
                            self.updated])
        bar.add_class("betty-job-toolbar")
        pages = wrapping_row([self.previous, self.next, self.position])
        super().__init__([bar, pages, self.table, self.own, self.actions])
        self.add_class("betty-job-table-widget")
        self._keep(frame)
        self._render(frame)

    def __repr__(self) -> str:
        return f"<Betty job table: {self.title}, {self._count} job(s)>"

    @property
    def frame(self) -> "pd.DataFrame | None":
        """Every row last read, while someone keeps them (None once only the page shown is left)."""
        return self._rows()

    def kept_with(self, frame: "pd.DataFrame") -> None:
        """Page through ``frame`` (the same rows, as the person's DataFrame) for as long as the person keeps it."""
        try:
            self._rows = weakref.ref(frame)
        except TypeError:  # not a DataFrame that can be referred to weakly: the newest table's own rows
            return

    def _keep(self, frame: "pd.DataFrame") -> None:
        """Keep ``frame``, read by this table, as the newest table's rows (another table's go)."""
        global _newest
        me = weakref.ref(self)
        with _newest_lock:
            _newest = (me, frame)

        def newest() -> "pd.DataFrame | None":
            kept = _newest
            return kept[1] if kept is not None and kept[0] is me else None

        self._rows = newest

    def record(self) -> Record:
        """The title, the page shown as read last (with the total), and the cancels started from it."""
        position = self._position_text()
        table = text_table(self._shown, self.columns) if not self._shown.empty else "no jobs"
        head = Record(f"<b>{html_text(self.title)}</b> <small>{html_text(position)}</small>",
                      f"{visible(self.title)} — {position}")
        body = Record(str(self.table.value), table)
        actions = [view.record() for view in self.actions.children if isinstance(view, Recorded)]
        return Record.joined([head, body, *actions])

    def _position_text(self) -> str:
        if not self._total:
            return "no rows"
        first = self.page * self.page_rows
        return f"rows {first + 1:,}–{first + len(self._shown):,} of {self._total:,}"

    def _filtered(self, frame: "pd.DataFrame") -> "pd.DataFrame":
        """``frame``'s rows in the chosen state and order."""
        if self.state.value != ALL_STATES and "state" in frame.columns:
            frame = frame[frame["state"].astype(str).str.split(" ").str[0] == self.state.value]
        sort_by = None if self.sort_by.value == _AS_LISTED else str(self.sort_by.value)
        if sort_by and sort_by in frame.columns:
            frame = frame.sort_values(sort_by, ascending=not self.descending.value, kind="stable", na_position="last")
        return frame

    def render(self, page: int | None = None) -> None:
        """Show one page of the rows (``page``, or the one shown) in the chosen state and order, and the person's
        own active jobs on it as the cancel action's choices; rows no longer kept are read again first."""
        frame = self.frame
        if frame is None:
            self.refresh(page)
        else:
            self._render(frame, page)

    def _render(self, frame: "pd.DataFrame", page: int | None = None) -> None:
        with self._render_lock:
            self._count = job_count(frame)
            states = [ALL_STATES]
            if "state" in frame.columns:
                states += sorted({_state_word(s) for s in frame["state"].astype(str).unique()})
            if list(self.state.options) != states:
                with self.state.hold_trait_notifications():
                    chosen = self.state.value if self.state.value in states else ALL_STATES
                    self.state.options, self.state.value = states, chosen
            rows = self._filtered(frame)
            self._total = len(rows)
            last = max(0, (self._total - 1) // self.page_rows)
            self.page = min(max(0, self.page if page is None else page), last)
            start = self.page * self.page_rows
            self._shown = rows.iloc[start:start + self.page_rows].copy()  # a copy: a slice keeps every row
            self.table.value = styled_html(self._shown, self.columns, None, True)
            self.position.value = f"<small>{html_text(self._position_text())}</small>"
            self.previous.disabled, self.next.disabled = self.page == 0, self.page >= last
            self.updated.value = f"<small>read {html_text(time.strftime('%H:%M:%S'))}</small>"
            own = self._own_active(self._shown)
            chosen = self.cancel_job.value
            self.cancel_job.options = [(f"{j['job_id']} {terminal_line(j['name'])} ({j['state']})", j["job_id"])
                                       for j in own]
            ids = [job["job_id"] for job in own]
            # the job chosen stays chosen while it is on the page; otherwise the page's first
            self.cancel_job.value = chosen if chosen in ids else (ids[0] if ids else None)
            self.own.children = [self.cancel_job, self.cancel_button] if own else []

    def _own_active(self, rows: "pd.DataFrame") -> list[dict[str, str]]:
        """The person's own jobs among ``rows`` that a cancel can still stop."""
        if self._cancel is None or self.mine is None or rows.empty or "user" not in rows.columns:
            return []
        own = rows[(rows["user"].astype(str) == self.mine)
                   & rows["state"].astype(str).str.split(" ").str[0].isin(_ACTIVE)]
        return [{"job_id": str(r["job_id"]), "name": str(r.get("name", "")), "state": str(r["state"])}
                for _, r in own.iterrows()]

    def _start_cancel(self, job_id: str | None) -> None:
        if self._cancel is None or not job_id:
            return
        view: widgets.Widget
        if job_id not in {job["job_id"] for job in self._own_active(self._shown)}:
            text = f"job {job_id} is not one of your active jobs on this page"
            view = Note(f"<span style='color:var(--jp-error-color1)'>✗ {html_text(text)}</span>", f"✗ {text}")
        else:
            try:
                view = self._cancel(job_id)
            except BettyError as error:
                view = Note(f"<span style='color:var(--jp-error-color1)'>✗ {html_text(str(error))}</span>", f"✗ {error}")
        if isinstance(view, Recorded):
            view.recorded_in(self)
        self.actions.children = [*self.actions.children, view]

    def refresh(self, page: int | None = None) -> None:
        """Read the jobs again (in a thread, so the kernel stays free), then show ``page`` (or the one shown)."""
        self.refresh_button.disabled = True
        self.updated.value = "<small>reading…</small>"

        def work() -> None:
            try:
                frame = self._fetch()
                self._keep(frame)
                self._render(frame, page)
            except BettyError as error:
                self.updated.value = f"<small style='color:var(--jp-error-color1)'>{html_text(str(error))}</small>"
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
