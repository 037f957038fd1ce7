"""``cluster_sweep``: one batch script at every point of a grid, as one job array, approved once, one experiment."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...errors import UsageError
from ...experiments.record import submit_experiment
from ...experiments.sweep import MAX_TASKS, Grid, grid_table, size_line, sweep_script
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError
from .jobs import MAX_SCRIPT_CHARS, ClusterSubmit, SubmitArgs, checked_submission


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
        grid, script = _sweep(args)
        checked_submission(_as_submission(args, script), await ctx.slurm.partitions())
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
