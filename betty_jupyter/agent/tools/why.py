"""``cluster_why``: why one of the person's pending jobs waits, read from squeue, sprio, sshare and sinfo."""

from __future__ import annotations

from ...cluster.advisor import slurm_reads
from ...cluster.advisor.pending import why_pending
from ..models import Preview, Tier, ToolOutcome
from .base import JobId, Tool, ToolArgs, ToolContext


class WhyArgs(ToolArgs):
    """Which job to explain."""

    job_id: JobId


class ClusterWhy(Tool[WhyArgs]):
    """Explain why a pending job waits, and what would change it."""

    name = "cluster_why"
    description = ("Explain why one of the person's own pending jobs waits: Slurm's reason in plain words, its "
                   "priority factors (sprio) against the jobs ahead of it, the person's fair-share (sshare), the "
                   "expected start (squeue --start), and what would start it sooner (a smaller request, another "
                   "partition with idle resources, a shorter --time that fits a backfill window).")
    Args = WhyArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: WhyArgs) -> Preview:
        """The read-only commands it runs, in the order it runs them."""
        first = slurm_reads.job_command(args.job_id)
        text = "\n".join([" ".join(first[:4]) + "  (Betty's pinned --format)",
                          "then for its partition: sprio, sprio --weights, squeue --states PENDING, sshare -U, sinfo "
                          "(and sacctmgr show qos for a QOS reason)"])
        return Preview(kind="command", title=f"explain why job {args.job_id} waits on {ctx.profile.name}", text=text,
                       details={"job_id": args.job_id, "cluster": ctx.profile.name})

    async def run(self, ctx: ToolContext, args: WhyArgs) -> ToolOutcome:
        """The explanation's lines for the model, its figures in ``data``."""
        explanation = await why_pending(ctx.slurm.transport, ctx.policy(), args.job_id, timeout=ctx.slurm.timeout)
        text = "\n".join(explanation.lines())
        return ToolOutcome(summary=text, full=text + "\n\nRead with:\n" + "\n".join(explanation.commands),
                           data=explanation.as_dict())
