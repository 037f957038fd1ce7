"""How the CLI prints tables: aligned text for people, JSON records for scripts."""

from __future__ import annotations

import json
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


def print_table(frame: "pd.DataFrame", columns: Sequence[str], as_json: bool, empty: str) -> None:
    """Print ``frame`` as JSON records (all columns) or as a text table of ``columns``."""
    if as_json:
        print(json.dumps(records(frame), indent=2, default=str))
        return
    if frame.empty:
        print(empty)
        return
    shown = frame[list(columns)].copy()
    for column in shown.columns:
        if str(shown[column].dtype).startswith("timedelta"):
            shown[column] = shown[column].map(slurm_duration)
        elif str(shown[column].dtype).startswith("datetime"):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M").fillna("")
    shown = shown.astype(object).where(shown.notna(), "")
    print(shown.astype(str).to_string(index=False))


def records(frame: "pd.DataFrame") -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: times in ISO 8601, durations in seconds, missing values null."""
    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        kind = str(out[column].dtype)
        if kind.startswith("timedelta"):
            out[column] = out[column].dt.total_seconds()
        elif kind.startswith("datetime"):
            out[column] = out[column].dt.strftime("%Y-%m-%dT%H:%M:%S")
        elif kind == "category":
            out[column] = out[column].astype(str)
    rows = out.astype(object).where(pd.notna(out), None).to_dict(orient="records")
    return [{str(k): v for k, v in row.items()} for row in rows]
