"""``node_kernel``, ``node_kernel_status`` and ``node_kernel_stop``: a notebook kernel in an allocation (``%betty kernel``).

The notebook stages a connection file with a fresh key (:func:`~...compute.node_kernel.stage`);
``node_kernel`` (tier 2) shows the generated batch script and what it asks for, as any
submission, and only once approved uploads the connection file and the runner into the kernel's
own directory and submits the script, recorded as an experiment. ``node_kernel_status`` reads the
allocation's state and its end, and where the kernel listens once it does. ``node_kernel_stop``
cancels the allocation of a kernel this project started: the card that started it said so, and
it cancels nothing else (the job must be the one recorded for that kernel). Only the person
calls it (``%betty kernel --stop``, the notebook's kernel shutting down, the side panel's Stop): a
model or another agent is never offered it and is refused when it calls it. Each cell run on the
node is noted in the experiment's record (:mod:`~...experiments.node_cells`), started here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...cluster.job_request import cell_environment
from ...compute import cell_transfer
from ...compute.node_kernel import (
    DEFAULT_GRACE_MINUTES, JOB_FILE, NodeKernelJob, ends_at, kernel_dir, kernel_files, ready, recorded, status_line,
    upload,
)
from ...errors import UsageError
from ...experiments.ledger import Ledger
from ...experiments.node_cells import started_record
from ...experiments.record import submit_experiment
from ..models import Preview, Tier, ToolOutcome
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError
from .job_args import JobRequestArgs
from .jobs import ClusterSubmit, SubmitArgs, checked_submission

_TOKEN = Field(pattern=r"^[0-9a-f]{32}$", description="the token of the node kernel the notebook staged")


class NodeKernelArgs(JobRequestArgs):
    """A staged node kernel and the allocation it asks for."""

    kernel: str = _TOKEN
    grace: int = Field(DEFAULT_GRACE_MINUTES, ge=1, le=24 * 60,
                       description="minutes the kernel waits for the notebook to come back after a dropped link")
    goal: str = Field("a notebook kernel on a compute node", min_length=1, max_length=4000,
                      description="what this allocation is for, in the researcher's words")


class NodeKernel(Tool[NodeKernelArgs]):
    """Start a notebook kernel in an allocation, recorded as an experiment."""

    name = "node_kernel"
    description = ("Start an IPython kernel for the person's notebook inside a Slurm allocation (%betty kernel): a "
                   "generated batch script runs it in the named environment and it is recorded as an experiment.")
    Args = NodeKernelArgs
    tier = Tier.ALWAYS_ASK
    chat_only = True
    only_adds = True

    async def preview(self, ctx: ToolContext, args: NodeKernelArgs) -> Preview:
        """The script exactly as submitted, where the kernel runs and how it ends; nothing is sent."""
        job = await _planned(ctx, args)
        script = job.script()
        submitted = await ClusterSubmit().script_preview(ctx, _as_submission(args, script.text), checks_paths=False)
        details: dict[str, Any] = {
            "runs in": job.request.environment.describe(), "kernel directory": job.run_dir,
            "ends": (f"when you stop it (%betty kernel --stop, or the notebook's kernel shuts down), at its time "
                     f"limit, or {args.grace} min after the notebook was last connected"),
            **submitted.details,
        }
        return Preview(kind="script", title=f"a notebook kernel on {ctx.profile.name}: {details['resources']}",
                       text=script.text, details=details)

    async def run(self, ctx: ToolContext, args: NodeKernelArgs) -> ToolOutcome:
        """Check again, upload the connection file and the runner, submit the script once, record it."""
        job = await _planned(ctx, args)
        written = job.script()
        script = checked_submission(_as_submission(args, written.text), await ctx.slurm.partitions(), written)
        try:
            files = kernel_files(ctx.workspace.state, args.kernel)
            if files.exists(JOB_FILE):
                raise UsageError(f"node kernel {args.kernel} was started already; run %betty kernel again")
            await upload(ctx.slurm.transport, ctx.workspace.state, args.kernel, job)
        except UsageError as error:
            raise ToolError(str(error)) from error
        experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script, goal=args.goal,
                                             name=args.name or "kernel")
        files.write(JOB_FILE, f"{ctx.profile.name}\n{experiment.job_id}\n{job.run_dir}\n".encode())
        Ledger(ctx.workspace.ledger_path).change_node_cells(experiment.slug, lambda _: started_record())
        page = f"wiki/{experiment.page}"
        summary = (f"submitted job {experiment.job_id} on {experiment.cluster} as {experiment.slug}: a notebook "
                   f"kernel in {job.run_dir}; page {page}")
        data = {"job_id": experiment.job_id, "kernel": args.kernel, "run_dir": job.run_dir, "slug": experiment.slug,
                "page": page, "notebook": experiment.notebook, "cluster": experiment.cluster}
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}", data=data,
                           artifacts=[page, experiment.notebook])


class NodeKernelRef(ToolArgs):
    """One node kernel this project started."""

    kernel: str = _TOKEN
    job_id: JobId = Field(description="the Slurm job id of its allocation")


class NodeKernelStatus(Tool[NodeKernelRef]):
    """How a node kernel's allocation stands, when it ends, and where its kernel listens once it does."""

    name = "node_kernel_status"
    description = ("Read how a %betty kernel allocation stands, when it ends, and where its kernel listens once "
                   "it has started.")
    Args = NodeKernelRef
    tier = Tier.AUTO
    chat_only = True
    follows_progress = True
    changes_project = True

    async def preview(self, ctx: ToolContext, args: NodeKernelRef) -> Preview:
        """What is read."""
        return Preview(kind="text", title=f"read node kernel job {args.job_id}",
                       text=f"read job {args.job_id}'s state and, once it runs, kernel.ready from its directory")

    async def run(self, ctx: ToolContext, args: NodeKernelRef) -> ToolOutcome:
        """The state, the status line and (once written) the kernel's address and ports in ``data``."""
        where = await _recorded(ctx, args)
        job = await ctx.slurm.job(args.job_id)
        line = status_line(job)
        found = None
        if job.state.value == "RUNNING":
            try:
                found = await ready(ctx.slurm.transport, ctx.workspace.state, args.kernel, where)
            except UsageError as error:
                raise ToolError(str(error)) from error
        end = ends_at(job)
        data = {"state": job.state.value, "finished": job.state.finished, "line": line,
                "ends": None if end is None else end.isoformat(timespec="seconds"),
                "ready": None if found is None else {"ip": found.ip, "ports": found.ports, "host": found.host,
                                                     "checked": found.checked}}
        return ToolOutcome(summary=line, full=line, data=data)


