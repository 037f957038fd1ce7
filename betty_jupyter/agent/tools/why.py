"""``cluster_why``: why one of the person's pending jobs waits, read from squeue, sprio, sshare and sinfo.

Where ``sbatch --test-only`` says the same request starts sooner elsewhere, and Betty recorded the job's script,
the explanation carries the resubmission that moves it there (:func:`moved_resubmission`): ``cluster_submit``'s
arguments with the recorded script changed only in its placement and ``replaces`` naming the job, so its card is
the ordinary resubmission card (tier 2, the diff against the recorded script), whichever face opens it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ...advisor import slurm_reads
from ...advisor.estimates import Candidate
from ...advisor.pending import why_pending
from ...advisor.placement import placed_script
from ...cluster.sbatch import SbatchScript
from ...errors import BettyError
from pydantic import Field

from ..models import Preview, Tier, ToolOutcome
from .base import OptionalJobId, Tool, ToolArgs, ToolContext, ToolError
from .cluster import bound_to_shown_job, newest_job
from .jobs import recorded_experiment

if TYPE_CHECKING:
    from ...experiments.ledger import Experiment

_SCRIPT_CHARS_FOR_MODEL = 8_000


class WhyArgs(ToolArgs):
    """Which job to explain."""

    job_id: OptionalJobId = Field(None, description="the pending job (default: your newest pending job)")


class ClusterWhy(Tool[WhyArgs]):
    """Explain why a pending job waits, and what would change it."""

    name = "cluster_why"
    description = ("Explain why one of the person's own pending jobs waits: Slurm's reason in plain words, its "
                   "priority factors (sprio) against the jobs ahead of it, the person's fair-share (sshare), the "
                   "expected start (squeue --start), and what would start it sooner: the placement (partition, GPU "
                   "type) where sbatch --test-only says the same request starts sooner, with the exact change, a "
                   "smaller request, a shorter --time that fits a backfill window. For a job Betty recorded, the "
                   "resubmission there (cluster_submit's arguments) comes with it, for the person to approve.")
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
                          "(and sacctmgr show qos for a QOS reason)",
                          "for a job waiting on others' jobs: sbatch --test-only for each other partition and GPU "
                          "type (submits nothing)"])
        return Preview(kind="command", title=f"explain why job {ident} waits on {ctx.profile.name}", text=text,
                       details={"job_id": ident, "cluster": ctx.profile.name})

    async def run(self, ctx: ToolContext, args: WhyArgs) -> ToolOutcome:
        """The explanation's lines for the model, its figures in ``data``; the resubmission where there is one."""
        ident = args.job_id or await newest_job(ctx, pending=True)
        original = recorded_experiment(ctx.workspace, ctx.profile.name, ident)
        explanation = await why_pending(ctx.slurm.transport, ctx.policy(), ident, timeout=ctx.slurm.timeout,
                                        script=original.script if original else None)
        data = explanation.as_dict()
        text = "\n".join(explanation.lines())
        sooner = data.get("sooner")
        if sooner is not None:
            if original is None:
                sooner["resubmit"] = None
                text += (f"\nBetty did not submit job {ident}, so it has no script to resubmit: submit it again with "
                         f"{sooner['change']} and cancel job {ident}.")
            else:
                sooner["resubmit"] = moved_resubmission(original, sooner)
                script = sooner["resubmit"]["script"]
                shown = script if len(script) <= _SCRIPT_CHARS_FOR_MODEL else "(too long to show; see the card)"
                text += (f"\nTo offer it: cluster_submit with replaces={ident}, goal as below and this script (the "
                         f"person approves the card, which shows the diff):\ngoal: {sooner['resubmit']['goal']}\n"
                         f"{shown}")
        return ToolOutcome(summary=text, full=text + "\n\nRead with:\n" + "\n".join(explanation.commands), data=data)


def moved_resubmission(original: "Experiment", sooner: Mapping[str, Any]) -> dict[str, Any]:
    """``cluster_submit``'s arguments that move a recorded job to the placement ``sooner`` names (``partition``,
    ``gpu_type``): its recorded script with only the placement changed, ``replaces`` naming the job."""
    try:
        candidate = Candidate(str(sooner.get("partition") or ""), sooner.get("gpu_type") or None)
        script = placed_script(SbatchScript.parse(original.script), candidate).render()
    except BettyError as error:
        raise ToolError(f"cannot move job {original.job_id}: {error}") from error
    when = f" at {str(sooner['start'])[11:16]}" if sooner.get("start") else ""
    args: dict[str, Any] = {
        "script": script, "replaces": original.job_id,
        "goal": f"Move job {original.job_id} ({original.slug}) to {candidate.label}, where sbatch --test-only says it "
                f"starts sooner{when}; job {original.job_id} stays in the queue until you cancel it",
    }
    if original.gpu_estimate:
        args["gpu_estimate"] = original.gpu_estimate
    return args
