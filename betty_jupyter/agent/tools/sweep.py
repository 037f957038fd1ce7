"""Sweeps: ``cluster_sweep`` runs one batch script at every point of a grid, as one job array, approved once, one
experiment; ``sweep_compare`` puts its tasks side by side, ``sweep_retry`` runs the failed ones again by index and
``sweep_cancel`` stops the rest, each one card."""

from __future__ import annotations

import shlex
import time
from functools import partial
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ...cluster.jobs import task_summary
from ...cluster.text_tables import aligned
from ...errors import UsageError
from ...experiments.comparison import (FAILED_TASK_STATES, comparison_rows, latest_attempts, read_comparison,
                                       retry_script, task_states)
from ...experiments.ledger import Experiment, Ledger
from ...experiments.record import submit_experiment
from ...experiments.search import (Objective, Observation, Round, Search, consent_line, first_points, open_study,
                                   plan_round, seed_for, start_study, study_path, summarize, within_consent)
from ...experiments.sweep import (MAX_TASKS, Grid, Space, grid_table, own_script, recorded_grid, size_line,
                                  sweep_script)
from ...experiments.sweep_page import array_ids, retries, rounds_of
from ...safe_text import terminal_line
from ...wiki import WikiStore
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError
from .jobs import MAX_SCRIPT_CHARS, ClusterSubmit, SubmitArgs, checked_submission, preflight

if TYPE_CHECKING:
    from ...cluster.jobs import Job


class SweepArgs(ToolArgs):
    """A batch script, the grid of parameters it runs at, and why."""

    script: str = Field(min_length=1, max_length=MAX_SCRIPT_CHARS,
                        description="the batch script, '#!/bin/bash' and '#SBATCH' lines first; it reads each "
                                    "parameter as a shell variable ($lr, ${seed})")
    grid: list[str] = Field(min_length=1, max_length=20,
                            description='each parameter and its values: ["lr=1e-4,3e-4,1e-3", "seed=0,1,2"]')
    at_once: int | None = Field(None, ge=1, le=MAX_TASKS,
                                description="at most this many tasks running at a time (Slurm's %N throttle)")
    goal: str = Field(min_length=1, max_length=4000, description="what this sweep is for, in the researcher's words")
    name: str | None = Field(None, max_length=80, description="a short name for the experiment (default: job name)")
    first_line: int = Field(1, ge=1, le=1_000_000,
                            description="the number the person sees beside the script's first line (2 in a "
                                        "%%betty sweep cell, under the magic's own line)")
    search: Literal["bayes", "random", "grid"] | None = Field(
        None, description="search instead of running every point: bayes (TPE), random or grid; the grid may then "
                          "hold ranges (lr=1e-5..1e-2:log, layers=2..8); later rounds come as sweep_round cards")
    budget: int | None = Field(None, ge=1, le=MAX_TASKS, description="a search runs at most this many tasks in all")
    objective: str | None = Field(None, max_length=80,
                                  description="what a search scores each task by: METRIC:min or METRIC:max, the "
                                              "last METRIC=NUMBER the task printed (e.g. loss:min)")
    early_stop: Literal["median", "halving"] | None = Field(
        None, description="a search proposes stopping running tasks whose step=N values lag the others'")
    batch: int | None = Field(None, ge=1, le=100, description="a search runs this many tasks at a time (default 4)")
    approve_tasks: int | None = Field(None, ge=0, le=MAX_TASKS,
                                      description="the person approves later rounds now, within this many tasks in "
                                                  "all; only when they said so")
    approve_gpu_hours: float | None = Field(None, ge=0, le=1_000_000,
                                            description="…and within this many GPU-hours (each task at its time "
                                                        "limit)")


