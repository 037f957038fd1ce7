"""Betty's region of an experiment notebook: the output of its status cell (tagged ``betty-status``).

It is the only part of a notebook Betty rewrites after recording it, and never while the
notebook is open in JupyterLab (:mod:`.editors`): then the side panel puts the same line into
the open document and the person's next save writes it. The watcher, ``betty watch`` and
``betty experiments repair`` all go through :func:`write_status`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Collection

from ..errors import ExperimentError
from . import content
from .editors import OpenNotebooks
from .ledger import REBUILT, Experiment, Ledger, Tracked
from .notebook_file import Notebook, read_notebook, read_notebook_text, stream_output, write_notebook
from .workspace import Workspace

_STATE = re.compile(r"job (?P<job>\S+) (?:\(.*\) )?on .+?: (?P<state>[A-Z_]+)\b")
"""The first line of the status cell's output: Betty's own (``job 42 on dev: COMPLETED · …``) or the one running the
cell prints (``job 42 (name) on dev: COMPLETED — …``)."""


class Outcome(enum.Enum):
    """What became of one status line Betty meant to write."""

    WRITTEN = "written"
    OPEN = "open in JupyterLab"
    MISSING = "no notebook"


def status_cells(book: Notebook) -> list[dict[str, Any]]:
    """The notebook's status cells (one, unless the person copied it)."""
    return [cell for cell in book["cells"] if content.STATUS_TAG in cell.get("metadata", {}).get("tags", [])]


def shown_state(book: Notebook, experiment: Experiment) -> str | None:
    """The job state the notebook's status cell shows (None when it shows none: not run, not written yet)."""
    for cell in status_cells(book):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            text = "".join(text) if isinstance(text, list) else text
            match = _STATE.match(text.strip().partition("\n")[0])
            if match and match["job"] == experiment.job_id:
                return match["state"]
    return None


def write_status(workspace: Workspace, experiment: Experiment, line: str,
                 open_now: Collection[str] | None = None) -> Outcome:
    """Put ``line`` into the file's status cell, unless the notebook is open in JupyterLab right now.

    ``open_now``: the notebooks open a moment ago (:meth:`.OpenNotebooks.open_now`), when the caller asked
    once for many; a batch that renames the file later asks again just before (see the watcher)."""
    path = workspace.root / experiment.notebook
    if not path.exists():
        return Outcome.MISSING
    if (experiment.notebook in open_now if open_now is not None
            else OpenNotebooks(workspace.ledger_path).is_open(experiment.notebook)):
        return Outcome.OPEN
    book, stored = read_notebook_text(path)
    cells = [cell for cell in status_cells(book) if not _says(cell, line)]
    if not cells:
        return Outcome.WRITTEN  # the file says it already: left as it is
    for cell in cells:
        cell["outputs"] = [stream_output(line + "\n")]
    write_notebook(path, book, changed=cells, stored=stored)
    return Outcome.WRITTEN


def _says(cell: dict[str, Any], line: str) -> bool:
    """Whether the status cell's output is ``line`` alone, as Betty writes it."""
    outputs = cell.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != 1 or not isinstance(outputs[0], dict):
        return False
    text = outputs[0].get("text")
    text = "".join(text) if isinstance(text, list) and all(isinstance(part, str) for part in text) else text
    return outputs[0] == {**stream_output(""), "text": outputs[0].get("text")} and text == line + "\n"


@dataclass(frozen=True)
class StatusCheck:
    """A notebook whose file showed another state than its job's recorded one, and what Betty did about it."""

    experiment: Experiment
    state: str
    """The job's state as the ledger records it."""
    shown: str | None
    """What the notebook's file showed (None: no state)."""
    outcome: Outcome

    def line(self) -> str:
        """One line for a person."""
        was = self.shown or "no state"
        head = f"job {self.experiment.job_id} ({self.experiment.slug}): "
        if self.outcome is Outcome.OPEN:
            return (head + f"the notebook is open in JupyterLab and its file still says {was}, not {self.state}; "
                    "Betty's panel has put the status in the open notebook: save it there "
                    "(or close it and Betty writes the file)")
        return head + f"notebook's status brought up to {self.state} (the file said {was})"

    def record(self) -> dict[str, Any]:
        """The same as data, for ``--json``."""
        return {"job_id": self.experiment.job_id, "experiment": self.experiment.slug,
                "notebook": self.experiment.notebook, "state": self.state, "notebook_said": self.shown,
                "outcome": self.outcome.value}


def expected_line(ledger: Ledger, tracked: Tracked) -> str:
    """The line Betty's status cell should say now: the watcher's last one, when it says the recorded state."""
    line = ledger.notebook_status(tracked.experiment.slug)
    match = _STATE.match(line) if line else None
    if line and match and match["state"] == tracked.state:
        return line
    return content.status_text(tracked.experiment, None, tracked.state)


def bring_up_to_date(workspace: Workspace, ledger: Ledger, tracked: Tracked) -> StatusCheck | None:
    """Write the recorded state into a notebook whose file shows another (not while it is open); None when current
    or when there is no notebook yet (it stays behind, if it was).

    Only the status cell's output changes: every other cell is written back as the file had it.
    """
    path = workspace.root / tracked.experiment.notebook
    if tracked.state == REBUILT or not path.exists():
        return None
    shown, line = shown_state(read_notebook(path), tracked.experiment), expected_line(ledger, tracked)
    if shown == tracked.state or (shown is None and tracked.state == "PENDING"):
        ledger.set_notebook_status(tracked.experiment.slug, line, behind=False)
        return None
    outcome = write_status(workspace, tracked.experiment, line)
    ledger.set_notebook_status(tracked.experiment.slug, line, behind=outcome is Outcome.OPEN)
    return StatusCheck(tracked.experiment, tracked.state, shown, outcome)


def catch_up(workspace: Workspace, ledger: Ledger) -> list[StatusCheck]:
    """Bring up to date the notebooks that were open when their job changed, now that they are closed (or saved)."""
    checks = []
    for tracked, _ in ledger.notebooks_behind():
        try:
            check = bring_up_to_date(workspace, ledger, tracked)
        except ExperimentError:
            continue  # a damaged file stays behind; `betty experiments repair` says what is wrong with it
        if check is not None:
            checks.append(check)
    return checks


def repair_status(workspace: Workspace) -> list[StatusCheck]:
    """Compare every experiment notebook's status cell with its job's recorded state; write the stale ones not open."""
    ledger = Ledger(workspace.ledger_path)
    checks = [bring_up_to_date(workspace, ledger, tracked) for tracked in ledger.all()]
    return [check for check in checks if check is not None]
