"""A sweep that searches: Betty proposes each round's points from the results so far, and stops tasks that lag.

``--search bayes`` (Optuna's TPE), ``random`` or ``grid`` over a :class:`~.sweep.Space`, up to
``--budget`` tasks, ``--batch`` at a time, scoring each task by the last value of its objective
metric (``--objective loss:min``, read from its log as every metric is, :mod:`.task_metrics`).
With ``--early-stop median`` or ``halving`` a running task whose ``step=N`` values are clearly
worse than the others' at the same step is proposed for stopping.

The study is Optuna's journal file ``.betty/studies/<slug>.journal`` in the project: it survives
a restart and a copy of the project to another machine, and it runs only in Betty's process.
Optuna is imported only here, and only when a search runs.

A round (:func:`plan_round`) tells the study every task that ended — its objective's last value,
or a failure when it printed none ("no loss printed", never a zero) — reports the running tasks'
steps, and proposes the next points and the tasks to stop. The person approves each round on one
card, or once for every round within a budget of tasks and GPU-hours (:func:`within_consent`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import UsageError
from .sweep import MAX_TASKS, Space

if TYPE_CHECKING:
    import optuna

SEARCHES = ("bayes", "random", "grid")
"""How the next points are chosen: Optuna's TPE, uniformly at random, or the grid's points in turn."""
EARLY_STOPS = ("median", "halving")
"""How lagging tasks are found: below the median of the others at the same step, or successive halving."""
MAX_BATCH = 100
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL",
                   "DEADLINE", "PREEMPTED"})
"""The states of a task that has ended (its trial is told to the study)."""


@dataclass(frozen=True)
class Objective:
    """The metric a search scores each task by, and whether lower or higher is better."""

    metric: str
    direction: str = "min"

    @classmethod
    def parse(cls, text: str) -> "Objective":
        """``loss:min`` or ``acc:max`` → an objective; a one-line UsageError otherwise."""
        metric, _, direction = text.strip().partition(":")
        direction = direction or "min"
        if not metric.isidentifier() or not metric.isascii() or len(metric) > 64 or direction not in ("min", "max"):
            raise UsageError(f"--objective {text[:60]!r}: give METRIC:min or METRIC:max (e.g. loss:min), the "
                             "name a task prints as METRIC=NUMBER")
        return cls(metric, direction)

    def word(self) -> str:
        """``loss:min``."""
        return f"{self.metric}:{self.direction}"


@dataclass(frozen=True)
class Search:
    """How a sweep searches, and what the person consented to run without a card per round."""

    method: str
    budget: int
    objective: Objective
    batch: int
    early_stop: str | None = None
    consent_tasks: int | None = None
    """Later rounds run without a card while the sweep's tasks stay within this many; None: a card every round."""
    consent_gpu_hours: float | None = None
    """…and while its tasks' GPU-hours (each at its time limit) stay within this many; None: no such limit."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in SEARCHES:
            raise UsageError(f"--search {self.method[:20]!r}: give one of {', '.join(SEARCHES)}")
        if self.early_stop is not None and self.early_stop not in EARLY_STOPS:
            raise UsageError(f"--early-stop {self.early_stop[:20]!r}: give one of {', '.join(EARLY_STOPS)}")
        if not 1 <= self.budget <= MAX_TASKS:
            raise UsageError(f"--budget {self.budget}: give a number of tasks from 1 to {MAX_TASKS}")
        if not 1 <= self.batch <= min(MAX_BATCH, self.budget):
            raise UsageError(f"--batch {self.batch}: give a number of tasks from 1 to the budget "
                             f"({min(MAX_BATCH, self.budget)})")
        if self.consent_tasks is not None and self.consent_tasks < 0:
            raise UsageError("the approved number of tasks cannot be below 0")

    def to_json(self) -> dict[str, Any]:
        """What the ledger keeps on the sweep (``sweep["search"]``)."""
        return {**asdict(self), "objective": self.objective.word()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Search":
        """Back from :meth:`to_json`."""
        return cls(method=str(data["method"]), budget=int(data["budget"]),
                   objective=Objective.parse(str(data["objective"])), batch=int(data["batch"]),
                   early_stop=data.get("early_stop"), consent_tasks=data.get("consent_tasks"),
                   consent_gpu_hours=data.get("consent_gpu_hours"), seed=int(data.get("seed") or 0))

    def describe(self) -> str:
        """``bayes search for the lowest loss: up to 20 tasks, 4 at a time, lagging tasks stopped (median)``."""
        best = "lowest" if self.objective.direction == "min" else "highest"
        stops = f", lagging tasks stopped ({self.early_stop})" if self.early_stop else ""
        return (f"{self.method} search for the {best} {self.objective.metric}: up to {self.budget} tasks, "
                f"{self.batch} at a time{stops}")


def seed_for(words: Sequence[str], script: str) -> int:
    """A seed fixed by the sweep's parameters and script: the first round's card shows the points that run."""
    return int.from_bytes(hashlib.sha256(json.dumps([list(words), script]).encode()).digest()[:4], "big")


@dataclass(frozen=True)
class Observation:
    """One submitted task as the search sees it: its trial, its state, its objective's ``(step, value)`` series."""

    index: int
    trial: int
    state: str
    series: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Stop:
    """A running task the round proposes to stop, and why."""

    index: int
    why: str


