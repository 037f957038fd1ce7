"""Live job status: state, elapsed time and the log's tail, kept current until the job ends.

Its output keeps the job's line as static text too, and once the job has ended, that record alone.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable

import ipywidgets as widgets

from ...agent import events as ev
from ...errors import BettyError
from ...safe_text import html_text, visible
from .html import pre_html, state_badge_html
from .record import Record, Recorded

if TYPE_CHECKING:
    from ...agent.events import AnyEvent
    from ...cluster.jobs import Job

ReadJob = Callable[[str], "Job"]
ReadLog = Callable[[str], str]
POLL_SECONDS = 10.0


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(max(seconds, 0))))


class LiveJob(Recorded, widgets.VBox):
    """One job, followed: re-read on each ``job_update`` for it and every ``interval`` seconds until it ends.

    Without ``read_job`` it shows the job as it is, without following it.
    """

    def __init__(self, job: "Job", read_job: ReadJob | None, read_log: ReadLog | None,
                 interval: float = POLL_SECONDS) -> None:
        self.job, self._read_job, self._read_log = job, read_job, read_log
        self.interval = interval
        self.head = widgets.HTML("")
        self.head.add_class("betty-live-head")
        self.tail = widgets.HTML("")
        self.tail.add_class("betty-live-log")
        super().__init__([self.head, self.tail], layout=widgets.Layout(border="1px solid var(--jp-border-color2)", padding="4px"))
        self.add_class("betty-live-job")
        self.unfollow: Callable[[], None] = lambda: None
        """Stops the events this widget follows (set by whoever subscribed it)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._line = ""
        self._log = ""
        self._show()
        if read_job is not None and not job.state.finished:
            threading.Thread(target=self._follow, name=f"betty-live-{job.job_id}", daemon=True).start()
        elif read_log is not None:
            self._read_tail()

    def __repr__(self) -> str:
        return f"<Betty live job {self.job.job_id} ({self.job.name}): {self.job.state.value}>"

    @property
    def settled(self) -> bool:
        """The job ended (or it is shown as it was, not followed)."""
        return self._read_job is None or self.job.state.finished

    def record(self) -> Record:
        """The job's line and the log's tail, as shown now."""
        text = self._line + (f"\n{self._log}" if self._log else "")
        return Record(str(self.head.value) + str(self.tail.value), visible(text))

    def on_event(self, event: "AnyEvent") -> None:
        """A ``job_update`` for this job wakes the widget up at once."""
        if isinstance(event, ev.JobUpdateEvent) and event.payload.job_id == self.job.job_id:
            self._wake.set()

    def _follow(self) -> None:
        assert self._read_job is not None
        while not self._stop.is_set():
            try:
                self.job = self._read_job(self.job.job_id)
            except BettyError as error:
                self.head.value += f"<br><small style='color:var(--jp-error-color1)'>{html_text(str(error))}</small>"
            self._show()
            self._read_tail()
            if self.job.state.finished:
                self.unfollow()
                self.rerecord()
                return
            self._wake.wait(self.interval)
            self._wake.clear()

    def _read_tail(self) -> None:
        if self._read_log is None:
            return
        if self.job.state.value == "PENDING":
            self._log = "(no log yet: the job has not started)"
        else:
            try:
                self._log = self._read_log(self.job.job_id) or "(nothing written yet)"
            except BettyError as error:
                self._log = f"(log not readable: {error})"
        self.tail.value = pre_html(self._log, "betty-log-tail")

    def _show(self) -> None:
        job = self.job
        elapsed = job.elapsed.total_seconds() if job.elapsed is not None else None
        if elapsed is None and job.started is not None:
            now = datetime.now(job.started.tzinfo)
            elapsed = (now - job.started).total_seconds()
        facts = []
        if elapsed is not None:
            facts.append(f"elapsed {_clock(elapsed)}")
        if job.partition:
            facts.append(f"partition {job.partition}")
        if job.reason and not job.state.finished and job.reason != "None":
            facts.append(f"waiting: {job.reason}")
        if job.state.finished and job.exit_code:
            facts.append(f"exit code {job.exit_code}")
        following = self._read_job is not None and not job.state.finished
        self._line = " · ".join([f"job {job.job_id} ({job.name}) {job.state.value}", *facts])
        self.head.value = " · ".join([f"<b>job {html_text(job.job_id)}</b> ({html_text(job.name)})",
                                      state_badge_html(job.state.value), *(html_text(fact) for fact in facts),
                                      *(["<small class='betty-following'>following…</small>"] if following else [])])

    def close(self) -> None:
        """Stop following, then close."""
        self._stop.set()
        self._wake.set()
        self.unfollow()
        super().close()
