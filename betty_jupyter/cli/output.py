"""How the CLI prints: aligned tables for people, JSON records for scripts, long output in whole blocks."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence, TextIO

if TYPE_CHECKING:
    import pandas as pd

BLOCK = 1 << 16
"""How much text :func:`buffered_stdout` gathers before one write to standard output."""


class _Blocks:
    """A text stream that hands ``out`` whole blocks of :data:`BLOCK` characters (and the rest when closed)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._parts: list[str] = []
        self._size = 0

    def write(self, text: str) -> int:
        self._parts.append(text)
        self._size += len(text)
        if self._size >= BLOCK:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self._parts:
            self._out.write("".join(self._parts))
            self._parts, self._size = [], 0
        self._out.flush()


@contextmanager
def buffered_stdout() -> Iterator[TextIO]:
    """Standard output for a command that prints many rows: written in blocks, not one system call per row.

    Python writes every ``print`` through at once where ``PYTHONUNBUFFERED`` is set (common in containers
    and CI); a table of 100,000 rows would then take 100,000 writes. Everything is written when the block
    ends, an error included."""
    blocks = _Blocks(sys.stdout)
    try:
        yield blocks  # type: ignore[misc]  # write and flush are all the rows' printers use
    finally:
        blocks.flush()


def print_table(frame: "pd.DataFrame", columns: Sequence[str], as_json: bool, empty: str) -> None:
    """Print ``frame`` as JSON records (all columns) or as a text table of ``columns``."""
    if as_json:
        print(json.dumps(records(frame), indent=2, default=str))
        return
    if frame.empty:
        print(empty)
        return
    # lazy: the table renderer imports pandas; the CLI's other printers here do not need it
    from ..cluster.tables import text_table

    # Cells are other people's text (job names, comments): nothing in them may steer the terminal.
    print(text_table(frame, columns))


def records(frame: "pd.DataFrame") -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: times in ISO 8601, durations in seconds, missing values null."""
    # lazy: pandas; a table printed as text needs only its frame's own methods
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