class ClusterSweep(Tool[SweepArgs]):
    """Run a batch script at every point of a grid as one Slurm job array, recorded as one experiment."""

    name = "cluster_sweep"
    description = ("Run one batch script at every point of a grid of parameters (e.g. lr=1e-4,3e-4 seed=0,1) as "
                   "one Slurm job array: one approval for the whole sweep, with its size and cost shown, and one "
                   "experiment page listing each task's parameters. The script reads each parameter as a shell "
                   "variable.")
    Args = SweepArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: SweepArgs) -> Preview:
        """The array's script exactly as uploaded, the grid task by task, its size and cost, where it goes; for a
        search, its first round's points and what later rounds may do without a card."""
        grid, script, search = _sweep(args)
        submitted = await ClusterSubmit().preview(ctx, _as_submission(args, script))
        details: dict[str, Any] = {**submitted.details, "tasks": len(grid), "grid": grid.words(),
                                   "at_once": args.at_once, "size": _size(grid, args.at_once, script),
                                   "points": grid_table(grid)}
        slug = str(details.get("page", "")).removeprefix("wiki/experiments/").removesuffix(".md")
        title = f"sweep {slug} on {details['cluster']}: {details['size']}; each task {details['resources']}"
        if search is not None:
            details.update(search=search.describe(), grid=list(args.grid), later_rounds=consent_line(search))
            title = (f"sweep {slug} on {details['cluster']}: round 1 of a {search.describe()}: "
                     f"{details['size']}; each task {details['resources']}; {consent_line(search)}")
        return Preview(kind="script", title=title, text=script, details=details)

    async def run(self, ctx: ToolContext, args: SweepArgs) -> ToolOutcome:
        """Check the array's script again, submit it once, record it as one experiment (a search: its study too)."""
        grid, text, search = _sweep(args)
        script = checked_submission(_as_submission(args, text), await ctx.slurm.partitions())
        await preflight(ctx, script, args.first_line)
        record: dict[str, Any] = {"grid": grid.words(), "at_once": args.at_once}
        if search is not None:
            record = {"grid": Space.parse(args.grid).words(), "at_once": args.at_once, "search": search.to_json(),
                      "trials": [{"trial": n, "point": point, "round": 1} for n, point in enumerate(grid.points())],
                      "rounds": []}
        experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script, goal=args.goal,
                                             name=args.name, sweep=record)
        if search is not None:
            start_study(ctx.workspace.state, experiment.slug, Space.parse(args.grid), search, grid.points())
        page = f"wiki/{experiment.page}"
        summary = (f"submitted sweep {experiment.slug} as job array {experiment.job_id} on {experiment.cluster}: "
                   f"{len(grid)} tasks; page {page}, notebook {experiment.notebook}")
        if search is not None:
            summary += f"; round 1 of a {search.describe()}; {consent_line(search)}"
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}",
                           data=experiment, artifacts=[page, experiment.notebook])


def _sweep(args: SweepArgs) -> tuple[Grid, str, Search | None]:
    """The grid (a search's first round), the array's script and the search; ToolError in one line when any cannot
    be made."""
    try:
        if args.search is None:
            if any(value is not None for value in (args.budget, args.objective, args.early_stop, args.batch,
                                                   args.approve_tasks, args.approve_gpu_hours)):
                raise UsageError("--budget, --objective, --early-stop, --batch and the approvals of later rounds "
                                 "belong to a search: add --search bayes|random|grid")
            grid = Grid.parse(args.grid)
            return grid, sweep_script(args.script, grid, args.at_once), None
        space = Space.parse(args.grid)
        if not args.objective:
            raise UsageError("a search needs --objective METRIC:min|max (e.g. loss:min): what each task is scored by")
        budget = args.budget or 20
        search = Search(args.search, budget, Objective.parse(args.objective), args.batch or min(4, budget),
                        args.early_stop, args.approve_tasks, args.approve_gpu_hours, seed_for(args.grid, args.script))
        if search.objective.metric in space.names:
            raise UsageError(f"--objective {search.objective.metric} is a parameter of the sweep, not a metric")
        grid = Grid.listed(space.names, [point for _, point in first_points(space, search)])
        return grid, sweep_script(args.script, grid, args.at_once), search
    except UsageError as error:
        raise ToolError(str(error)) from error