@dataclass(frozen=True)
class Round:
    """What one round proposes: new points (each with its trial), and running tasks to stop."""

    points: tuple[tuple[int, dict[str, str]], ...] = ()
    stops: tuple[Stop, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.points or self.stops)

    def to_json(self) -> dict[str, Any]:
        """The proposal as the ledger keeps it until it runs (``sweep["proposal"]``)."""
        return {"points": [{"trial": trial, "point": point} for trial, point in self.points],
                "stops": [asdict(stop) for stop in self.stops]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Round":
        """Back from :meth:`to_json`."""
        return cls(tuple((int(p["trial"]), {str(k): str(v) for k, v in p["point"].items()}) for p in data["points"]),
                   tuple(Stop(int(s["index"]), str(s["why"])) for s in data.get("stops") or []))


def study_path(state: Path, slug: str) -> Path:
    """Where a sweep's study lives: ``.betty/studies/<slug>.journal``."""
    return state / "studies" / f"{slug}.journal"


def open_study(path: Path, space: Space, search: Search) -> "optuna.Study":
    """The sweep's study, created on first use, loaded from its journal file afterwards."""
    # lazy: Optuna, only while a search runs
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="sweep", storage=storage, sampler=_sampler(space, search),
                                pruner=_pruner(search), load_if_exists=True,
                                direction="minimize" if search.objective.direction == "min" else "maximize")
    if study.get_trials(deepcopy=False):
        # The seed fixes the first round (its card shows what runs); later rounds must not draw those points again.
        study.sampler.reseed_rng()
    return study


def first_points(space: Space, search: Search) -> list[tuple[int, dict[str, str]]]:
    """The first round's points, drawn as a new study with the sweep's seed draws them: what the card shows runs."""
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=_sampler(space, search), pruner=_pruner(search))
    return propose(study, space, search, search.batch if grid_size(space, search) is None
                   else min(search.batch, grid_size(space, search) or 0))


def _sampler(space: Space, search: Search) -> "optuna.samplers.BaseSampler":
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import optuna

    if search.method == "grid":
        grid = space.grid()
        return optuna.samplers.GridSampler({name: list(values) for name, values in grid.parameters}, seed=search.seed)
    if search.method == "random":
        return optuna.samplers.RandomSampler(seed=search.seed)
    return optuna.samplers.TPESampler(seed=search.seed, n_startup_trials=max(search.batch, 4))


def _pruner(search: Search) -> "optuna.pruners.BasePruner":
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import optuna

    if search.early_stop == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    if search.early_stop == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    return optuna.pruners.NopPruner()


