"""``cluster_advise``: when and where a drafted batch script would start, candidates ranked (nothing is submitted)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...advisor.placement import PlacementAdvisor, advise_script
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, clip
from .jobs import MAX_SCRIPT_CHARS


class AdviseArgs(ToolArgs):
    """A drafted script and the places to try it on."""

    script: str = Field(min_length=1, max_length=MAX_SCRIPT_CHARS,
                        description="the whole batch script, '#!/bin/bash' and '#SBATCH' lines first")
    partitions: list[str] | None = Field(None, max_length=20,
                                         description="only these partitions (default: every partition sinfo shows)")
    nodes: list[int] | None = Field(None, max_length=8, description="also try these node counts, e.g. [1, 2]")
    placements: list[dict[str, Any]] | None = Field(
        None, max_length=20, description="the gpu_advise result's placements (partition, gpu, headroom_gib): try "
                                         "those, ranked by start and then by headroom")
    pending: bool = Field(False, description="also list the person's pending jobs with their expected start")


class ClusterAdvise(Tool[AdviseArgs]):
    """Start estimates per partition and GPU type for a drafted script, from the scheduler itself."""

    name = "cluster_advise"
    description = ("Ask Slurm when and where a drafted batch script would start (sbatch --test-only per partition, "
                   "GPU type and node count; nothing is submitted), ranked by start, then fit, then cost; "
                   "optionally the person's pending jobs with their expected start (squeue --start).")
    Args = AdviseArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: AdviseArgs) -> Preview:
        """What is asked: one ``sbatch --test-only`` per candidate, through the read policy."""
        where = ", ".join(args.partitions) if args.partitions else "every partition and GPU type sinfo shows"
        if args.placements is not None:
            where = f"{len(args.placements)} placement(s) of the GPU estimate"
        text = f"sbatch --test-only … --wrap=true  once per candidate on {where} (nothing is submitted)"
        if args.pending:
            text += "\nsqueue --me --start  (Betty's pinned --format)"
        return Preview(kind="command", title=f"ask {ctx.profile.name} when a job would start", text=text)

    async def run(self, ctx: ToolContext, args: AdviseArgs) -> ToolOutcome:
        """The ranked estimates; ``data`` is their JSON form."""
        advisor = PlacementAdvisor(ctx.slurm.transport, policy=ctx.policy())
        advice = await advise_script(ctx.slurm.transport, args.script, partitions=args.partitions or (),
                                     nodes=args.nodes or (), placements=args.placements, advisor=advisor)
        data: dict[str, Any] = advice.as_dict()
        lines = [advice.summary(), advice.table(),
                 f"({advice.scheduler_calls} question(s) to the scheduler; answers are kept for a minute)"]
        if args.pending:
            pending = await advisor.pending_starts()
            data["pending"] = [{"job_id": job.job_id, "partition": job.partition, "reason": job.reason,
                                "start": job.start.isoformat() if job.start else None} for job in pending]
            lines.append(f"your pending jobs: {len(pending)}")
            lines += [f"  job {job.job_id} on {job.partition} ({job.reason}): expected start "
                      f"{job.start.isoformat() if job.start else 'unknown'}" for job in pending]
        text = "\n".join(lines)
        return ToolOutcome(summary=clip(text), full=text, data=data)
