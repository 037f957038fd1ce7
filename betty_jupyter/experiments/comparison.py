"""A sweep's comparison: every task's point, state, runtime, efficiency, and the metrics it printed, side by side.

:func:`read_comparison` asks the cluster once for every task's record (one ``sacct``: the
array's and its resubmissions'), reads each task's output for its metrics
(:mod:`.task_metrics`) and diagnoses each failed task as a single job is diagnosed
(:func:`~.diagnosis.diagnose`). A task resubmitted (``--array=3,7`` of the same script) is
shown at its latest attempt, its earlier ones named beside it.

:func:`task_records` is what the ledger keeps (the last values, not the series), so the page's
table (:func:`comparison_table`) is rendered from the record as the rest of Betty's region is.
Every value that came from a log or from Slurm is escaped where it is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..cluster.arrays import array_job, is_task_of
from ..cluster.jobs import Job, JobState
from ..errors import BettyError, ExperimentError
from .ledger import Experiment
from .sweep import Grid, recorded_grid
from .sweep_page import array_ids, clock_text, notes_text, number_text, retries, rounds, task_cell
from .task_metrics import TaskMetrics, read_metrics

if TYPE_CHECKING:
    from ..cluster.slurm import SlurmClient, Snapshot

LOG_LINES = 20_000
"""How much of each task's output is read for its metrics (the end of it)."""
FAILED_TASK_STATES = frozenset({"FAILED", "OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                                "PREEMPTED"})
"""The states of a task that a resubmission by index may run again (a cancelled task was stopped on purpose)."""
_RANGE = re.compile(r"\[?([0-9,\-]+)(?:%[0-9]+)?\]?")


@dataclass(frozen=True)
class TaskResult:
    """One task of a sweep at its latest attempt."""

    index: int
    point: dict[str, str]
    job_id: str
    """``4242_3`` (``4250_3`` once resubmitted as array 4250); "" while Slurm has no record of it."""
    state: str
    elapsed_seconds: int | None = None
    efficiency: str = ""
    """The advisor's one line (``CPU 97% of 1 core(s) · memory …``), once the task ended."""
    metrics: TaskMetrics = field(default_factory=TaskMetrics)
    earlier: tuple[str, ...] = ()
    """The earlier attempts, as ``4242_3 FAILED``."""
    diagnosis: str = ""
    """Why a failed task failed, as the job babysitter says it for a single job (``Failed: the job failed …``)."""
    note: str = ""
    """Why its metrics could not be read, when they could not."""
    recorded: dict[str, float] = field(default_factory=dict)
    """The last values recorded for this attempt before, shown when its output can no longer be read (the controller
    forgets a task's files minutes after it ended)."""

    @property
    def last(self) -> dict[str, float]:
        """Each metric's last value: as read now, else as recorded before."""
        return self.metrics.last or dict(self.recorded)

    def record(self) -> dict[str, Any]:
        """What the ledger keeps: everything but the series."""
        return {"index": self.index, "job_id": self.job_id, "state": self.state,
                "elapsed_seconds": self.elapsed_seconds, "efficiency": self.efficiency,
                "metrics": self.last, "earlier": list(self.earlier), "diagnosis": self.diagnosis,
                "note": self.note}


@dataclass(frozen=True)
class Comparison:
    """Every task of one sweep, task 0 first."""

    slug: str
    grid: Grid
    tasks: tuple[TaskResult, ...]
    search: dict[str, Any] = field(default_factory=dict)
    """A search's summary as its last round read it (each task's objective, the best so far, the parameters'
    importance) and its stopped tasks (``stopped``: index → why); empty for a grid."""

    @property
    def metric_names(self) -> list[str]:
        """Every metric any task printed, in the order first seen."""
        return list(dict.fromkeys(name for task in self.tasks for name in [*task.metrics.series, *task.recorded]))

    def failed(self) -> list[int]:
        """The indices of the tasks whose latest attempt failed."""
        return [task.index for task in self.tasks if task.state in FAILED_TASK_STATES]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (the series as ``[step, value]`` pairs): what a tool's outcome carries to a notebook."""
        listed = {"points": self.grid.points()} if self.grid.rows is not None else {}
        return {"slug": self.slug, "grid": self.grid.words(), **listed, "search": self.search,
                "tasks": [{**task.record(), "series": {name: [list(point) for point in points]
                                                       for name, points in task.metrics.series.items()}}
                          for task in self.tasks]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Comparison":
        """Back from :meth:`to_json`; a one-line error for anything else."""
        try:
            grid = Grid.parse([str(word) for word in data["grid"]]) if data.get("points") is None else \
                Grid.listed(list(data["points"][0]) if data["points"] else [],
                            [{str(k): str(v) for k, v in point.items()} for point in data["points"]])
            points = grid.points()
            tasks = tuple(TaskResult(
                index=int(task["index"]), point=points[int(task["index"])], job_id=str(task["job_id"]),
                state=str(task["state"]), elapsed_seconds=task.get("elapsed_seconds"),
                efficiency=str(task.get("efficiency") or ""),
                metrics=TaskMetrics({str(name): [(float(step), float(value)) for step, value in series]
                                     for name, series in (task.get("series") or {}).items()}),
                earlier=tuple(str(item) for item in task.get("earlier") or ()),
                diagnosis=str(task.get("diagnosis") or ""), note=str(task.get("note") or ""),
                recorded={str(name): float(value) for name, value in (task.get("metrics") or {}).items()})
                for task in data["tasks"])
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ExperimentError(f"not a sweep's comparison ({type(error).__name__}: {error})") from error
        search = data.get("search")
        return cls(str(data["slug"]), grid, tasks, dict(search) if isinstance(search, Mapping) else {})


def latest_attempts(experiment: Experiment) -> dict[int, str]:
    """Each task's latest array, by index (the first array for a task never resubmitted)."""
    grid = recorded_grid(experiment.sweep)
    latest = {index: experiment.job_id for index in range(len(grid))}
    for retry in [*rounds(experiment), *retries(experiment)]:
        for index in retry.get("tasks") or []:
            latest[int(index)] = str(retry["job_id"])
    return latest


def followed_tasks(experiment: Experiment, tasks: Mapping[str, Sequence[Job]]) -> list[Job]:
    """The records of each task's latest attempt, named as tasks of the sweep's first array (``4242_3``), so
    :func:`~betty_jupyter.cluster.arrays.array_job` reads the sweep with its resubmissions as one job."""
    latest = latest_attempts(experiment)
    followed = []
    for array in array_ids(experiment):
        for task in tasks.get(array, ()):
            if any(latest.get(index) == array for index in task_indices(task.job_id)):
                index = task.job_id.partition("_")[2]
                followed.append(replace(task, job_id=f"{experiment.job_id}_{index}"))
    return followed


def followed_job(experiment: Experiment, snapshot: "Snapshot") -> Job | None:
    """The sweep as one job, each task at its latest attempt; the first array's own record when it has none.

    Its ``shown_task`` (the task whose log tells why it did not complete) is that attempt's real id (``4250_3``)."""
    if not retries(experiment) and not rounds(experiment):
        return snapshot.jobs.get(experiment.job_id)
    latest = latest_attempts(experiment)
    job = array_job(experiment.job_id, followed_tasks(experiment, snapshot.tasks))
    if job is None:
        return snapshot.jobs.get(experiment.job_id)
    shown = task_indices(job.shown_task or "")
    return replace(job, shown_task=f"{latest[shown[0]]}_{shown[0]}") if len(shown) == 1 and shown[0] in latest \
        else job


def task_indices(task_id: str) -> list[int]:
    """The indices one task record stands for: ``4242_3`` → [3]; ``4242_[3-5,7%2]`` → [3, 4, 5, 7]."""
    spec = task_id.partition("_")[2]
    found = _RANGE.fullmatch(spec)
    if found is None:
        return []
    indices: list[int] = []
    for part in found.group(1).split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            indices += range(int(first), int(last or first) + 1)
    return indices


async def read_comparison(slurm: "SlurmClient", experiment: Experiment) -> Comparison:
    """Every task of ``experiment`` (a sweep) now: one ``sacct`` for all, each task's output, each failure's cause."""
    grid = recorded_grid(experiment.sweep)
    snapshot = await slurm.snapshot(array_ids(experiment))
    figures = snapshot.efficiency()
    records = _by_index(experiment, snapshot.tasks)
    diagnose = _Diagnoser(slurm, experiment)
    before = {str(task.get("job_id")): {str(k): float(v) for k, v in (task.get("metrics") or {}).items()}
              for task in (experiment.sweep or {}).get("tasks") or [] if isinstance(task, dict)}
    results = []
    for index, point in enumerate(grid.points()):
        attempts = records.get(index, [])
        result = await _result(slurm, index, point, attempts, figures, grid, diagnose)
        kept = before.get(result.job_id) if result.note else None
        results.append(replace(result, recorded=kept, note=f"{result.note}; its values as read before")
                       if kept else result)
    return Comparison(experiment.slug, grid, tuple(results), search_record(experiment))


def search_record(experiment: Experiment) -> dict[str, Any]:
    """What the comparison shows of a search: its last summary and its stopped tasks; empty for a grid."""
    sweep = experiment.sweep or {}
    summary = sweep.get("summary")
    if not sweep.get("search") or not isinstance(summary, Mapping):
        return {}
    return {**summary, "stopped": dict(sweep.get("stopped") or {})}


def _by_index(experiment: Experiment, tasks: Mapping[str, Sequence[Job]]) -> dict[int, list[Job]]:
    """Each task's records, first attempt first (a pending range stands for each of its indices)."""
    found: dict[int, list[Job]] = {}
    for array in array_ids(experiment):
        for task in tasks.get(array, ()):
            if is_task_of(task.job_id, array):
                for index in task_indices(task.job_id):
                    found.setdefault(index, []).append(task)
    return found


async def _result(slurm: "SlurmClient", index: int, point: dict[str, str], attempts: list[Job],
                  figures: Mapping[str, Any], grid: Grid, diagnose: "_Diagnoser") -> TaskResult:
    if not attempts:
        return TaskResult(index, point, "", "PENDING", note="not recorded by Slurm yet")
    task = attempts[-1]
    earlier = tuple(f"{old.job_id} {old.state.value}" for old in attempts[:-1])
    state = task.state.value
    single = len(task_indices(task.job_id)) == 1 and "[" not in task.job_id
    if not single:
        return TaskResult(index, point, "", state, earlier=earlier)
    # lazy: the advisor's one line for a task's figures
    from ..cluster.job_efficiency import summary_line

    figure = figures.get(task.job_id)
    elapsed = int(task.elapsed.total_seconds()) if task.elapsed is not None else None
    metrics, note = TaskMetrics(), ""
    if task.state is not JobState.PENDING:
        try:
            metrics = read_metrics(await slurm.tail(task.job_id, "out", LOG_LINES), grid.names)
        except BettyError as error:
            note = f"output not read: {str(error).splitlines()[0][:200]}"
    why = await diagnose(task) if state in FAILED_TASK_STATES else ""
    return TaskResult(index, point, task.job_id, state, elapsed, summary_line(figure) if figure else "", metrics,
                      earlier, why, note)


class _Diagnoser:
    """Each failed task diagnosed as a single job; the cluster's partitions read once, when a task failed."""

    def __init__(self, slurm: "SlurmClient", experiment: Experiment) -> None:
        self.slurm, self.experiment = slurm, experiment
        self._partitions: list[Any] | None = None

    async def __call__(self, task: Job) -> str:
        # lazy: the diagnosis and the Slurm commands behind it; only a failed task needs them
        from .diagnosis import TITLES, diagnose, partition_limits
        from .refresh import failure_log

        try:
            if self._partitions is None:
                self._partitions = partition_limits(await self.slurm.partitions())
            found = diagnose(task, await failure_log(self.slurm, task), self.experiment.script, self._partitions,
                             self.experiment.gpu_estimate)
        except BettyError as error:
            return f"not diagnosed: {str(error).splitlines()[0][:200]}"
        return f"{TITLES[found.cause]}: {found.summary}"


def task_records(comparison: Comparison) -> list[dict[str, Any]]:
    """The comparison as the ledger keeps it on the experiment (``sweep["tasks"]``)."""
    return [task.record() for task in comparison.tasks]


def with_tasks(experiment: Experiment, comparison: Comparison) -> Experiment:
    """``experiment`` with the comparison's records in its sweep."""
    return replace(experiment, sweep={**(experiment.sweep or {}), "tasks": task_records(comparison)})


def task_states(experiment: Experiment, snapshot: "Snapshot") -> dict[int, str]:
    """Each task's state at its latest attempt, from one snapshot (no log read); tasks Slurm has no record of left
    out."""
    grid_size = len(recorded_grid(experiment.sweep))
    records = _by_index(experiment, snapshot.tasks)
    return {index: attempts[-1].state.value for index, attempts in records.items() if 0 <= index < grid_size}


def retry_script(experiment: Experiment, indices: Sequence[int]) -> str:
    """The sweep's own script with ``--array`` naming only ``indices`` (``3,7``), its ``%N`` throttle kept."""
    # lazy: the batch-script parser; reading a comparison never needs it
    from ..cluster.sbatch import SbatchScript

    parsed = SbatchScript.parse(experiment.script)
    throttle = (parsed.get("array") or "").partition("%")[2]
    spec = ",".join(str(index) for index in sorted(set(indices)))
    return parsed.with_options(array=spec + (f"%{throttle}" if throttle else "")).text


def comparison_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The comparison as a header and rows of plain text (``betty sweeps show``, the widget): a row per task, a
    column per parameter and per metric (a metric may share a name with a column: they are kept apart by place)."""
    metrics = comparison.metric_names
    header = ["task", *comparison.grid.names, "state", "runtime", "efficiency", *metrics, "notes"]
    rows = []
    for task in comparison.tasks:
        record = task.record()
        rows.append([task_cell(record), *task.point.values(), task.state, clock_text(task.elapsed_seconds),
                     task.efficiency, *(number_text(task.last.get(name)) for name in metrics),
                     notes_text(record)])
    return header, rows