def distributions(space: Space, search: Search) -> dict[str, "optuna.distributions.BaseDistribution"]:
    """Each parameter as Optuna draws it: a float or whole-number range (log or not), or one of its values."""
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if search.method == "grid":
        return {name: CategoricalDistribution(list(values)) for name, values in space.grid().parameters}
    found: dict[str, Any] = {}
    for parameter in space.parameters:
        if parameter.values:
            found[parameter.name] = CategoricalDistribution(list(parameter.values))
        elif parameter.whole:
            found[parameter.name] = IntDistribution(int(parameter.low), int(parameter.high), log=parameter.log)
        else:
            found[parameter.name] = FloatDistribution(parameter.low, parameter.high, log=parameter.log)
    return found


def point_text(value: Any) -> str:
    """A drawn value as the task's shell variable gets it: ``0.000316228``, ``4``, ``adam``."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def propose(study: "optuna.Study", space: Space, search: Search, count: int) -> list[tuple[int, dict[str, str]]]:
    """``count`` new trials asked of the study: each one's number and point."""
    fixed = distributions(space, search)
    asked = []
    for _ in range(count):
        trial = study.ask(fixed)
        asked.append((trial.number, {name: point_text(trial.params[name]) for name in space.names}))
    return asked


def grid_size(space: Space, search: Search) -> int | None:
    """How many points a grid search has (None for other searches)."""
    return len(space.grid()) if search.method == "grid" else None


def plan_round(study: "optuna.Study", space: Space, search: Search, observations: Sequence[Observation],
               stopped: Mapping[int, str] = {}) -> Round:
    """Tell the study what ended, report what runs, and propose the next points and the tasks to stop.

    ``stopped`` are the tasks stopped in earlier rounds (index → why): they are told as pruned. A
    task that ended without printing its objective is told as failed, never scored.
    """
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import optuna
    from optuna.trial import TrialState

    by_number = {trial.number: trial for trial in study.get_trials(deepcopy=False)}
    running = 0
    stops: list[Stop] = []
    metric = search.objective.metric
    for seen in observations:
        trial = by_number.get(seen.trial)
        if trial is None or trial.state is not TrialState.RUNNING:
            continue
        live = optuna.trial.Trial(study, trial._trial_id)
        for step, value in seen.series:
            if int(step) not in trial.intermediate_values and step >= 0:
                live.report(value, int(step))
        if seen.state in ENDED:
            if seen.index in stopped:
                live.set_user_attr("why", stopped[seen.index])
                study.tell(live, state=TrialState.PRUNED)
            elif seen.state == "COMPLETED" and seen.series:
                study.tell(live, seen.series[-1][1])
            else:
                live.set_user_attr("why", f"no {metric} printed" if not seen.series else seen.state.lower())
                study.tell(live, state=TrialState.FAIL)
            continue
        if seen.index in stopped:
            continue
        running += 1
        if search.early_stop and seen.series and live.should_prune():
            stops.append(Stop(seen.index, _why(study, search, seen)))
    submitted = len(observations)
    room = search.budget - submitted
    size = grid_size(space, search)
    if size is not None:
        room = min(room, size - submitted)
    count = max(0, min(search.batch - (running - len(stops)), room))
    return Round(tuple(propose(study, space, search, count)), tuple(stops))


def _why(study: "optuna.Study", search: Search, seen: Observation) -> str:
    """Why a task is stopped: its value at its last step against the others' there."""
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import statistics

    # lazy: Optuna (and the standard library's statistics), only while a search runs
    from optuna.trial import TrialState

    step, value = seen.series[-1]
    others = [t.intermediate_values[int(step)] for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                                                                TrialState.PRUNED))
              if int(step) in t.intermediate_values]
    metric = search.objective.metric
    if search.early_stop == "median" and others:
        median = statistics.median(others)
        return (f"median rule: {metric}={value:.6g} at step {int(step)}, worse than the median {median:.6g} "
                f"of {len(others)} other task(s) at that step")
    return f"successive halving: {metric}={value:.6g} at step {int(step)} is not among the best at that step"