def _as_submission(args: SweepArgs, script: str) -> SubmitArgs:
    return SubmitArgs.model_validate({"script": script, "goal": args.goal, "name": args.name,
                                      "first_line": args.first_line})


def _size(grid: Grid, at_once: int | None, script: str) -> str:
    # lazy: the batch-script parser, for the request of each task
    from ...cluster.sbatch import SbatchScript

    parsed = SbatchScript.parse(script)
    gpus = parsed.gpu_request()
    minutes = parsed.time_minutes()
    return size_line(grid, at_once, gpus[1] if gpus else 0, minutes)


class SweepArg(ToolArgs):
    """One recorded sweep."""

    experiment: str = Field(min_length=1, max_length=120,
                            description="the sweep's experiment: its slug or its job array's id")


class RetryArgs(SweepArg):
    """A recorded sweep and the tasks to run again."""

    tasks: list[int] = Field(min_length=1, max_length=MAX_TASKS,
                             description="the indices of the failed tasks to run again, e.g. [3, 7]")


class SweepCompare(Tool[SweepArg]):
    """Every task of a sweep side by side: its point, state, runtime, efficiency and the metrics it printed."""

    name = "sweep_compare"
    description = ("Compare the tasks of a recorded sweep: each task's parameters, state, runtime, efficiency, the "
                   "last value of each name=value metric it printed, and why a failed task failed. Reads each "
                   "task's output.")
    Args = SweepArg
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: SweepArg) -> Preview:
        """What is read: every task's record (one sacct) and output."""
        experiment = recorded_sweep(ctx, args.experiment)
        arrays = " ".join(array_ids(experiment))
        return Preview(kind="text", title=f"compare the tasks of sweep {experiment.slug}",
                       text=f"read job array(s) {arrays} on {ctx.profile.name}: every task's record (sacct), "
                            "the end of each task's output (tail), and each failed task's log",
                       details={"experiment": experiment.slug, "job_id": experiment.job_id})

    async def run(self, ctx: ToolContext, args: SweepArg) -> ToolOutcome:
        """The comparison in ``data``; a text table for the model and the person."""
        experiment = recorded_sweep(ctx, args.experiment)
        comparison = await read_comparison(ctx.slurm, experiment)
        header, rows = comparison_rows(comparison)
        table = aligned([terminal_line(cell) for cell in header], [[terminal_line(c) for c in row] for row in rows])
        failed = comparison.failed()
        summary = f"sweep {experiment.slug} (job array {experiment.job_id}): {len(rows)} tasks" + (
            f"; failed: {', '.join(map(str, failed))}" if failed else "")
        return ToolOutcome(summary=f"{summary}\n{table}", full=f"{summary}\n{table}", data=comparison.to_json())


