"""A sweep's metrics without a cluster: what counts as a metric in a task's output, its steps, and the page's table."""

from __future__ import annotations

from betty_jupyter.experiments.sweep import Grid
from betty_jupyter.experiments.sweep_page import comparison_table
from betty_jupyter.experiments.task_metrics import MAX_METRICS, read_metrics


def test_the_nth_value_of_a_metric_is_its_step_n_and_the_last_value_is_kept() -> None:
    metrics = read_metrics("epoch 1 loss=0.9 acc=0.5\nloss=0.7\nsomething else\nloss=0.42, acc=0.75;\n")
    assert metrics.series == {"loss": [(1.0, 0.9), (2.0, 0.7), (3.0, 0.42)], "acc": [(1.0, 0.5), (2.0, 0.75)]}
    assert metrics.last == {"loss": 0.42, "acc": 0.75}


def test_a_step_on_the_line_is_the_step_of_every_metric_on_it() -> None:
    metrics = read_metrics("step=100 loss=2.5\nstep=200 loss=1.5 val_loss=1.75\nstep=2.5 loss=1\n")
    assert metrics.series == {"loss": [(100.0, 2.5), (200.0, 1.5), (3.0, 1.0)], "val_loss": [(200.0, 1.75)]}
    assert "step" not in metrics.last  # a fractional step is no step: that line counts as the third value


def test_the_grid_and_bettys_own_line_are_not_metrics() -> None:
    text = "betty sweep: task 4: lr=3e-4 seed=1\nlr=3e-4 seed=1 loss=0.25\n"
    assert read_metrics(text, ("lr", "seed")).last == {"loss": 0.25}


def test_a_log_printing_thousands_of_names_keeps_the_first_few() -> None:
    metrics = read_metrics("\n".join(f"m{n}=1" for n in range(500)))
    assert list(metrics.last) == [f"m{n}" for n in range(MAX_METRICS)]


def test_the_page_table_shows_each_task_with_its_metrics_escaped() -> None:
    grid = Grid.parse(["lr=1e-4,<b>x</b>"])
    table = comparison_table(grid, [
        {"index": 0, "job_id": "42_0", "state": "COMPLETED", "elapsed_seconds": 61, "efficiency": "CPU 5%",
         "metrics": {"loss": 0.123456789}},
        {"index": 1, "job_id": "50_1", "state": "FAILED", "metrics": {}, "earlier": ["42_1 FAILED"],
         "diagnosis": "Failed: <img src=x onerror=alert(1)> | oops\n# heading"},
    ])
    lines = table.splitlines()
    assert lines[0] == "| task | lr | state | runtime | efficiency | loss | notes |"
    assert lines[2] == "| 0 (42_0) | 1e-4 | COMPLETED | 00:01:01 | CPU 5% | 0.123457 |  |"
    assert lines[3].startswith("| 1 (50_1) | &lt;b&gt;x&lt;/b&gt; | FAILED |  |  |  | retry of 42_1 FAILED; Failed: ")
    assert "<img" not in table and "\\| oops" in table and len(lines) == 4


def _sweep(retries=()):
    from betty_jupyter.experiments.ledger import Experiment
    from betty_jupyter.experiments.sweep import sweep_script

    grid = Grid.parse(["lr=1,2,3", "seed=0,1,2"])
    script = sweep_script("#!/bin/bash\n#SBATCH --time=5\necho $lr\n", grid, at_once=3)
    return Experiment(slug="s", job_id="40", cluster="c", submitted="", goal="", script=script, script_path="",
                      sweep={"grid": grid.words(), "at_once": 3, "retries": list(retries)})


def test_a_resubmission_is_the_same_script_naming_only_the_failed_tasks_its_limit_kept() -> None:
    from betty_jupyter.experiments.comparison import retry_script

    sweep = _sweep()
    again = retry_script(sweep, [7, 3])
    assert again == sweep.script.replace("#SBATCH --array=0-8%3\n", "#SBATCH --array=3,7%3\n")


def test_each_task_is_followed_at_its_latest_attempt() -> None:
    from betty_jupyter.cluster.arrays import array_job
    from betty_jupyter.cluster.jobs import Job, JobState
    from betty_jupyter.experiments.comparison import followed_tasks, task_indices

    assert task_indices("40_3") == [3] and task_indices("40_[3-5,7%2]") == [3, 4, 5, 7] and task_indices("40") == []
    sweep = _sweep([{"job_id": "50", "tasks": [3, 7]}])

    def task(ident: str, state: JobState) -> Job:
        return Job(job_id=ident, name="s", user="u", partition="cpu", state=state, exit_code="0:0")

    first = [task(f"40_{i}", JobState.FAILED if i in (3, 7) else JobState.COMPLETED) for i in range(9)]
    again = [task("50_3", JobState.COMPLETED), task("50_[7]", JobState.PENDING)]
    followed = followed_tasks(sweep, {"40": first, "50": again})
    assert sorted(job.job_id for job in followed) == sorted([f"40_{i}" for i in range(9) if i not in (3, 7)]
                                                            + ["40_3", "40_[7]"])
    whole = array_job("40", followed)
    assert whole is not None and whole.state is JobState.PENDING and whole.tasks == {"COMPLETED": 8, "PENDING": 1}


def test_a_sweep_failing_again_shows_the_log_of_the_latest_attempt() -> None:
    from betty_jupyter.cluster.jobs import Job, JobState
    from betty_jupyter.cluster.slurm import Snapshot
    from betty_jupyter.experiments.comparison import followed_job

    def task(ident: str, state: JobState) -> Job:
        return Job(job_id=ident, name="s", user="u", partition="cpu", state=state, exit_code="1:0")

    sweep = _sweep([{"job_id": "50", "tasks": [3]}])
    first = [task(f"40_{i}", JobState.FAILED if i == 3 else JobState.COMPLETED) for i in range(9)]
    whole = followed_job(sweep, Snapshot({}, "", (), {"40": first, "50": [task("50_3", JobState.OUT_OF_MEMORY)]}))
    assert whole is not None and whole.state is JobState.OUT_OF_MEMORY and whole.shown_task == "50_3"
