"""A job array read as one job: its state from all its tasks, and how many are in each state."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from betty_jupyter.cluster.arrays import array_job, by_array
from betty_jupyter.cluster.jobs import Job, JobState, task_summary

T0 = datetime(2026, 11, 25, 8, 0, 0)


def task(ident: str, state: str, exit_code: str | None = None, started: int | None = None, ended: int | None = None,
         peak: int | None = None, reason: str | None = None) -> Job:
    return Job(ident, "sweep", "me", "cpu", JobState.parse(state), exit_code=exit_code, reason=reason,
               started=None if started is None else T0 + timedelta(seconds=started),
               ended=None if ended is None else T0 + timedelta(seconds=ended), max_rss_bytes=peak,
               max_rss_step=None if peak is None else "batch", nodelist="n1", stdout_path="/x/slurm-1.out")


def test_an_array_whose_tasks_all_completed_completed_and_spans_them() -> None:
    job = array_job("42", [task("42_1", "COMPLETED", "0:0", 5, 20, 100), task("42_0", "COMPLETED", "0:0", 2, 9, 300),
                           task("42_2", "COMPLETED", "0:0", 7, 30)])
    assert job is not None and job.job_id == "42" and job.state is JobState.COMPLETED and job.exit_code == "0:0"
    assert job.tasks == {"COMPLETED": 3} and job.shown_task is None
    assert (job.started, job.ended, job.elapsed) == (T0 + timedelta(seconds=2), T0 + timedelta(seconds=30),
                                                      timedelta(seconds=28))
    assert job.max_rss_bytes == 300 and job.nodelist is None and job.stdout_path is None
    assert "3 tasks: 3 COMPLETED" in job.line()


def test_two_failed_tasks_of_nine_make_the_array_failed_and_name_the_first() -> None:
    tasks = [task(f"42_{n}", "FAILED" if n in (3, 7) else "COMPLETED", "3:0" if n in (3, 7) else "0:0", n, n + 10)
             for n in range(9)]
    job = array_job("42", tasks)
    assert job is not None and job.state is JobState.FAILED and job.exit_code == "3:0" and job.shown_task == "42_3"
    assert job.tasks == {"COMPLETED": 7, "FAILED": 2} and task_summary(job.tasks) == "9 tasks: 7 COMPLETED, 2 FAILED"


@pytest.mark.parametrize(("states", "expected", "shown"), [
    (["COMPLETED", "OUT_OF_MEMORY", "FAILED"], JobState.OUT_OF_MEMORY, "42_1"),
    (["TIMEOUT", "FAILED", "CANCELLED by 0"], JobState.TIMEOUT, "42_0"),
    (["CANCELLED by 0", "COMPLETED", "COMPLETED"], JobState.CANCELLED, "42_0"),
])
def test_an_ended_array_that_did_not_complete_takes_its_worst_tasks_state(states, expected, shown) -> None:
    job = array_job("42", [task(f"42_{n}", state, "0:0") for n, state in enumerate(states)])
    assert job is not None and (job.state, job.shown_task) == (expected, shown)


def test_while_a_task_runs_the_array_runs_and_the_pending_tasks_count_each() -> None:
    job = array_job("42", [task("42_0", "COMPLETED", "0:0", 0, 5), task("42_1", "RUNNING", None, 3),
                           task("42_[2-9%2]", "PENDING", reason="JobArrayTaskLimit")])
    assert job is not None and job.state is JobState.RUNNING and job.ended is None and job.exit_code is None
    assert job.tasks == {"COMPLETED": 1, "PENDING": 8, "RUNNING": 1}


def test_an_array_not_started_is_pending_with_its_reason() -> None:
    job = array_job("42", [task("42_[0-8]", "PENDING", reason="Priority")])
    assert job is not None and job.state is JobState.PENDING and job.reason == "Priority" and job.tasks == {
        "PENDING": 9}


def test_tasks_are_grouped_by_their_array_and_a_plain_job_is_no_array() -> None:
    grouped = by_array([task("42_0", "COMPLETED"), task("43", "RUNNING"), task("42_[1-2]", "PENDING"),
                        task("420_1", "RUNNING")])
    assert {key: [t.job_id for t in value] for key, value in grouped.items()} == {
        "42": ["42_0", "42_[1-2]"], "420": ["420_1"]}
    assert array_job("43", grouped.get("43", ())) is None
    assert array_job("42", grouped["420"]) is None  # 420's tasks are not 42's
