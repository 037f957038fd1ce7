"""Slurm's tables as a person reads them, in every face: which columns, durations as Slurm writes them,
times to the minute, sizes as ``100 MiB``, no time limit as ``INFINITE``, GPU types as ``a100:4,h100:2``,
an exit code only for a job that ended, blanks for unknowns."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from ..safe_text import terminal_line
from .jobs import JobState

if TYPE_CHECKING:
    import pandas as pd

QUEUE_COLUMNS = ["job_id", "name", "user", "partition", "state", "reason", "elapsed", "time_limit", "gpus", "nodelist"]
"""The queue's columns, as ``betty jobs``, ``%betty squeue`` and the agent's ``cluster_queue`` show it."""

HISTORY_COLUMNS = ["job_id", "name", "user", "partition", "state", "exit_code", "started", "elapsed", "gpus",
                   "max_rss_bytes"]
"""Accounting's columns, as ``betty history``, ``%betty sacct`` and ``cluster_history`` show them."""

PARTITION_COLUMNS = ["partition", "default", "availability", "nodes", "nodes_idle", "cpus", "cpus_idle",
                     "gpu_types", "time_limit"]
"""The partitions' columns, as ``betty partitions``, ``%betty sinfo`` and ``cluster_partitions`` show them."""


NO_TIME_LIMIT = "INFINITE"
"""A time limit Slurm does not enforce, in Slurm's own word (``sinfo`` shows it so)."""

_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def memory_text(size: Any) -> str:
    """A number of bytes as a person reads it: ``100 MiB``, ``1.5 GiB``, ``512 B``; blank when unknown."""
    import pandas as pd  # lazy: pandas is heavy; `betty --help` and `%load_ext` load this module

    if size is None or isinstance(size, bool) or pd.isna(size):
        return ""
    return size_text(size)


def size_text(size: float) -> str:
    """A known number of bytes as a person reads it: ``100 MiB``, ``1.5 GiB``, ``512 B``."""
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    shown = f"{value:.0f}" if unit == 0 or abs(value) >= 100 else f"{value:.1f}".removesuffix(".0")
    return f"{shown} {_SIZE_UNITS[unit]}"


def slurm_duration(value: Any) -> str:
    """A Timedelta as Slurm writes it (``1-02:03:04``, ``02:03``); blank when unknown."""
    if value is None:
        return ""
    if not isinstance(value, timedelta):  # pandas' NaT is no timedelta; a plain one needs no pandas
        import pandas as pd  # lazy: pandas is heavy; `betty --help` and `%load_ext` load this module

        if pd.isna(value):
            return ""
    seconds = int(value.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}" if hours or days else f"{minutes:02d}:{seconds:02d}"
    return f"{days}-{clock}" if days else clock


def gpu_types_text(types: Any) -> str:
    """A partition's GPU types and counts as ``a100:4,h100:2``; blank when it has none."""
    if not isinstance(types, dict):
        return ""
    return ",".join(f"{name}:{count}" for name, count in types.items())


def readable(frame: "pd.DataFrame", columns: Sequence[str]) -> "pd.DataFrame":
    """The ``columns`` of ``frame`` (those it has) as text: the CLI's tables and the notebook's job table."""
    shown = frame[[c for c in columns if c in frame.columns]].copy()
    if "exit_code" in shown.columns and "state" in frame.columns:
        # accounting writes 0:0 for a job still running: it has no exit code yet
        ended = frame["state"].astype(str).map(lambda state: JobState.parse(state).finished)
        shown["exit_code"] = shown["exit_code"].where(ended, "")
    for column in shown.columns:
        kind = str(shown[column].dtype)
        if column == "time_limit":
            shown[column] = shown[column].map(lambda limit: slurm_duration(limit) or NO_TIME_LIMIT)
        elif column.endswith("_bytes"):
            shown[column] = shown[column].map(memory_text)
        elif kind.startswith("timedelta"):
            shown[column] = shown[column].map(slurm_duration)
        elif kind.startswith("datetime"):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M").fillna("")
        elif column == "gpu_types":
            shown[column] = shown[column].map(gpu_types_text)
    shown = shown.astype(object).where(shown.notna(), "")
    # a size is shown with its unit, so its header no longer says bytes
    return shown.astype(str).rename(columns=lambda column: column.removesuffix("_bytes"))


def text_table(frame: "pd.DataFrame", columns: Sequence[str]) -> str:
    """``frame`` as an aligned text table of ``columns``, each cell on one line with its control characters written out."""
    shown = readable(frame, columns).apply(lambda column: column.map(terminal_line))
    shown.columns = [terminal_line(column) for column in shown.columns]
    return str(shown.to_string(index=False))