class SweepRetry(Tool[RetryArgs]):
    """Run the failed tasks of a sweep again by index: the same script, ``--array=3,7``, one card."""

    name = "sweep_retry"
    description = ("Resubmit only the failed tasks of a recorded sweep, by index (sbatch --array=3,7 of the same "
                   "script, its at-once limit kept), recorded on the same experiment. One approval for all of them.")
    Args = RetryArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: RetryArgs) -> Preview:
        """The script exactly as it will be uploaded (``--array`` naming only these tasks) and each task's point."""
        experiment = recorded_sweep(ctx, args.experiment)
        indices = await _failed_indices(ctx, experiment, args.tasks)
        script = retry_script(experiment, indices)
        grid = recorded_grid(experiment.sweep)
        points = grid.points()
        shown = ", ".join(map(str, indices))
        listing = "\n".join(f"task {index}: " + " ".join(f"{name}={value}" for name, value in points[index].items())
                            for index in indices)
        which = f"task {shown}" if len(indices) == 1 else f"tasks {shown}"
        title = (f"resubmit {which} of sweep {experiment.slug} (job array {experiment.job_id}) on "
                 f"{ctx.profile.name} with the same script")
        return Preview(kind="script", title=title, text=script,
                       details={"experiment": experiment.slug, "job_id": experiment.job_id, "tasks": indices,
                                "points": listing, "cluster": ctx.profile.name,
                                "page": f"wiki/{experiment.page}"})

    async def run(self, ctx: ToolContext, args: RetryArgs) -> ToolOutcome:
        """Check the tasks again, submit once, record the resubmission on the sweep's experiment."""
        experiment = recorded_sweep(ctx, args.experiment)
        indices = await _failed_indices(ctx, experiment, args.tasks)
        script = retry_script(experiment, indices)
        count = len(retries(experiment)) + 1
        job_id = await ctx.slurm.submit(script, script_name=f"{experiment.slug}-retry-{count}.sbatch")
        retry = {"job_id": job_id, "tasks": indices, "submitted": datetime.now().strftime("%Y-%m-%dT%H:%M:%S")}
        Ledger(ctx.workspace.ledger_path).change_sweep(
            experiment.slug, lambda now: {**(now or {}), "retries": [*((now or {}).get("retries") or []), retry]})
        WikiStore(ctx.workspace.wiki).log(f"resubmitted tasks {', '.join(map(str, indices))} of {experiment.slug} "
                                          f"as job array {job_id}")
        summary = (f"resubmitted tasks {', '.join(map(str, indices))} of sweep {experiment.slug} as job array "
                   f"{job_id} on {ctx.profile.name}; recorded on wiki/{experiment.page}")
        return ToolOutcome(summary=summary, full=summary, data=retry, artifacts=[f"wiki/{experiment.page}"])


class SweepCancel(Tool[SweepArg]):
    """Cancel every task of a sweep still queued or running: one card, scancel of its job array."""

    name = "sweep_cancel"
    description = ("Cancel a recorded sweep: every task still pending or running, in its job array and its "
                   "resubmissions (scancel of the array's id). One approval.")
    Args = SweepArg
    tier = Tier.ALWAYS_ASK

    async def preview(self, ctx: ToolContext, args: SweepArg) -> Preview:
        """The scancel command and what each array's tasks are doing now; a sweep that has ended is refused."""
        experiment = recorded_sweep(ctx, args.experiment)
        live = await _live_arrays(ctx, experiment)
        states = "; ".join(f"job array {job.job_id}: {task_summary(job.tasks) if job.tasks else job.state.value}"
                           for job in live)
        return Preview(kind="command", title=f"cancel sweep {experiment.slug} on {ctx.profile.name} ({states})",
                       text=shlex.join(["scancel", *(job.job_id for job in live)]),
                       details={"experiment": experiment.slug, "job_id": experiment.job_id,
                                "arrays": [job.job_id for job in live], "cluster": ctx.profile.name})

    async def run(self, ctx: ToolContext, args: SweepArg) -> ToolOutcome:
        """scancel each array that still has a task queued or running, once."""
        experiment = recorded_sweep(ctx, args.experiment)
        live = await _live_arrays(ctx, experiment)
        for job in live:
            await ctx.slurm.cancel(job.job_id)
        summary = (f"cancelled sweep {experiment.slug} on {ctx.profile.name}: job array(s) "
                   f"{', '.join(job.job_id for job in live)}")
        return ToolOutcome(summary=summary, full=summary)


