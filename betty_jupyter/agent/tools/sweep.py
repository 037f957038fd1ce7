"""Sweeps: ``cluster_sweep`` runs one batch script at every point of a grid, as one job array, approved once, one
experiment; ``sweep_compare`` puts its tasks side by side, ``sweep_retry`` runs the failed ones again by index and
``sweep_cancel`` stops the rest, each one card."""

from __future__ import annotations

import shlex
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ...cluster.jobs import task_summary
from ...cluster.text_tables import aligned
from ...errors import UsageError
from ...experiments.comparison import FAILED_TASK_STATES, comparison_rows, read_comparison, retry_script, task_states
from ...experiments.ledger import Experiment, Ledger
from ...experiments.record import submit_experiment
from ...experiments.sweep import MAX_TASKS, Grid, grid_table, recorded_grid, size_line, sweep_script
from ...experiments.sweep_page import array_ids, retries
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
        """The array's script exactly as uploaded, the grid task by task, its size and cost, where it goes."""
        grid, script = _sweep(args)
        submitted = await ClusterSubmit().preview(ctx, _as_submission(args, script))
        details: dict[str, Any] = {**submitted.details, "tasks": len(grid), "grid": grid.words(),
                                   "at_once": args.at_once, "size": _size(grid, args.at_once, script),
                                   "points": grid_table(grid)}
        slug = str(details.get("page", "")).removeprefix("wiki/experiments/").removesuffix(".md")
        title = f"sweep {slug} on {details['cluster']}: {details['size']}; each task {details['resources']}"
        return Preview(kind="script", title=title, text=script, details=details)

    async def run(self, ctx: ToolContext, args: SweepArgs) -> ToolOutcome:
        """Check the array's script again, submit it once, record it as one experiment."""
        grid, text = _sweep(args)
        script = checked_submission(_as_submission(args, text), await ctx.slurm.partitions())
        await preflight(ctx, script, args.first_line)
        experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script, goal=args.goal,
                                             name=args.name, sweep={"grid": grid.words(), "at_once": args.at_once})
        page = f"wiki/{experiment.page}"
        summary = (f"submitted sweep {experiment.slug} as job array {experiment.job_id} on {experiment.cluster}: "
                   f"{len(grid)} tasks; page {page}, notebook {experiment.notebook}")
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}",
                           data=experiment, artifacts=[page, experiment.notebook])


def _sweep(args: SweepArgs) -> tuple[Grid, str]:
    """The grid and the array's script; ToolError in one line when either cannot be made."""
    try:
        grid = Grid.parse(args.grid)
        return grid, sweep_script(args.script, grid, args.at_once)
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
