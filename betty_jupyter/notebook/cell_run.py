"""``%%betty run``: the cell as a Slurm job, followed from the kernel without blocking it.

The magic stages the cell and its ``--in`` values (:func:`~..cluster.cell_job.stage`), asks for
``cell_run`` (tier 2: its card shows the script and what crosses the wire), and returns a
:class:`CellRun` as ``_``. Once the job is submitted a thread of its own follows it with
``cell_run_status`` (soon after it starts, then every :data:`POLL_SECONDS`), showing its state and the end of its output in
the cell; when it ends the printed output, the figures and the ``--out`` values come back (the
values into the notebook's namespace). ``_.result()`` waits for that when the person wants to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, MutableMapping

from IPython.display import display

from ..compute.cell_job import (
    MAX_FIGURE_BYTES, MAX_OUT_BYTES, CellResult, StagedRun, check_back, unpack_outputs,
)
from ..errors import BettyError, CellRunError, UsageError

if TYPE_CHECKING:
    from ..agent.models import ToolOutcome
    from .session import Call

POLL_SECONDS = 2.0
"""How often a running cell's job is looked at."""
FIRST_LOOK_SECONDS = 0.25
"""How soon a job is looked at again after a change (submitted, started); each later look waits twice as long, up
to :data:`POLL_SECONDS`."""
_FAILED_LOOKS = 5


@dataclass
class CellOutcome:
    """What a cell run brought back: its output, its figures (PNG bytes), its ``--out`` values."""

    state: str
    stdout: str = ""
    stderr: str = ""
    figures: list[bytes] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """The cell's traceback when it raised (untrusted text)."""
    problems: list[str] = field(default_factory=list)
    """Why a ``--out`` value did not come back, one line each."""


Poll = Callable[[str, str], dict[str, Any]]
"""``(run token, job id)`` → the ``cell_run_status`` data."""


