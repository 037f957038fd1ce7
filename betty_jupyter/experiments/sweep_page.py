"""A sweep's record as its page shows it: its resubmissions by index, and the comparison of its tasks.

Pure: the ledger's record in, markdown out (every value escaped, :mod:`~betty_jupyter.safe_text`); the watcher
reads the comparison from the cluster (:mod:`.comparison`) and records it on the experiment.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..safe_text import table_cell
from .ledger import Experiment
from .sweep import Grid, recorded_grid


def retries(experiment: Experiment) -> list[dict[str, Any]]:
    """The sweep's resubmissions by index, oldest first: ``{"job_id": "4250", "tasks": [3, 7], …}``."""
    return [retry for retry in (experiment.sweep or {}).get("retries") or [] if isinstance(retry, dict)]


def rounds(experiment: Experiment) -> list[dict[str, Any]]:
    """A search's later rounds, oldest first: ``{"round": 2, "job_id": "4251", "tasks": [4, 5, 6, 7], …}``."""
    return [step for step in (experiment.sweep or {}).get("rounds") or []
            if isinstance(step, dict) and step.get("job_id")]


def array_ids(experiment: Experiment) -> list[str]:
    """The sweep's job array, a search's later rounds' arrays, then its resubmissions' arrays."""
    return [experiment.job_id, *(str(step["job_id"]) for step in rounds(experiment)),
            *(str(retry["job_id"]) for retry in retries(experiment))]


def comparison_table(grid: Grid, records: Iterable[Mapping[str, Any]]) -> str:
    """The page's table: a row per task, its point, state, runtime, efficiency and each metric's last value."""
    rows = list(records)
    metrics = list(dict.fromkeys(str(name) for row in rows for name in (row.get("metrics") or {})))
    head = ["task", *grid.names, "state", "runtime", "efficiency", *metrics, "notes"]
    lines = ["| " + " | ".join(table_cell(cell) for cell in head) + " |", "|" + "---|" * len(head)]
    points = grid.points()
    for row in rows:
        index = int(row.get("index", -1))
        point = points[index] if 0 <= index < len(points) else {}
        values = row.get("metrics") or {}
        cells = [task_cell(row), *(point.get(name, "") for name in grid.names), row.get("state", ""),
                 clock_text(row.get("elapsed_seconds")), row.get("efficiency", ""),
                 *(number_text(values.get(name)) for name in metrics), notes_text(row)]
        lines.append("| " + " | ".join(table_cell(cell) for cell in cells) + " |")
    return "\n".join(lines)


def task_cell(row: Mapping[str, Any]) -> str:
    """``3 (4242_3)``: the task's index and the job id of its latest attempt."""
    job = str(row.get("job_id") or "")
    return f"{row.get('index')} ({job})" if job else str(row.get("index"))


def notes_text(row: Mapping[str, Any]) -> str:
    """The earlier attempts, the diagnosis and why no metrics were read, in one cell."""
    earlier = [str(item) for item in row.get("earlier") or []]
    parts = ([f"retry of {', '.join(earlier)}"] if earlier else []) + \
        [str(row[key]) for key in ("diagnosis", "note") if row.get(key)]
    return "; ".join(parts)


def number_text(value: object) -> str:
    """A metric's value as shown: six significant digits, blank when the task printed none."""
    return f"{value:.6g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def clock_text(seconds: object) -> str:
    """``[D-]HH:MM:SS``, blank when unknown."""
    # lazy: the advisor's clock, one format for every duration Betty shows
    from ..cluster.job_efficiency import clock

    return clock(seconds) if isinstance(seconds, int) else ""


def page_section(experiment: Experiment) -> str:
    """The page's ``### Comparison`` (inside Betty's region), from the record; "" before the watcher read one."""
    records = (experiment.sweep or {}).get("tasks")
    if not records:
        return ""
    grid = recorded_grid(experiment.sweep)
    attempts = ", ".join(str(retry["job_id"]) for retry in retries(experiment))
    again = f" Failed tasks were resubmitted by index as job array {attempts}." if attempts else ""
    return ("## Comparison\n\nEvery task's last value of each `name=value` it printed (the notebook plots the "
            f"series).{again}\n\n{comparison_table(grid, records)}")