def recorded_sweep(ctx: ToolContext, experiment: str) -> Experiment:
    """The sweep recorded in this workspace as ``experiment`` (slug or job array id) on this cluster."""
    tracked = Ledger(ctx.workspace.ledger_path).get(experiment) if ctx.workspace.ledger_path.exists() else None
    if tracked is None or tracked.experiment.cluster != ctx.profile.name:
        raise ToolError(f"no sweep {experiment[:80]!r} is recorded for {ctx.profile.name} in this project; "
                        "`betty experiments list` shows what is")
    if not tracked.experiment.sweep:
        raise ToolError(f"{tracked.experiment.slug} is a single job, not a sweep; use cluster_submit or "
                        "cluster_cancel for it")
    return tracked.experiment


async def _failed_indices(ctx: ToolContext, experiment: Experiment, asked: list[int]) -> list[int]:
    """``asked``, sorted, once every one of them is a task of the sweep whose latest attempt failed."""
    if (experiment.sweep or {}).get("search"):
        raise ToolError(f"{experiment.slug} searches: a failed task is reported and not run again; its next round "
                        "(sweep_round) proposes new points")
    indices = sorted(set(asked))
    size = len(recorded_grid(experiment.sweep))
    outside = [index for index in indices if not 0 <= index < size]
    if outside:
        raise ToolError(f"the sweep has tasks 0 to {size - 1}; there is no task {outside[0]}")
    states = task_states(experiment, await ctx.slurm.snapshot(array_ids(experiment)))
    not_failed = [f"{index} ({states.get(index, 'not recorded yet')})" for index in indices
                  if states.get(index) not in FAILED_TASK_STATES]
    if not_failed:
        raise ToolError(f"only failed tasks are resubmitted; not failed: {', '.join(not_failed)}")
    return indices


async def _live_arrays(ctx: ToolContext, experiment: Experiment) -> list["Job"]:
    snapshot = await ctx.slurm.snapshot(array_ids(experiment))
    live = [job for ident in array_ids(experiment) if (job := snapshot.jobs.get(ident)) and not job.state.finished]
    if not live:
        raise ToolError(f"sweep {experiment.slug} has no task queued or running; nothing to cancel")
    return live


class RoundArgs(SweepArg):
    """A searching sweep, and whether its next round runs within the budget the person approved."""

    within_budget: bool = Field(False, description="true to run the round without a card because the person "
                                                   "approved later rounds within a budget; refused when the round "
                                                   "would exceed it (then call again without it: a card)")


