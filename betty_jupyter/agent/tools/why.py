"""``cluster_why``: why one of the person's pending jobs waits, read from squeue, sprio, sshare and sinfo."""

from __future__ import annotations

from ...advisor import slurm_reads
from ...advisor.pending import why_pending
from pydantic import Field

from ..models import Preview, Tier, ToolOutcome
from .base import OptionalJobId, Tool, ToolArgs, ToolContext
from .cluster import bound_to_shown_job, newest_job


class WhyArgs(ToolArgs):
    """Which job to explain."""

    job_id: OptionalJobId = Field(None, description="the pending job (default: your newest pending job)")


class ClusterWhy(Tool[WhyArgs]):
    """Explain why a pending job waits, and what would change it."""

    name = "cluster_why"
    description = ("Explain why one of the person's own pending jobs waits: Slurm's reason in plain words, its "
                   "priority factors (sprio) against the jobs ahead of it, the person's fair-share (sshare), the "
                   "expected start (squeue --start), and what would start it sooner (a smaller request, another "
                   "partition with idle resources, a shorter --time that fits a backfill window).")
    Args = WhyArgs
    tier = Tier.ONCE_PER_SESSION

    def bound(self, args: WhyArgs, preview: Preview) -> WhyArgs:
        """The job the card showed, when the call named none."""
        return bound_to_shown_job(args, preview)

    async def preview(self, ctx: ToolContext, args: WhyArgs) -> Preview:
        """The read-only commands it runs, in the order it runs them."""
        ident = args.job_id or await newest_job(ctx, pending=True)
        first = slurm_reads.job_command(ident)
        text = "\n".join([" ".join(first[:4]) + "  (Betty's pinned --format)",
                          "then for its partition: sprio, sprio --weights, squeue --states PENDING, sshare -U, sinfo "
                          "(and sacctmgr show qos for a QOS reason)"])
        return Preview(kind="command", title=f"explain why job {ident} waits on {ctx.profile.name}", text=text,
                       details={"job_id": ident, "cluster": ctx.profile.name})

    async def run(self, ctx: ToolContext, args: WhyArgs) -> ToolOutcome:
        """The explanation's lines for the model, its figures in ``data``."""
        ident = args.job_id or await newest_job(ctx, pending=True)
        explanation = await why_pending(ctx.slurm.transport, ctx.policy(), ident, timeout=ctx.slurm.timeout)
        text = "\n".join(explanation.lines())
        return ToolOutcome(summary=text, full=text + "\n\nRead with:\n" + "\n".join(explanation.commands),
                           data=explanation.as_dict())
