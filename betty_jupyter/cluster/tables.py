"""Slurm's tables as a person reads them, in every face: which columns, durations as Slurm writes them,
times to the minute, GPU types as ``a100:4,h100:2``, blanks for unknowns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

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


def slurm_duration(value: Any) -> str:
    """A Timedelta as Slurm writes it (``1-02:03:04``, ``02:03``); blank when unknown."""
    import pandas as pd  # lazy: pandas is heavy; `betty --help` and `%load_ext` load this module

    if value is None or pd.isna(value):
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
    for column in shown.columns:
        kind = str(shown[column].dtype)
        if kind.startswith("timedelta"):
            shown[column] = shown[column].map(slurm_duration)
        elif kind.startswith("datetime"):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M").fillna("")
        elif column == "gpu_types":
            shown[column] = shown[column].map(gpu_types_text)
    shown = shown.astype(object).where(shown.notna(), "")
    return shown.astype(str)
