"""Live job status: state, elapsed time and the log's tail, kept current until the job ends."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable

import ipywidgets as widgets

from ...agent import events as ev
from ...errors import BettyError
from ...safe_text import html_text
from .html import pre_html, state_badge_html

if TYPE_CHECKING:
    from ...agent.events import AnyEvent
    from ...cluster.jobs import Job

ReadJob = Callable[[str], "Job"]
ReadLog = Callable[[str], str]
POLL_SECONDS = 10.0


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(max(seconds, 0))))


class LiveJob(widgets.VBox):
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
        super().__init__([self.head, self.tail], layout=widgets.Layout(border="1px solid #ddd", padding="4px"))
        self.add_class("betty-live-job")
        self.unfollow: Callable[[], None] = lambda: None
        """Stops the events this widget follows (set by whoever subscribed it)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._show()
        if read_job is not None and not job.state.finished:
            threading.Thread(target=self._follow, name=f"betty-live-{job.job_id}", daemon=True).start()
        elif read_log is not None:
            self._read_tail()

    def __repr__(self) -> str:
        return f"<Betty live job {self.job.job_id} ({self.job.name}): {self.job.state.value}>"

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
                self.head.value += f"<br><small style='color:#c62828'>{html_text(str(error))}</small>"
            self._show()
            self._read_tail()
            if self.job.state.finished:
                self.unfollow()
                return
            self._wake.wait(self.interval)
            self._wake.clear()

    def _read_tail(self) -> None:
        if self._read_log is None:
            return
        if self.job.state.value == "PENDING":
            self.tail.value = pre_html("(no log yet: the job has not started)", "betty-log-tail")
            return
        try:
            text = self._read_log(self.job.job_id)
        except BettyError as error:
            text = f"(log not readable: {error})"
        self.tail.value = pre_html(text or "(nothing written yet)", "betty-log-tail")

    def _show(self) -> None:
        job = self.job
        elapsed = job.elapsed.total_seconds() if job.elapsed is not None else None
        if elapsed is None and job.started is not None:
            now = datetime.now(job.started.tzinfo)
            elapsed = (now - job.started).total_seconds()
        parts = [f"<b>job {html_text(job.job_id)}</b> ({html_text(job.name)})", state_badge_html(job.state.value)]
        if elapsed is not None:
            parts.append(f"elapsed {_clock(elapsed)}")
        if job.partition:
            parts.append(f"partition {html_text(job.partition)}")
        if job.reason and not job.state.finished and job.reason != "None":
            parts.append(f"waiting: {html_text(job.reason)}")
        if job.state.finished and job.exit_code:
            parts.append(f"exit {html_text(job.exit_code)}")
        if self._read_job is not None and not job.state.finished:
            parts.append("<small class='betty-following'>following…</small>")
        self.head.value = " · ".join(parts)

    def close(self) -> None:
        """Stop following, then close."""
        self._stop.set()
        self._wake.set()
        self.unfollow()
        super().close()
