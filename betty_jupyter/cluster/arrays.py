"""A job array as one job: the state of all its tasks together, and how many are in each state.

``sbatch --array=0-8`` returns one id (``4242``); Slurm then keeps a record per task
(``4242_0`` … ``4242_8``, and one row ``4242_[3-8]`` for the tasks still pending), and no
record answers for the array as a whole. An experiment follows the array, so Betty reads it
as the tasks together (:func:`array_job`):

* while a task is running the array is RUNNING, else while one is pending it is PENDING;
* once every task has ended it is COMPLETED when all completed, else it takes the state of
  its worst task (out of memory, timeout, failed, … cancelled): a sweep where two of nine
  tasks failed reads FAILED, and says ``9 tasks: 7 COMPLETED, 2 FAILED``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Iterable

from .jobs import Job, JobState, array_task_count

WORST_FIRST = (JobState.OUT_OF_MEMORY, JobState.TIMEOUT, JobState.FAILED, JobState.NODE_FAIL, JobState.BOOT_FAIL,
               JobState.DEADLINE, JobState.PREEMPTED, JobState.REVOKED, JobState.SPECIAL_EXIT, JobState.CANCELLED)
"""The ended states of a task that did not complete, the one an array takes first."""

_LIVE_FIRST = (JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING, JobState.SUSPENDED, JobState.REQUEUED,
               JobState.PENDING)


def is_task_of(task_id: str, array_id: str) -> bool:
    """Whether ``task_id`` (``4242_3``, ``4242_[3-8]``) is a task (or the pending tasks) of array ``array_id``."""
    return task_id.startswith(f"{array_id}_")


def by_array(jobs: Iterable[Job]) -> dict[str, list[Job]]:
    """The tasks among ``jobs``, by the id of their array."""
    arrays: dict[str, list[Job]] = {}
    for job in jobs:
        array_id, underscore, _ = job.job_id.partition("_")
        if underscore:
            arrays.setdefault(array_id, []).append(job)
    return arrays


def task_count(task_id: str) -> int:
    """How many tasks one record stands for: ``4242_[3-8%2]`` is 6, ``4242_3`` is 1."""
    return array_task_count(task_id.partition("_")[2])


def array_job(array_id: str, tasks: Iterable[Job]) -> Job | None:
    """The array ``array_id`` as one job, from its tasks' records (None when there are none).

    Its times span the tasks (the first start, the last end once all have ended), its peak memory is the largest
    task's, and ``tasks`` counts the tasks by state. ``shown_task`` is the task whose state the array takes when
    it did not complete: the one whose log tells why.
    """
    records = [task for task in tasks if is_task_of(task.job_id, array_id)]
    if not records:
        return None
    counts: Counter[JobState] = Counter()
    for task in records:
        counts[task.state] += task_count(task.job_id)
    ended = all(state.finished for state in counts)
    state, shown = _state_of(records, counts, ended)
    first = min(records, key=_index)
    starts = [task.started for task in records if task.started is not None]
    ends = [task.ended for task in records if task.ended is not None]
    peaks = [task for task in records if task.max_rss_bytes is not None]
    peak = max(peaks, key=lambda task: task.max_rss_bytes or 0) if peaks else None
    started, last_end = (min(starts) if starts else None), (max(ends) if ends and ended else None)
    return replace(
        first, job_id=array_id, state=state,
        exit_code=shown.exit_code if shown is not None else (first.exit_code if ended else None),
        reason=first.reason if state is JobState.PENDING else None,
        started=started, ended=last_end,
        elapsed=(last_end - started) if started is not None and last_end is not None else first.elapsed,
        nodelist=None, max_rss_bytes=peak.max_rss_bytes if peak else None,
        max_rss_step=peak.max_rss_step if peak else None, stdout_path=None, stderr_path=None,
        tasks={state.value: count for state, count in sorted(counts.items(), key=lambda item: item[0].value)},
        shown_task=shown.job_id if shown is not None else None,
    )


def _state_of(records: list[Job], counts: Counter[JobState], ended: bool) -> tuple[JobState, Job | None]:
    """The array's state, and the task it comes from when the array did not complete."""
    if not ended:
        live = next((state for state in _LIVE_FIRST if state in counts), None)
        return (live or JobState.RUNNING), None
    worst = next((state for state in WORST_FIRST if state in counts), None)
    if worst is None:
        unusual = next((state for state in counts if state is not JobState.COMPLETED), None)
        if unusual is None:
            return JobState.COMPLETED, None
        worst = unusual
    shown = min((task for task in records if task.state is worst), key=_index)
    return worst, shown


def _index(task: Job) -> tuple[int, str]:
    """A task's place in its array: ``4242_10`` after ``4242_9``; the pending tasks' record (``4242_[3-8]``) last."""
    index = task.job_id.partition("_")[2]
    return (int(index), "") if index.isascii() and index.isdigit() else (1 << 62, index)