def gpu_hours(count: int, gpus_per_task: int, minutes_per_task: int | None) -> float | None:
    """The most GPU-hours ``count`` tasks may use (each at its time limit); None when the limit is unknown."""
    if not gpus_per_task:
        return 0.0
    if minutes_per_task is None:
        return None
    return count * gpus_per_task * minutes_per_task / 60


def within_consent(search: Search, submitted: int, proposed: int, gpus_per_task: int,
                   minutes_per_task: int | None) -> bool:
    """Whether a round of ``proposed`` more tasks runs without a card: the person approved later rounds and the
    sweep's tasks, and their GPU-hours at each task's time limit, stay within what they approved."""
    if search.consent_tasks is None or submitted + proposed > search.consent_tasks:
        return False
    if search.consent_gpu_hours is None:
        return True
    used = gpu_hours(submitted + proposed, gpus_per_task, minutes_per_task)
    return used is not None and used <= search.consent_gpu_hours


def consent_line(search: Search) -> str:
    """What the person approved for later rounds, in one line."""
    if search.consent_tasks is None:
        return "every round waits for its own card"
    hours = f" and {search.consent_gpu_hours:g} GPU-hours" if search.consent_gpu_hours is not None else ""
    return f"later rounds run without a card while the sweep stays within {search.consent_tasks} tasks{hours}"


@dataclass(frozen=True)
class Trial:
    """One trial of a study as the comparison shows it."""

    index: int
    value: float | None
    state: str
    why: str = ""


@dataclass(frozen=True)
class Summary:
    """A search at a glance: each trial's objective, the best so far after each, the parameters' importance."""

    objective: str
    trials: tuple[Trial, ...] = ()
    best_so_far: tuple[float | None, ...] = ()
    importance: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for a page, a notebook and the panel."""
        return {"objective": self.objective, "trials": [asdict(t) for t in self.trials],
                "best_so_far": list(self.best_so_far), "importance": self.importance}


IMPORTANCE_AFTER = 5
"""The completed trials a parameter's importance needs before it is shown."""


def summarize(study: "optuna.Study", search: Search, index_of: Mapping[int, int]) -> Summary:
    """The study read back: trial by task index, the best value after each, and Optuna's parameter importance."""
    # lazy: Optuna (and the standard library's statistics), only while a search runs
    import optuna
    from optuna.trial import TrialState

    trials = []
    best: float | None = None
    running_best = []
    better = min if search.objective.direction == "min" else max
    for trial in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if trial.number not in index_of:
            continue
        value = trial.value if trial.state is TrialState.COMPLETE else None
        if value is not None:
            best = value if best is None else better(best, value)
        running_best.append(best)
        trials.append(Trial(index_of[trial.number], value, trial.state.name, str(trial.user_attrs.get("why", ""))))
    importance: dict[str, float] = {}
    if sum(1 for t in trials if t.value is not None) >= IMPORTANCE_AFTER:
        try:
            importance = {k: float(v) for k, v in optuna.importance.get_param_importances(study).items()}
        except (ValueError, RuntimeError):
            importance = {}
    return Summary(search.objective.word(), tuple(trials), tuple(running_best), importance)


def native(space: Space, search: Search, point: Mapping[str, str]) -> dict[str, Any]:
    """A point's values as the study holds them: floats and whole numbers back from their text, kept in range."""
    found: dict[str, Any] = {}
    for parameter in space.parameters:
        text = point[parameter.name]
        if parameter.values or search.method == "grid":
            found[parameter.name] = text
        elif parameter.whole:
            found[parameter.name] = min(max(int(text), int(parameter.low)), int(parameter.high))
        else:
            found[parameter.name] = min(max(float(text), parameter.low), parameter.high)
    return found


def start_study(state: Path, slug: str, space: Space, search: Search, points: Sequence[dict[str, str]]) -> None:
    """Create the sweep's study with its first round's points as its first trials (task N is trial N)."""
    study = open_study(study_path(state, slug), space, search)
    fixed = distributions(space, search)
    for point in points:
        study.enqueue_trial(native(space, search, point))
        study.ask(fixed)
