"""How the CLI prints tables: aligned text for people, JSON records for scripts."""

from __future__ import annotations

import json
from typing import Any, Sequence

import pandas as pd

from ..cluster.tables import text_table


def print_table(frame: "pd.DataFrame", columns: Sequence[str], as_json: bool, empty: str) -> None:
    """Print ``frame`` as JSON records (all columns) or as a text table of ``columns``."""
    if as_json:
        print(json.dumps(records(frame), indent=2, default=str))
        return
    if frame.empty:
        print(empty)
        return
    # Cells are other people's text (job names, comments): nothing in them may steer the terminal.
    print(text_table(frame, columns))


def records(frame: "pd.DataFrame") -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: times in ISO 8601, durations in seconds, missing values null."""
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
