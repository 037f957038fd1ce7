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
    """A search's later rounds that submitted tasks, oldest first: ``{"round": 2, "job_id": "4251", "tasks": […]}``."""
    return [step for step in rounds_of(experiment.sweep or {}) if step.get("job_id")]


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
            f"series).{again}\n\n{comparison_table(grid, records)}" + search_section(experiment.sweep or {}))


def search_rows(summary: Mapping[str, Any], stopped: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A search's trials as a header and rows of plain text: each task's objective, the best so far, its state and
    why it stopped or failed (one table for the page, the notebook and the panel)."""
    objective = str(summary.get("objective") or "objective")
    header = ["task", objective, "best so far", "state", "why"]
    rows = []
    best = list(summary.get("best_so_far") or [])
    for n, trial in enumerate(summary.get("trials") or []):
        if not isinstance(trial, Mapping):
            continue
        why = str(trial.get("why") or stopped.get(str(trial.get("index"))) or "")
        rows.append([str(trial.get("index")), number_text(trial.get("value")),
                     number_text(best[n] if n < len(best) else None), str(trial.get("state") or "").lower(), why])
    return header, rows


def importance_line(summary: Mapping[str, Any]) -> str:
    """``parameter importance (Optuna): lr 0.81, layers 0.15, opt 0.04``, or "" before enough tasks completed."""
    found = summary.get("importance") or {}
    return ("parameter importance (Optuna): " + ", ".join(f"{name} {number_text(value)}" for name, value in
                                                           found.items())) if found else ""


def search_section(sweep: Mapping[str, Any]) -> str:
    """The page's ``### Search``: the search, every round, each task's objective and the best so far; "" otherwise."""
    summary = sweep.get("summary")
    if not sweep.get("search") or not isinstance(summary, Mapping):
        return ""
    header, rows = search_rows(summary, sweep.get("stopped") or {})
    lines = ["| " + " | ".join(table_cell(cell) for cell in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(table_cell(cell) for cell in row) + " |" for row in rows]
    steps = [f"- round {table_cell(str(step.get('round')))}: tasks "
             f"{table_cell(', '.join(map(str, step.get('tasks') or [])) or 'none')}"
             + (f" (job array {table_cell(str(step.get('job_id')))})" if step.get("job_id") else "")
             + (f", stopped {table_cell(', '.join(str(s.get('index')) for s in step.get('stops') or []))}"
                if step.get("stops") else "")
             + f"; approved by {table_cell(str(step.get('approved') or 'card'))}"
             for step in rounds_of(sweep)]
    importance = importance_line(summary)
    return ("\n\n### Search\n\n" + "\n".join(["- round 1: the first tasks, on the sweep's own card", *steps])
            + "\n\n" + "\n".join(lines) + (f"\n\n{table_cell(importance)}" if importance else ""))


def rounds_of(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A search's later rounds as recorded, oldest first."""
    return [step for step in sweep.get("rounds") or [] if isinstance(step, dict)]
