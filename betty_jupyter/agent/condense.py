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
from typing import TYPE_CHECKING

from ..cluster.parsing import job_count, jobs_by
from ..cluster.tables import readable
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
    if _is_frame(outcome.data):
        room = MAX_CHARS - len(outcome.summary) - 1
        return _clip(f"{outcome.summary}\n{condense_table(outcome.data, user, outcome.paging, room)}")
    if outcome.full and outcome.full != outcome.summary:
        return _clip(f"{outcome.summary}\n{condense_log(outcome.full)}")
    return _clip(outcome.summary)


def _is_frame(data: object) -> bool:
    """Whether ``data`` is a DataFrame, without importing pandas for an answer that holds none."""
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas")


def condense_table(frame: "pd.DataFrame", user: str | None = None, paging: Paging | None = None,
                   room: int = MAX_CHARS) -> str:
    """A small table as it is; a large one as counts, then a page of rows (the asking person's own first, the
    newest first) and how to ask for the rest, within :data:`~.budget.ANSWER_CHARS`."""
    paging = paging or Paging()
    if len(frame) <= TABLE_ROWS and not paging.offset:
        return _clip(_rows(frame))
    jobs = job_count(frame)
    parts = [f"{len(frame)} rows." if jobs == len(frame) else f"{len(frame)} rows, {jobs} jobs (array tasks counted)."]
    for column in ("state", "partition", "user"):
        if column in frame.columns:
            counts = jobs_by(frame, column)
            shown = ", ".join(f"{_cell(name)}: {count}" for name, count in counts.head(12).items())
            more = f" (+{len(counts) - 12} more)" if len(counts) > 12 else ""
            parts.append(f"by {column}: {shown}{more}")
    ordered = _ordered(frame, user)
    if user and "user" in frame.columns:
        mine = int((frame["user"].astype(str) == user).sum())
        mine_jobs = job_count(frame[frame["user"].astype(str) == user]) if mine else 0
        parts.append(f"all {mine_jobs} jobs of {user}:" if mine == mine_jobs
                     else f"all {mine_jobs} jobs of {user}, in {mine} rows:")
        if not mine:
            parts.append("(none)")
        parts.append(f"{user}'s rows first, the newest first:")
    else:
        parts.append("the newest first:")
    page = ordered.iloc[paging.offset:paging.offset + TABLE_ROWS]
    head = "\n".join(parts)
    lines = _rows(page).splitlines() if len(page) else ["(no rows from this offset)"]
    while True:  # fewer rows, not half a row, when long cells would pass the budget
        shown = len(lines) - 1 if len(page) else 0
        text = "\n".join([head, *lines, paging.more(shown, len(frame))])
        if len(text) <= room or shown <= 1:
            return _clip(text, max(room, 1000))
        lines = lines[:-max(1, shown // 4)]


def _ordered(frame: "pd.DataFrame", user: str | None) -> "pd.DataFrame":
    """The rows with ``user``'s own first, each part newest first (by job id, an array's tasks together)."""
    if "job_id" not in frame.columns:
        return frame
    order = [job_order(ident) for ident in frame["job_id"]]
    mine = ([str(name) == user for name in frame["user"]] if user and "user" in frame.columns
            else [False] * len(frame))
    rows = sorted(range(len(frame)), key=lambda row: (mine[row], order[row]), reverse=True)
    return frame.iloc[rows]


def _cell(value: object) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def _rows(frame: "pd.DataFrame") -> str:
    columns = [c for c in ("job_id", "name", "user", "partition", "state", "elapsed", "reason", "exit_code", "gpus")
               if c in frame.columns] or list(frame.columns)
    lines = [" | ".join(columns)]
    for row in readable(frame, columns).itertuples(index=False):  # durations and sizes as a person reads them
        lines.append(" | ".join(_cell(value) for value in row))
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