class SweepRound(Tool[RoundArgs]):
    """A search's next round: the points it proposes from the results so far and the lagging tasks it stops."""

    name = "sweep_round"
    description = ("The next round of a searching sweep (one started with cluster_sweep's search): tells the study "
                   "every task that ended, then submits the points it proposes as one job array and stops the "
                   "running tasks whose step=N values lag the others'. One card per round, unless the person "
                   "approved later rounds within a budget (within_budget).")
    Args = RoundArgs
    tier = Tier.ALWAYS_ASK

    def tier_for(self, args: RoundArgs) -> Tier:
        """No card for a round within the budget the person approved (checked again when it runs)."""
        return Tier.AUTO if args.within_budget else Tier.ALWAYS_ASK

    def asks(self) -> str:
        """A card every round, but one inside the budget the person approved with the sweep."""
        return ("Asks the person first, unless within_budget: a round inside the tasks and GPU-hours the person "
                "approved with the sweep runs without a card, and one beyond them is refused.")

    async def preview(self, ctx: ToolContext, args: RoundArgs) -> Preview:
        """The round: each proposed point, each task to stop and why, the array's script exactly as uploaded."""
        experiment = searching_sweep(ctx, args.experiment)
        proposal = await next_round(ctx, experiment)
        script = _round_script(experiment, proposal)
        number = len(rounds_of(experiment.sweep or {})) + 2
        points = "\n".join(f"task {index}: " + " ".join(f"{k}={v}" for k, v in point.items())
                           for index, point in _numbered(experiment, proposal))
        stops = "\n".join(f"stop task {stop.index}: {stop.why}" for stop in proposal.stops)
        search = Search.from_json((experiment.sweep or {})["search"])
        title = (f"round {number} of sweep {experiment.slug} on {ctx.profile.name}: {len(proposal.points)} new "
                 f"task(s), {len(proposal.stops)} to stop; {consent_line(search)}")
        return Preview(kind="script" if script else "text", title=title, text=script or stops,
                       details={"experiment": experiment.slug, "round": number, "points": points, "stops": stops,
                                "cluster": ctx.profile.name, "page": f"wiki/{experiment.page}"})

    async def run(self, ctx: ToolContext, args: RoundArgs) -> ToolOutcome:
        """Stop the lagging tasks, submit the proposed points once, record the round on the sweep."""
        experiment = searching_sweep(ctx, args.experiment)
        proposal = await next_round(ctx, experiment)
        if args.within_budget and not round_within_budget(experiment, proposal):
            number = len(rounds_of(experiment.sweep or {})) + 2
            raise ToolError(f"round {number} of {experiment.slug} would go beyond the budget approved for later "
                            "rounds; it needs its own card (call again without within_budget)")
        ledger = Ledger(ctx.workspace.ledger_path)
        if ledger.change_sweep(experiment.slug, partial(_claimed, proposal.to_json(), time.time())) is None:
            raise ToolError(f"the next round of {experiment.slug} is being submitted now (or just was); nothing "
                            "more was submitted")
        try:
            latest = latest_attempts(experiment)
            for stop in proposal.stops:
                await ctx.slurm.cancel(f"{latest.get(stop.index, experiment.job_id)}_{stop.index}")
            numbered = _numbered(experiment, proposal)
            script = _round_script(experiment, proposal)
            number = len(rounds_of(experiment.sweep or {})) + 2
            job_id = await ctx.slurm.submit(script, script_name=f"{experiment.slug}-round-{number}.sbatch") \
                if script else ""
        except BaseException:
            ledger.change_sweep(experiment.slug, lambda now: {k: v for k, v in (now or {}).items() if k != SUBMITTING})
            raise
        tasks = [index for index, _ in numbered]
        step: dict[str, Any] = {"round": number, "job_id": job_id, "tasks": tasks,
                "stops": [{"index": s.index, "why": s.why} for s in proposal.stops],
                "approved": "within the approved budget" if args.within_budget else "card",
                "submitted": datetime.now().strftime("%Y-%m-%dT%H:%M:%S")}
        ledger.change_sweep(experiment.slug, lambda now: record_round(now, step, proposal))
        summary = (f"round {number} of sweep {experiment.slug}: "
                   + (f"tasks {', '.join(map(str, tasks))} submitted as job array {job_id}" if job_id else
                      "nothing new submitted")
                   + (f"; stopped tasks {', '.join(str(s.index) for s in proposal.stops)}" if proposal.stops else ""))
        WikiStore(ctx.workspace.wiki).log(summary)
        return ToolOutcome(summary=summary, full=summary, data=step, artifacts=[f"wiki/{experiment.page}"])


def searching_sweep(ctx: ToolContext, experiment: str) -> Experiment:
    """The recorded sweep ``experiment``, when it searches."""
    found = recorded_sweep(ctx, experiment)
    if not (found.sweep or {}).get("search"):
        raise ToolError(f"{found.slug} runs a fixed grid; only a search (cluster_sweep's search) has rounds")
    return found


