"""Tool outputs condensed before they enter the model's context; the full output goes to the action log.

A 10,000-row queue becomes counts by state and partition plus the person's own jobs (the
first rows of them, as the table is ordered: the newest first for history), never more than
:data:`MAX_CHARS` characters; a long log becomes its head, its tail and the lines in between that look like
errors. A private key block in any output is removed before the model sees it. Tokens are
estimated as characters / 4.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..cluster.parsing import job_count, jobs_by
from ..secret_names import blank_private_keys
from .models import ToolOutcome

if TYPE_CHECKING:
    import pandas as pd

MAX_CHARS = 6000
TABLE_ROWS = 40
_ERRORS = re.compile(r"error|traceback|exception|killed|oom|out of memory|exceeded|cancelled|fatal|nan\b|segmentation",
                     re.IGNORECASE)


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: characters / 4."""
    return (len(text) + 3) // 4


def condense(outcome: ToolOutcome, user: str | None = None) -> str:
    """What the model sees of ``outcome``, never a private key."""
    return blank_private_keys(_condensed(outcome, user))


def _condensed(outcome: ToolOutcome, user: str | None) -> str:
    import pandas as pd  # lazy: pandas is heavy; the server starts and opens sessions without it

    if not outcome.ok:
        return f"error: {outcome.summary}"
    if isinstance(outcome.data, pd.DataFrame):
        return f"{outcome.summary}\n{condense_table(outcome.data, user)}"
    rest = outcome.full.removeprefix(f"{outcome.summary}\n")  # a full text that starts with the summary: not twice
    if rest and rest != outcome.summary:
        return _clip(f"{outcome.summary}\n{condense_log(rest)}")
    return _clip(outcome.summary)


def condense_table(frame: "pd.DataFrame", user: str | None = None) -> str:
    """A small table as it is; a large job table as counts plus the asking person's own first jobs."""
    if len(frame) <= TABLE_ROWS:
        return _clip(_rows(frame))
    jobs = job_count(frame)
    parts = [f"{len(frame)} rows." if jobs == len(frame) else f"{len(frame)} rows, {jobs} jobs (array tasks counted)."]
    for column in ("state", "partition", "user"):
        if column in frame.columns:
            counts = jobs_by(frame, column)
            shown = ", ".join(f"{name}: {count}" for name, count in counts.head(12).items())
            more = f" (+{len(counts) - 12} more)" if len(counts) > 12 else ""
            parts.append(f"by {column}: {shown}{more}")
    if user and "user" in frame.columns:
        mine = frame[frame["user"].astype(str) == user]
        parts.append(f"all {job_count(mine)} jobs of {user}:" if len(mine) == job_count(mine)
                     else f"all {job_count(mine)} jobs of {user}, in {len(mine)} rows:")
        parts.append(_rows(mine.head(TABLE_ROWS)) if not mine.empty else "(none)")
        if len(mine) > TABLE_ROWS:
            parts.append(f"(the first {TABLE_ROWS} rows of {user}'s; the action log has all {len(mine)})")
    return _clip("\n".join(parts))


def _rows(frame: "pd.DataFrame") -> str:
    columns = [c for c in ("job_id", "name", "user", "partition", "state", "elapsed", "reason", "exit_code", "gpus")
               if c in frame.columns] or list(frame.columns)
    lines = [" | ".join(columns)]
    shown = frame[columns].astype(object)
    for row in shown.where(shown.notna(), "").itertuples(index=False):
        lines.append(" | ".join(str(value) for value in row))
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
