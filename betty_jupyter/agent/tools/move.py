"""``cluster_move``: put a waiting job Betty recorded on another partition (a job Slurm keeps preempting, say)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from ...errors import BettyError, UsageError
from ...experiments.chain import interruption_count
from ...wiki import WikiStore
from ..models import Preview, Tier, ToolOutcome
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError
from .jobs import recorded_experiment

if TYPE_CHECKING:
    from ...cluster.jobs import Job
    from ...experiments.ledger import Experiment


class MoveArgs(ToolArgs):
    """A waiting job and the partition to put it on."""

    job_id: JobId = Field(description="a waiting job Betty submitted (a chain's: its waiting segment)")
    partition: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$", description="the partition to move it to")


class ClusterMove(Tool[MoveArgs]):
    """Move a waiting job Betty recorded to another partition, keeping its job id and its place in a chain."""

    name = "cluster_move"
    description = ("Move a waiting (pending) job Betty recorded to another partition: scontrol update "
                   "Partition=…. It keeps its job id, its dependencies and its record. Slurm moves only a job that "
                   "has not started; a preempted job that was requeued waits again and can be moved.")
    Args = MoveArgs
    tier = Tier.ALWAYS_ASK

    async def preview(self, ctx: ToolContext, args: MoveArgs) -> Preview:
        """The job, where it is and where it would go, how often it was interrupted, and the command."""
        experiment, job = await self._checked(ctx, args)
        details = {"job_id": job.job_id, "state": job.state.value, "experiment": experiment.slug,
                   "page": f"wiki/{experiment.page}", "cluster": ctx.profile.name,
                   "from": job.partition, "to": args.partition,
                   "interrupted": f"{interruption_count(experiment)}× (preempted and requeued)",
                   "command": f"scontrol update JobId={job.job_id} Partition={args.partition}"}
        return Preview(kind="command", title=f"move {experiment.slug} (job {job.job_id}, {job.state.value}) from "
                                             f"{job.partition} to {args.partition}",
                       text=details["command"], details=details)

    async def run(self, ctx: ToolContext, args: MoveArgs) -> ToolOutcome:
        """Move the job once, when it still waits; a line in the wiki's log."""
        experiment, job = await self._checked(ctx, args)
        try:
            await ctx.slurm.move(job.job_id, args.partition)
        except UsageError as error:
            raise ToolError(str(error)) from error
        summary = f"moved job {job.job_id} ({experiment.slug}) from {job.partition} to {args.partition}"
        try:
            WikiStore(ctx.workspace.wiki).log(summary)
        except BettyError:
            pass  # the move happened; a log line that could not be written does not undo it
        return ToolOutcome(summary=summary, full=summary, data={"job_id": job.job_id, "partition": args.partition},
                           artifacts=[f"wiki/{experiment.page}"])

    async def _checked(self, ctx: ToolContext, args: MoveArgs) -> "tuple[Experiment, Job]":
        experiment = recorded_experiment(ctx.workspace, ctx.profile.name, args.job_id)
        if experiment is None:
            raise ToolError(f"job {args.job_id} was not submitted through Betty on {ctx.profile.name}; Betty moves "
                            "only jobs it recorded")
        job = await ctx.slurm.job(args.job_id)
        if job.state.value != "PENDING":
            raise ToolError(f"job {job.job_id} is {job.state.value}, not waiting; Slurm moves only a job that has "
                            "not started")
        if job.partition == args.partition:
            raise ToolError(f"job {job.job_id} is on {args.partition} already")
        return experiment, job
