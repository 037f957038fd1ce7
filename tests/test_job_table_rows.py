"""A job table keeps the page it shows, not every row it read: tables shown one after another in a notebook
do not each hold their queue, and a table whose rows are gone reads them again to show another page."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Callable

import pandas as pd
import pytest

from betty_jupyter.cluster.tables import QUEUE_COLUMNS
from betty_jupyter.notebook.widgets.jobs import JobTable

pytest.importorskip("ipywidgets")


def queue(jobs: int, first: int = 1000) -> pd.DataFrame:
    """``jobs`` pending jobs as ``%betty squeue`` reads them (the columns the table shows)."""
    return pd.DataFrame({"job_id": [str(first + n) for n in range(jobs)], "name": [f"train-{n}" for n in range(jobs)],
                         "user": "me", "partition": "debug", "state": "PENDING", "reason": "Priority"})


class Reads:
    """The table's way to read the queue again, counting its calls."""

    def __init__(self, jobs: int) -> None:
        self.jobs, self.calls = jobs, 0
        self.done = threading.Event()

    def __call__(self) -> pd.DataFrame:
        self.calls += 1
        self.done.set()
        return queue(self.jobs, first=5000)


def until(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Whether ``check`` came true within ``timeout`` seconds (looked at every 10 ms)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.01)
    return True


def columns() -> list[str]:
    return [column for column in QUEUE_COLUMNS if column in queue(1).columns]


def test_a_table_shown_after_another_lets_the_first_ones_rows_go_and_the_first_keeps_its_page() -> None:
    first_rows = queue(500)
    first = JobTable("queue", first_rows, columns(), Reads(500))
    gone = weakref.ref(first_rows)
    page = first.table.value
    del first_rows
    second = JobTable("queue", queue(500), columns(), Reads(500))
    gc.collect()

    assert gone() is None, "the first table still holds every row it read"
    assert first.table.value == page and "1000" in page and "1049" in page and "1050" not in page
    assert "rows 1–50 of 500" in first.position.value
    assert second.frame is not None and len(second.frame) == 500


def test_tables_shown_many_times_keep_one_queue_at_most() -> None:
    kept = []
    tables = []
    for _ in range(6):
        rows = queue(300)
        kept.append(weakref.ref(rows))
        tables.append(JobTable("queue", rows, columns(), Reads(300)))
        del rows
    gc.collect()

    assert [ref() is not None for ref in kept] == [False] * 5 + [True]


def test_a_table_pages_through_the_persons_dataframe_while_they_keep_it_and_reads_again_after() -> None:
    reads = Reads(120)
    mine = queue(120)
    table = JobTable("queue", mine, columns(), reads)
    table.kept_with(mine)
    JobTable("queue", queue(10), columns(), Reads(10))  # a newer table: the first has only the person's rows

    table.next.click()
    assert reads.calls == 0 and "1050" in table.table.value and "rows 51–100 of 120" in table.position.value

    del mine
    gc.collect()
    table.next.click()
    assert reads.done.wait(30), "the table did not read the queue again"
    assert until(lambda: "5100" in table.table.value), "the page read again was not shown"
    assert "rows 101–120 of 120" in table.position.value
    assert reads.calls == 1
