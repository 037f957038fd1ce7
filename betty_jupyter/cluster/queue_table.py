"""The queue as read once, rendered for the face that asks: plain rows for a text table, a DataFrame for the rest.

``squeue`` is asked once; its text is kept, and each form is made the first time a face asks for it:
``betty jobs`` prints :attr:`QueueTable.rows` (no pandas loaded), the model's page, the panel's JSON and a
notebook's widget read :attr:`QueueTable.frame`. Counting the jobs by state uses whichever form is already there.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property
from typing import TYPE_CHECKING, Any

from . import jobs, parsing

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
        """The typed DataFrame (:func:`~.parsing.parse_queue`)."""
        return parsing.parse_queue(self.text)

    def jobs_by_state(self) -> list[tuple[str, int]]:
        """Jobs per state, each task of a pending array counted, most first (ties by name), as ``jobs_by`` counts;
        from the text's two fields alone when no other form is made yet."""
        if "frame" in self.__dict__:
            return [(str(state), int(count)) for state, count in parsing.jobs_by(self.frame, "state").items()] \
                if not self.frame.empty else []
        names = [name for _, name in parsing.SQUEUE_FIELDS]
        state, task = names.index("state"), names.index("array_task_id")
        counts: Counter[str] = Counter()
        for cells in parsing.split_rows(self.text, len(names)):
            task_id = cells[task]
            counts[parsing.state_name(cells[state])] += jobs.array_task_count("" if task_id == "N/A" else task_id)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def __len__(self) -> int:
        """How many rows the table has."""
        return len(self.frame) if "frame" in self.__dict__ else len(self.rows)
