"""``cluster_efficiency``: what finished jobs used of what they asked for, and the right-sized next request."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import Field, field_validator

from ...cluster.job_efficiency import efficiency_table, sacct_argv, since_start
from ...advisor.rightsizing import propose, right_sized
from ...cluster.parsing import SEPARATOR
from ...errors import UsageError
from ...experiments.ledger import Ledger
from ..models import Preview, Tier, ToolOutcome
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError


class EfficiencyArgs(ToolArgs):
    """Which finished jobs, or which experiment to right-size."""

    job_ids: list[JobId] | None = Field(None, max_length=200, description="these jobs only")
    since: str = Field("7d", max_length=40, description="jobs started since: a span (7d, 12h, 30m) or a date "
                                                        "(2026-11-20); ignored with job_ids or experiment")
    experiment: str | None = Field(
        None, max_length=200, description="a recorded experiment (its slug or job id): its runs so far, and the "
                                          "right-sized request for its next submission")

    @field_validator("since")
    @classmethod
    def _a_span_or_a_date(cls, since: str) -> str:
        try:
            since_start(since)
        except UsageError as error:
            raise ValueError(str(error)) from None
        return since


class ClusterEfficiency(Tool[EfficiencyArgs]):
    """CPU, memory, time and GPU efficiency of finished jobs, from one sacct call; right-sizing of an experiment."""

    name = "cluster_efficiency"
    description = ("Read what finished jobs used of what they asked for, as seff reports it (CPU efficiency, peak "
                   "memory vs request, elapsed vs time limit, GPUs), from one sacct call. With 'experiment', the "
                   "runs of that experiment and a right-sized request for its next submission: offer it as "
                   "cluster_submit with 'replaces' and the proposed script, which the person approves.")
    Args = EfficiencyArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: EfficiencyArgs) -> Preview:
        """The sacct call, its delimiter shown as ``|``."""
        argv = sacct_argv(*self._window(ctx, args))
        shown = shlex.join(argv).replace(SEPARATOR, "|")
        return Preview(kind="command", title=f"read accounting on {ctx.profile.name}",
                       text=f"{shown}  (Betty's pinned --format)")

    async def run(self, ctx: ToolContext, args: EfficiencyArgs) -> ToolOutcome:
        """The table; with an experiment, its right-sizing and the script it proposes, in ``data``."""
        job_ids, since = self._window(ctx, args)
        jobs = await ctx.slurm.efficiency(job_ids, since)
        table = efficiency_table(jobs) if jobs else "no finished jobs in that window"
        data: dict[str, Any] = {"jobs": [job.as_dict() for job in jobs]}
        if args.experiment is None:
            return ToolOutcome(summary=table, data=data)
        experiment = self._experiment(ctx, args.experiment)
        sizing = propose(jobs)
        data["right_sizing"] = {"experiment": experiment.slug, "job_id": experiment.job_id, "line": sizing.line(),
                                "changes": sizing.changes}
        summary = f"{table}\nright-sizing of {experiment.slug}: {sizing.line()}"
        if sizing.changes:
            data["right_sizing"]["script"] = right_sized(experiment.script, sizing.changes)
            summary += (f"\nto offer it: cluster_submit with replaces={experiment.job_id} and the script in "
                        "data.right_sizing.script (the person approves it)")
        return ToolOutcome(summary=summary, data=data)

    def _window(self, ctx: ToolContext, args: EfficiencyArgs) -> tuple[list[str] | None, Any]:
        """The jobs asked about: an experiment's runs, the ids given, or those started since ``since``."""
        if args.experiment is not None:
            experiment = self._experiment(ctx, args.experiment)
            return [run.job_id for run in Ledger(ctx.workspace.ledger_path).series([experiment])[experiment.slug]], None
        if args.job_ids:
            return list(args.job_ids), None
        try:
            return None, since_start(args.since)
        except UsageError as error:
            raise ToolError(str(error)) from error

    def _experiment(self, ctx: ToolContext, name: str) -> Any:
        tracked = Ledger(ctx.workspace.ledger_path).get(name) if ctx.workspace.ledger_path.exists() else None
        if tracked is None or tracked.experiment.cluster != ctx.profile.name:
            raise ToolError(f"experiment: {name[:60]!r} is not an experiment Betty recorded on {ctx.profile.name}; "
                            "name its slug or job id")
        return tracked.experiment
