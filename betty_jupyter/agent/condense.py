"""Tool outputs condensed before they enter the model's context, within the one budget of :mod:`.budget`.

A 20,000-row queue becomes counts by state, partition and user, then at most :data:`~.budget.ANSWER_ROWS`
rows, the asking person's own jobs first and the newest first, and a line saying how to ask for the rest
(``offset``, the tool's filters); never more than :data:`~.budget.ANSWER_CHARS` characters. A long log becomes
its head, its tail and the lines in between that look like errors. A private key block in any output is removed
before the model sees it. Tokens are estimated as characters / 4. An outcome is condensed once per asking
person: every face that asks again (the action log, an MCP client) is handed the same text.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..cluster.jobs import JobState
from ..cluster.text_tables import cell_text
from ..secret_names import blank_private_keys
from .budget import ANSWER_CHARS, ANSWER_ROWS, Paging, job_order
from .models import ToolOutcome

if TYPE_CHECKING:
    import pandas as pd

MAX_CHARS = ANSWER_CHARS
TABLE_ROWS = ANSWER_ROWS
CELL_CHARS = 120
"""The most characters of one cell a condensed table shows (a job name may be any length)."""
_ERRORS = re.compile(r"error|traceback|exception|killed|oom|out of memory|exceeded|cancelled|fatal|nan\b|segmentation",
                     re.IGNORECASE)


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: characters / 4."""
    return (len(text) + 3) // 4


def condense(outcome: ToolOutcome, user: str | None = None) -> str:
    """What the model (or another agent) is told of ``outcome``, never a private key; made once per ``user``."""
    told = outcome.told.get(user)
    if told is None:
        told = outcome.told[user] = blank_private_keys(_condensed(outcome, user))
    return told


def _condensed(outcome: ToolOutcome, user: str | None) -> str:
    if not outcome.ok:
        return f"error: {outcome.summary}"
    rows = _table_rows(outcome)
    if rows is not None:
        counts = outcome.summary.partition("\n")[0]  # the rest of a table's summary is its first rows, paged below
        room = MAX_CHARS - len(counts) - 1
        return _clip(f"{counts}\n{condense_rows(rows, user, outcome.paging, room)}")
    rest = outcome.full.removeprefix(f"{outcome.summary}\n")  # a full text that starts with the summary: not twice
    if rest and rest != outcome.summary:
        return _clip(f"{outcome.summary}\n{condense_log(rest)}")
    return _clip(outcome.summary)


def _table_rows(outcome: ToolOutcome) -> list[dict[str, Any]] | None:
    """The rows of a table answer as plain dicts (a lazily read table's own, without pandas); None for another."""
    if outcome.table is not None and "data" not in outcome.__dict__:
        return list(outcome.table.rows)
    data = outcome.data
    if type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas"):
        return plain_rows(data)
    return None


def plain_rows(frame: "pd.DataFrame") -> list[dict[str, Any]]:
    """A DataFrame's rows as dicts, a missing cell as None."""
    shown = frame.astype(object)
    records = shown.where(shown.notna(), None).to_dict("records")
    return [{str(name): value for name, value in row.items()} for row in records]


def condense_table(frame: "pd.DataFrame", user: str | None = None, paging: Paging | None = None,
                   room: int = MAX_CHARS) -> str:
    """:func:`condense_rows` of a DataFrame."""
    return condense_rows(plain_rows(frame), user, paging, room)


