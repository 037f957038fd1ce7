"""Job tables as a person reads them: durations as Slurm writes them, times to the minute, blanks for unknowns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import pandas as pd


def slurm_duration(value: Any) -> str:
    """A Timedelta as Slurm writes it (``1-02:03:04``, ``02:03``); blank when unknown."""
    import pandas as pd

    if value is None or pd.isna(value):
        return ""
    seconds = int(value.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}" if hours or days else f"{minutes:02d}:{seconds:02d}"
    return f"{days}-{clock}" if days else clock


def readable(frame: "pd.DataFrame", columns: Sequence[str]) -> "pd.DataFrame":
    """The ``columns`` of ``frame`` (those it has) as text: the CLI's tables and the notebook's job table."""
    shown = frame[[c for c in columns if c in frame.columns]].copy()
    for column in shown.columns:
        kind = str(shown[column].dtype)
        if kind.startswith("timedelta"):
            shown[column] = shown[column].map(slurm_duration)
        elif kind.startswith("datetime"):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M").fillna("")
    shown = shown.astype(object).where(shown.notna(), "")
    return shown.astype(str)