class NodeKernelStop(Tool[NodeKernelRef]):
    """End a node kernel's allocation."""

    name = "node_kernel_stop"
    description = ("Cancel the allocation of a %betty kernel this project started (the card that started it "
                   "said it ends when the notebook stops it); no other job.")
    Args = NodeKernelRef
    tier = Tier.AUTO
    chat_only = True
    person_only = True  # it cancels without a card of its own: only the person (notebook, panel) may ask for it

    async def preview(self, ctx: ToolContext, args: NodeKernelRef) -> Preview:
        """The scancel of that one job."""
        return Preview(kind="command", title=f"stop node kernel job {args.job_id}", text=f"scancel {args.job_id}")

    async def run(self, ctx: ToolContext, args: NodeKernelRef) -> ToolOutcome:
        """scancel, once, when the job is still the kernel's and has not ended."""
        await _recorded(ctx, args)
        job = await ctx.slurm.job(args.job_id)
        if job.state.finished:
            summary = f"job {args.job_id} already ended ({job.state.value})"
        else:
            await ctx.slurm.cancel(args.job_id)
            summary = f"cancelled job {args.job_id} on {ctx.profile.name}: the node kernel is stopped"
        return ToolOutcome(summary=summary, full=summary, data={"job_id": args.job_id})


async def _planned(ctx: ToolContext, args: NodeKernelArgs) -> NodeKernelJob:
    """The kernel's job, the environment checked on the cluster; ToolError in one line otherwise."""
    try:
        kernel_files(ctx.workspace.state, args.kernel)
        environment = cell_environment(ctx.profile.environments, args.env, ctx.profile.name)
        await cell_transfer.check_environment(ctx.slurm.transport, environment)
        work = await cell_transfer.absolute_work_dir(ctx.slurm.transport, ctx.slurm.work_dir)
    except UsageError as error:
        raise ToolError(str(error)) from error
    return NodeKernelJob(kernel_dir(work, args.kernel), args.job_request(environment, "kernel"), args.grace)


async def _recorded(ctx: ToolContext, args: NodeKernelRef) -> str:
    """The kernel's directory on the cluster, when ``job_id`` is the job recorded for it on this cluster."""
    try:
        found = recorded(ctx.workspace.state, args.kernel)
    except UsageError as error:
        raise ToolError(f"no node kernel {args.kernel} was started in this project ({error})") from error
    if (found.cluster, found.job_id) != (ctx.profile.name, args.job_id):
        raise ToolError(f"job {args.job_id} on {ctx.profile.name} is not node kernel {args.kernel}'s allocation")
    return found.run_dir


def _as_submission(args: NodeKernelArgs, script: str) -> SubmitArgs:
    return SubmitArgs.model_validate({"script": script, "goal": args.goal, "name": args.name or "kernel"})