def condense_rows(rows: list[dict[str, Any]], user: str | None = None, paging: Paging | None = None,
                  room: int = MAX_CHARS) -> str:
    """A small table as it is; a large one as counts, then a page of rows (the asking person's own first, the
    newest first) and how to ask for the rest, within ``room`` (at most :data:`~.budget.ANSWER_CHARS`)."""
    paging = paging or Paging()
    if len(rows) <= TABLE_ROWS and not paging.offset:
        return _clip(_lines(rows), max(room, 1000))
    columns = set(rows[0]) if rows else set()
    jobs = _jobs(rows)
    parts = [f"{len(rows)} rows." if jobs == len(rows) else f"{len(rows)} rows, {jobs} jobs (array tasks counted)."]
    for column in ("state", "partition", "user"):
        if column in columns:
            counts = _jobs_by(rows, column)
            shown = ", ".join(f"{_cell(name)}: {count}" for name, count in counts[:12])
            more = f" (+{len(counts) - 12} more)" if len(counts) > 12 else ""
            parts.append(f"by {column}: {shown}{more}")
    mine = [row for row in rows if user and str(row.get("user")) == user]
    if user and "user" in columns:
        mine_jobs = _jobs(mine)
        parts.append(f"all {mine_jobs} jobs of {user}:" if len(mine) == mine_jobs
                     else f"all {mine_jobs} jobs of {user}, in {len(mine)} rows:")
        if not mine:
            parts.append("(none)")
        parts.append(f"{user}'s rows first, the newest first:")
    else:
        parts.append("the newest first:")
    page = _ordered(rows, user)[paging.offset:paging.offset + TABLE_ROWS]
    head = "\n".join(parts)
    lines = _lines(page).splitlines() if page else ["(no rows from this offset)"]
    while True:  # fewer rows, not half a row, when long cells would pass the budget
        shown_rows = len(lines) - 1 if page else 0
        text = "\n".join([head, *lines, paging.more(shown_rows, len(rows))])
        if len(text) <= room or shown_rows <= 1:
            return _clip(text, max(room, 1000))
        lines = lines[:-max(1, shown_rows // 4)]


def _jobs(rows: list[dict[str, Any]]) -> int:
    """How many jobs the rows are, each task of a pending array counted (as :func:`job_count`)."""
    return sum(_tasks(row) for row in rows)


def _tasks(row: dict[str, Any]) -> int:
    tasks = row.get("tasks")
    return int(tasks) if isinstance(tasks, int) or (tasks is not None and str(tasks).isdigit()) else 1


def _jobs_by(rows: list[dict[str, Any]], column: str) -> list[tuple[str, int]]:
    """Jobs per value of ``column``, most first, ties by value (as :func:`jobs_by`)."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts[str(row.get(column))] += _tasks(row)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _ordered(rows: list[dict[str, Any]], user: str | None) -> list[dict[str, Any]]:
    """The rows with ``user``'s own first, each part newest first (by job id, an array's tasks together)."""
    return sorted(rows, key=lambda row: (bool(user) and str(row.get("user")) == user, job_order(row.get("job_id"))),
                  reverse=True)


def _cell(value: object) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def _lines(rows: list[dict[str, Any]]) -> str:
    """Rows as ``a | b | c`` lines under their header, cells as a person reads them (an exit code once a job ended)."""
    present: list[str] = list(rows[0]) if rows else []
    columns: list[str] = [c for c in ("job_id", "name", "user", "partition", "state", "elapsed", "reason", "exit_code", "gpus")
               if c in present] or present
    lines = [" | ".join(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if column == "exit_code" and not JobState.parse(str(row.get("state", ""))).finished:
                value = None
            cells.append(_cell(cell_text(column, value)))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def condense_log(text: str, head: int = 20, tail: int = 40, max_error_lines: int = 30) -> str:
    """Head and tail of a long text, with the error-looking lines from the middle kept in order."""
    lines = text.splitlines()
    if len(lines) <= head + tail:
        return _clip(text)
    middle = lines[head:-tail]
    errors: list[str] = []
    for line in middle:
        if _ERRORS.search(line) and line not in errors:
            errors.append(line)
    kept = errors[:max_error_lines]
    omitted = len(middle) - len(kept)
    block = [*lines[:head], f"… {omitted} lines omitted; {len(kept)} error-looking lines kept …", *kept, *lines[-tail:]]
    return _clip("\n".join(block))


def _clip(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}\n… {len(text) - 2 * keep} characters omitted …\n{text[-keep:]}"
