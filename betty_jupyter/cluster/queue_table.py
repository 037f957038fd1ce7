"""The queue as read once, rendered for the face that asks: plain rows for a text table, a DataFrame for the rest.

``squeue`` is asked once; its text is kept, and each form is made the first time a face asks for it:
``betty jobs`` prints :attr:`QueueTable.rows` and the model's page is made from them (no pandas loaded); the
panel's JSON and a notebook's widget read :attr:`QueueTable.frame`, which lets the rows go. Counting the jobs by
state uses whichever form is already there.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property
from typing import TYPE_CHECKING, Any

from . import parsing

if TYPE_CHECKING:
    import pandas as pd


class QueueTable:
    """One ``squeue`` answer (format :data:`~.parsing.SQUEUE_FIELDS`), parsed lazily into the form asked for."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per row (:func:`~.parsing.queue_rows`), without pandas."""
        return parsing.queue_rows(self.text)

    @cached_property
    def frame(self) -> "pd.DataFrame":
        """The typed DataFrame (:func:`~.parsing.parse_queue`); the plain rows, when made, are let go (a face that
        holds the table holds one form of it: 20,000 plain rows take five times the DataFrame's memory)."""
        self.__dict__.pop("rows", None)
        return parsing.parse_queue(self.text)

    def jobs_by_state(self) -> list[tuple[str, int]]:
        """Jobs per state, each task of a pending array counted, most first (ties by name), as ``jobs_by`` counts;
        from whichever form is made already (the rows when none is)."""
        if "frame" in self.__dict__:
            frame = self.frame
            return [] if frame.empty else [(str(state), int(n)) for state, n in parsing.jobs_by(frame, "state").items()]
        counts: Counter[str] = Counter()
        for row in self.rows:
            counts[row["state"]] += row["tasks"]
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def __len__(self) -> int:
        """How many rows the table has."""
        return len(self.frame) if "frame" in self.__dict__ else len(self.rows)
