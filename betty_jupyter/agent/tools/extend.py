"""``cluster_extend``: more time for a running job Betty recorded, as continuation segments queued behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from ...cluster.continuation import SIGNAL_SECONDS, ChainPlan, card, dependency
from ...errors import UsageError
from ...experiments.chain import continuation_script, extend_chain
from ..models import ADVANCED_FIELD, Preview, Tier, ToolOutcome
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError
from .jobs import recorded_experiment

if TYPE_CHECKING:
    from ...cluster.jobs import Job
    from ...experiments.ledger import Experiment


class ExtendArgs(ToolArgs):
    """A running job and how many continuations to queue behind it."""

    job_id: JobId = Field(description="a running or waiting job Betty submitted (a chain's: any of its segments)")
    segments: int = Field(ge=1, le=49, description="how many continuation jobs to queue behind it, each of the "
                                                   "script's --time, each resuming from the last checkpoint")
    checkpoint_seconds: int = Field(SIGNAL_SECONDS, ge=10, le=86_400,
                                    description="how long before each continuation's limit the program is told to "
                                                "checkpoint (SIGUSR1)", json_schema_extra=ADVANCED_FIELD)


class ClusterExtend(Tool[ExtendArgs]):
    """Queue continuation segments behind a job Betty recorded (Slurm cannot raise a running job's limit)."""

    name = "cluster_extend"
    description = ("Give a running job Betty recorded more time: queue continuation jobs behind it "
                   "(--dependency=afterany), each resuming from the last checkpoint. It cannot change the running "
                   "job's own time limit (docs/long-runs.md).")
    Args = ExtendArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: ExtendArgs) -> Preview:
        """The continuation's script, the whole chain's card, and what it can and cannot do for the running job."""
        experiment, job, plan, text = await self._checked(ctx, args)
        time_minutes = int((job.time_limit.total_seconds() if job.time_limit else 0) // 60) or \
            experiment.resources.get("time_minutes") or 0
        shown = card(plan, time_minutes, job.gpus)
        last = str(((experiment.chain or {}).get("jobs") or [experiment.job_id])[-1])
        shown["segments"] = shown["segments"].replace("all submitted now", f"the first queued after job {last}")
        details = {"job_id": job.job_id, "state": job.state.value, "experiment": experiment.slug,
                   "page": f"wiki/{experiment.page}", "cluster": ctx.profile.name, "chain": shown,
                   "command": f"sbatch {dependency(last)} …",
                   "the running job": _honest(experiment, job)}
        return Preview(kind="script", title=f"extend {experiment.slug} (job {job.job_id}, {job.state.value}) by up "
                                            f"to {plan.cap} continuation(s)", text=text, details=details)

    async def run(self, ctx: ToolContext, args: ExtendArgs) -> ToolOutcome:
        """Queue the continuations once and record the experiment as one chain."""
        experiment, _, plan, _ = await self._checked(ctx, args)
        try:
            changed = await extend_chain(ctx.slurm, ctx.workspace, experiment, plan)
        except UsageError as error:
            raise ToolError(str(error)) from error
        jobs = (changed.chain or {}).get("jobs") or []
        added = jobs[len(jobs) - plan.cap:]
        summary = (f"queued {len(added)} continuation(s) of {changed.slug} ({', '.join(added)}) behind job "
                   f"{jobs[len(jobs) - plan.cap - 1]}; page wiki/{changed.page}")
        return ToolOutcome(summary=summary, full=summary, data=changed, artifacts=[f"wiki/{changed.page}"])

    async def _checked(self, ctx: ToolContext, args: ExtendArgs) -> "tuple[Experiment, Job, ChainPlan, str]":
        experiment = recorded_experiment(ctx.workspace, ctx.profile.name, args.job_id)
        if experiment is None:
            raise ToolError(f"job {args.job_id} was not submitted through Betty on {ctx.profile.name}, so there is "
                            "no script to continue; submit it again with segments")
        last = str(((experiment.chain or {}).get("jobs") or [experiment.job_id])[-1])
        job = await ctx.slurm.job(last)
        if job.state.finished:
            raise ToolError(f"job {job.job_id} already ended ({job.state.value}); nothing runs to extend: submit "
                            "it again with segments, resuming from its checkpoint")
        plan = ChainPlan(cap=args.segments + 1, signal_seconds=args.checkpoint_seconds)
        try:
            plan.check(experiment.resources.get("time_minutes"))
            text = continuation_script(ctx.slurm, experiment, plan)
        except UsageError as error:
            raise ToolError(str(error).replace("continuations: ", "extend: ")) from error
        return experiment, job, ChainPlan(cap=args.segments, signal_seconds=plan.signal_seconds), text


def _honest(experiment: "Experiment", job: "Job") -> str:
    """What extending does for the job that runs now, and what it cannot."""
    cannot = f"job {job.job_id} keeps its own time limit (only an administrator can raise a running job's limit)"
    if experiment.chain:
        return (f"{cannot}; it started with --signal=B:USR1@{experiment.chain.get('signal_seconds')}, so it is told "
                "to checkpoint before its limit as before, and the first continuation resumes from that checkpoint")
    return (f"{cannot}; it started without a checkpoint signal, so it is not told to checkpoint: Slurm stops it at "
            "its limit, and the first continuation resumes from the last checkpoint the program wrote by itself "
            f"(work since then runs again). The continuations have the signal; if job {job.job_id} ends before its "
            "limit, the first continuation sees that and does not run the work again.")