class CellRun:
    """``_`` of a ``%%betty run`` cell: ``.status``, ``.result(timeout=None)``, ``.cancel()``."""

    def __init__(self, call: "Call", run: StagedRun, outs: tuple[str, ...], namespace: MutableMapping[str, Any],
                 poll: Poll, cancel: Callable[[str], Any], view: Any, every: float = POLL_SECONDS) -> None:
        """``view``: what shows it in the cell (its card, then the followed job); ``cancel(job_id)``: the
        cancellation's card."""
        self.call, self.run, self.outs, self._namespace, self._view = call, run, outs, namespace, view
        self._poll, self._cancel, self._every = poll, cancel, every
        self.job_id: str | None = None
        self.state = "waiting for approval"
        self.outcome: CellOutcome | None = None
        self._ended = threading.Event()
        self._answered = threading.Event()
        """Set once the card is answered (here, in the side panel, or by its timeout)."""
        self._stop = threading.Event()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        """Called (from the following thread) with each look at the job, then with ``{"ended": outcome}``."""
        call.follow(self._on_call_event)
        call.future.add_done_callback(self._submitted_or_not)

    def __repr__(self) -> str:
        return f"<Betty cell run{' job ' + self.job_id if self.job_id else ''}: {self.status}>"

    def _ipython_display_(self) -> None:
        display(self._view)

    @property
    def status(self) -> str:
        """``waiting for approval``, ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``not submitted``…"""
        return self.state

    def result(self, timeout: float | None = None) -> CellOutcome:
        """Wait for the job to end and its results to come back; :class:`CellRunError` when the cell raised.

        Waiting blocks this cell (not the job): the card cannot be answered here meanwhile, so
        a run still waiting for approval in a notebook only it can answer is an error at once.
        """
        waits_for_card = self.call.asked.is_set() and not self._answered.is_set() and not self.call.future.done()
        if waits_for_card and not self.call.answerable_elsewhere:
            raise UsageError("the cell run waits for your approval: answer its card, then call .result() again")
        if not self._ended.wait(timeout):
            raise UsageError(f"job {self.job_id or '(not submitted yet)'} is still {self.state} after {timeout:g} s")
        assert self.outcome is not None
        if self.job_id is None:
            reason = "; ".join(self.outcome.problems) or "its card was not approved"
            raise UsageError(f"the cell run was not submitted: {reason}")
        if self.outcome.error:
            last = self.outcome.error.strip().splitlines()[-1] if self.outcome.error.strip() else "it raised"
            raise CellRunError(f"the cell raised on the cluster: {last[:300]} (the traceback is shown in the cell)",
                               self.outcome.error)
        return self.outcome

    def cancel(self) -> Any:
        """Cancel the job: ``scancel`` is tier 2, so this returns its approval card (shown in the cell)."""
        if self.job_id is None:
            raise UsageError("the cell run is not submitted yet: deny its card to stop it")
        if self._ended.is_set():
            raise UsageError(f"job {self.job_id} already ended ({self.state}); nothing to cancel")
        return self._cancel(self.job_id)

    def stop_following(self) -> None:
        """Stop looking at the job (it goes on on the cluster; nothing more comes back into this notebook)."""
        self._stop.set()

    # ----- following ---------------------------------------------------------------------------
    def _on_call_event(self, event: Any) -> None:
        from ..agent import events as ev  # lazy: pydantic, already loaded by the call that sends the event

        if isinstance(event, ev.ApprovalResolvedEvent):
            self._answered.set()

    def _submitted_or_not(self, future: Any) -> None:
        outcome: ToolOutcome | None = None if future.exception() else future.result()
        if outcome is None or not outcome.ok or not isinstance(outcome.data, dict):
            reason = "" if outcome is None else outcome.summary.strip().splitlines()[0] if outcome.summary else ""
            self._end(CellOutcome(state="not submitted", error=None, problems=[reason] if reason else []))
            return
        self.job_id = str(outcome.data["job_id"])
        self.state = "PENDING"
        threading.Thread(target=self._follow, name=f"betty-cell-run-{self.job_id}", daemon=True).start()

    def _follow(self) -> None:
        assert self.job_id is not None
        failures = looks = 0
        while not self._stop.is_set():
            try:
                look = self._poll(self.run.token, self.job_id)
            except BettyError as error:
                failures += 1
                self._tell({"problem": str(error)})
                if failures >= _FAILED_LOOKS:
                    self._end(CellOutcome(state=self.state, problems=[f"stopped following job {self.job_id}: {error}"]))
                    return
                self._stop.wait(self._every)
                continue
            # after a change (it started running), look again soon: a short job ends within a few seconds
            failures, looks = 0, 1 if look["state"] != self.state else looks + 1
            self.state = str(look["state"])
            self._tell(look)
            if look["finished"]:
                self._end(self._brought_back(look))
                return
            self._stop.wait(min(self._every, FIRST_LOOK_SECONDS * 2 ** (looks - 1)))
        self._end(CellOutcome(state=self.state, problems=[f"stopped following job {self.job_id}; it goes on on the "
                                                          "cluster (`%betty status` follows it)"]))

    def _brought_back(self, look: dict[str, Any]) -> CellOutcome:
        outcome = CellOutcome(state=str(look["state"]), stdout=str(look.get("out", "")),
                              stderr=str(look.get("err", "")))
        if not look.get("result"):
            outcome.problems.append(f"the job ended {look['state']} before the cell did: nothing came back")
            return outcome
        try:
            self._take(outcome, check_back(self.run))
        except BettyError as error:
            outcome.problems.append(str(error))
        except Exception as error:  # unpickling a value runs its classes' code: any failure is that value's
            outcome.problems.append(f"--out values could not be unpickled here ({type(error).__name__}: {error})")
        return outcome

    def _take(self, outcome: CellOutcome, result: CellResult) -> None:
        """What the run's own signature vouches for: its figures, and the ``--out`` values, only when asked for."""
        back = self.run.back
        outcome.error = result.error
        outcome.problems.extend(result.problems)
        outcome.figures = [back.read(name, MAX_FIGURE_BYTES) for name in result.figures if back.exists(name)]
        if self.outs and back.exists("outputs.pkl"):
            outcome.values = unpack_outputs(back.read("outputs.pkl", MAX_OUT_BYTES), self.outs)
            self._namespace.update(outcome.values)

    def _end(self, outcome: CellOutcome) -> None:
        self.outcome = outcome
        self.state = outcome.state
        self._ended.set()
        self._tell({"ended": outcome})

    def _tell(self, what: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            listener(what)


def outcome_summary(outcome: CellOutcome) -> str:
    """One line of what came back: ``COMPLETED; 1 figure; x, y came back``."""
    parts = [outcome.state]
    if outcome.figures:
        parts.append(f"{len(outcome.figures)} figure{'s' if len(outcome.figures) > 1 else ''}")
    if outcome.values:
        parts.append(f"{', '.join(outcome.values)} came back into the notebook")
    if outcome.error:
        parts.append("the cell raised (its traceback is below)")
    return "; ".join(parts)

