"""Slurm's tables as aligned text from plain rows, without pandas: what ``betty jobs`` and ``betty partitions``
print, so a read that only shows a table starts in a fraction of a second.

The cells read as in every other face (:mod:`.tables`): durations as Slurm writes them, no time limit as
``INFINITE``, GPU types as ``a100:4,h100:2``, blanks for unknowns; each cell on one line with its control
characters written out. Columns are laid out as pandas' ``to_string(index=False)`` lays out text: each cell
and header right-aligned to its column's width, columns one space apart.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Mapping, Sequence

from ..safe_text import terminal_line
from .tables import NO_TIME_LIMIT, gpu_types_text, slurm_duration


def cell_text(column: str, value: Any) -> str:
    """One value of a plain row as a person reads it (the rules of :func:`.tables.readable`)."""
    if column == "time_limit":
        limit = value if isinstance(value, timedelta) else None
        return slurm_duration(limit) or NO_TIME_LIMIT
    if value is None:
        return ""
    if isinstance(value, timedelta):
        return slurm_duration(value)
    if column == "gpu_types":
        return gpu_types_text(value)
    return str(value)


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as an aligned text table of ``columns`` (those the rows have)."""
    shown = [column for column in columns if not rows or column in rows[0]]
    header = [terminal_line(column) for column in shown]
    body = [[terminal_line(cell_text(column, row[column])) for column in shown] for row in rows]
    return aligned(header, body)


def aligned(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """Cells right-aligned to their column's width, columns one space apart, one line per row."""
    widths = [max([len(name), *(len(cells[index]) for cells in body)]) for index, name in enumerate(header)]
    lines = [header, *body]
    return "\n".join(" ".join(cell.rjust(width) for cell, width in zip(cells, widths)) for cells in lines)