async def next_round(ctx: ToolContext, experiment: Experiment) -> Round:
    """The round waiting for approval, else a new one planned from every task's state and objective now (kept on the
    sweep until it runs, so a denied or crashed round is shown again, not drawn again)."""
    sweep = experiment.sweep or {}
    if sweep.get("proposal"):
        return Round.from_json(sweep["proposal"])
    search = Search.from_json(sweep["search"])
    space = Space.parse(sweep.get("grid") or [])
    comparison = await read_comparison(ctx.slurm, experiment)
    trials = [int(trial.get("trial", index)) for index, trial in enumerate(sweep.get("trials") or [])]
    observations = [Observation(task.index, trials[task.index], task.state,
                                tuple(task.metrics.series.get(search.objective.metric) or ()))
                    for task in comparison.tasks if task.index < len(trials)]
    stopped = {int(k): str(v) for k, v in (sweep.get("stopped") or {}).items()}
    study = open_study(study_path(ctx.workspace.state, experiment.slug), space, search)
    proposal = plan_round(study, space, search, observations, stopped)
    read = summarize(study, search, {trial: index for index, trial in enumerate(trials)}).to_json()
    kept = {"proposal": proposal.to_json()} if proposal else {}
    Ledger(ctx.workspace.ledger_path).change_sweep(experiment.slug, lambda now: {**(now or {}), "summary": read,
                                                                                 **kept})
    if not proposal:
        raise ToolError(f"sweep {experiment.slug} has no round to run now: "
                        + ("its budget of tasks is spent" if len(trials) >= search.budget else
                           f"{search.batch} task(s) are still running"))
    return proposal


def _numbered(experiment: Experiment, proposal: Round) -> list[tuple[int, dict[str, str]]]:
    first = len((experiment.sweep or {}).get("trials") or [])
    return [(first + n, point) for n, (_, point) in enumerate(proposal.points)]


def _round_script(experiment: Experiment, proposal: Round) -> str:
    """The sweep's own script (its body and directives) with only the round's points in its array."""
    if not proposal.points:
        return ""
    sweep = experiment.sweep or {}
    grid = Grid.listed(Space.parse(sweep.get("grid") or []).names, [point for _, point in proposal.points])
    return sweep_script(own_script(experiment.script), grid, sweep.get("at_once"),
                        first=len(sweep.get("trials") or []))


def round_within_budget(experiment: Experiment, proposal: Round) -> bool:
    """Whether ``proposal`` runs without a card: within the tasks and GPU-hours approved for later rounds."""
    # lazy: the batch-script parser, for each task's request
    from ...cluster.sbatch import SbatchScript

    sweep = experiment.sweep or {}
    parsed = SbatchScript.parse(experiment.script)
    gpus = parsed.gpu_request()
    return within_consent(Search.from_json(sweep["search"]), len(sweep.get("trials") or []), len(proposal.points),
                          gpus[1] if gpus else 0, parsed.time_minutes())


def record_round(now: dict[str, Any] | None, step: dict[str, Any], proposal: Round) -> dict[str, Any]:
    """The sweep's record with a round run: its tasks' points, its stops, the round; the proposal gone."""
    sweep = dict(now or {})
    trials = list(sweep.get("trials") or [])
    trials += [{"trial": trial, "point": point, "round": step["round"]} for trial, point in proposal.points]
    stopped = {**(sweep.get("stopped") or {}), **{str(s.index): s.why for s in proposal.stops}}
    sweep.pop("proposal", None)
    sweep.pop(SUBMITTING, None)
    return {**sweep, "trials": trials, "stopped": stopped, "rounds": [*(sweep.get("rounds") or []), step]}


SUBMITTING = "submitting"
"""On a sweep's record while its proposed round is being submitted: when that began (seconds since the epoch)."""
CLAIM_SECONDS = 600
"""A round being submitted for longer than this was cut off (the process ended): it may be submitted again."""


def _claimed(proposal: dict[str, Any], now_seconds: float, sweep: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sweep's record with ``proposal`` claimed for submitting, in the ledger's one transaction; None (nothing
    changes) when that round is no longer the one proposed or another call is submitting it: a round runs once,
    however many calls ask for it at the same moment."""
    record = dict(sweep or {})
    if record.get("proposal") != proposal or now_seconds - float(record.get(SUBMITTING) or 0) < CLAIM_SECONDS:
        return None
    return {**record, SUBMITTING: now_seconds}
