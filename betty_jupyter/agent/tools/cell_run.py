"""``cell_run`` and ``cell_run_status``: a notebook cell run as a Slurm job (``%%betty run``), then followed.

The kernel stages the cell and its ``--in`` values in the project (:func:`~...cluster.cell_job.stage`);
``cell_run`` (tier 2) shows the generated batch script, the cell's code and what crosses the wire,
and only once approved uploads them into the run's directory and submits the script as an
experiment. ``cell_run_status`` reads how the job stands and the end of its output, and once it
has ended brings its result, figures and ``--out`` values back into the project's staging folder.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...compute import cell_transfer
from ...cluster.continuation import SIGNAL_SECONDS, ChainPlan
from ...cluster.job_request import cell_environment
from ...compute.cell_job import RESULT_FILES, CellJob, StagedRun, parse_result, run_dir, run_files, staged
from ...errors import UsageError
from ...experiments.chain import read_chain, submit_chain
from ...experiments.record import slugify, submit_experiment
from ..models import ADVANCED_FIELD, Preview, Tier, ToolOutcome, sha256_of
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError
from .job_args import JobRequestArgs
from .jobs import ClusterSubmit, SubmitArgs, checked_submission, recorded_experiment


class CellRunArgs(JobRequestArgs):
    """A staged cell run and the job it asks for."""

    run: str = Field(pattern=r"^[0-9a-f]{32}$", description="the token of the cell run the notebook staged")
    outs: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")]] = Field(
        default_factory=list, max_length=50, description="the variables that come back")
    goal: str = Field("a notebook cell run on the cluster", min_length=1, max_length=4000,
                      description="what this run is for, in the researcher's words")
    segments: int | None = Field(
        None, ge=2, le=50, description="run longer than the time limit: a continuation chain of at most this many "
                                       "jobs of --time each; the cell is told to checkpoint before each limit "
                                       "(SIGUSR1) and runs again from the top in the next, resuming from its "
                                       "checkpoint (docs/long-runs.md)")
    checkpoint_seconds: int = Field(SIGNAL_SECONDS, ge=10, le=86_400,
                                    description="with segments: how long before each limit the cell is told to "
                                                "checkpoint (SIGUSR1)", json_schema_extra=ADVANCED_FIELD)


class CellRun(Tool[CellRunArgs]):
    """Run a staged notebook cell as a batch job, recorded as an experiment."""

    name = "cell_run"
    description = ("Run a notebook cell the person staged with %%betty run as a Slurm job: the cell's code and "
                   "the variables they named are uploaded into the run's directory, a generated batch script runs "
                   "it in the named environment, and it is recorded as an experiment.")
    Args = CellRunArgs
    tier = Tier.ALWAYS_ASK
    chat_only = True

    async def preview(self, ctx: ToolContext, args: CellRunArgs) -> Preview:
        """The script exactly as uploaded, the cell's code, what crosses the wire, where it runs; nothing is sent."""
        run, job = await _planned(ctx, args)
        script = job.script()
        submitted = await ClusterSubmit().script_preview(ctx, _as_submission(args, script.text),
                                                         checks_paths=False)
        details: dict[str, Any] = {
            "cell": run.code, "crosses the wire": "\n".join(run.wire_lines()),
            "runs in": job.environment.describe(), "run directory": job.run_dir,
            "comes back": ", ".join(args.outs) + " (pickled, into the notebook)" if args.outs else None,
            **submitted.details,
        }
        slug = str(details.get("page", "")).removeprefix("wiki/experiments/").removesuffix(".md")
        shape = f" as a chain of up to {args.segments} segments" if args.segments else ""
        return Preview(kind="script", title=f"run a cell as {slug} on {ctx.profile.name}{shape}: "
                                            f"{details['resources']}",
                       text=submitted.text if args.segments else script.text, details=details,
                       inputs={"cell.py": sha256_of(run.code), "inputs.pkl": f"sha256:{run.inputs_sha256}"})

    async def run(self, ctx: ToolContext, args: CellRunArgs) -> ToolOutcome:
        """Check again, upload the cell and its values, submit the script once, record it."""
        run, job = await _planned(ctx, args)
        written = job.script()
        script = checked_submission(_as_submission(args, written.text), await ctx.slurm.partitions(), written)
        await cell_transfer.upload(ctx.slurm.transport, run, job)
        if args.segments:
            try:
                experiment = await submit_chain(ctx.slurm, ctx.workspace, ctx.profile.name, script,
                                                ChainPlan(cap=args.segments, signal_seconds=args.checkpoint_seconds),
                                                goal=args.goal, name=args.name or job.request.name)
            except UsageError as error:
                raise ToolError(str(error)) from error
        else:
            experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script, goal=args.goal,
                                                 name=args.name or job.request.name)
        page = f"wiki/{experiment.page}"
        summary = (f"submitted job {experiment.job_id} on {experiment.cluster} as {experiment.slug}: a cell run in "
                   f"{job.run_dir}; page {page}, notebook {experiment.notebook}")
        data = {"job_id": experiment.job_id, "run": run.token, "run_dir": job.run_dir, "slug": experiment.slug,
                "page": page, "notebook": experiment.notebook, "cluster": experiment.cluster}
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}", data=data,
                           artifacts=[page, experiment.notebook])


async def _planned(ctx: ToolContext, args: CellRunArgs) -> tuple[StagedRun, CellJob]:
    """The staged run and its job, the environment checked on the cluster; ToolError in one line otherwise."""
    try:
        run = staged(ctx.workspace.state, args.run)
        environment = cell_environment(ctx.profile.environments, args.env, ctx.profile.name)
        await cell_transfer.check_environment(ctx.slurm.transport, environment)
        work = await cell_transfer.absolute_work_dir(ctx.slurm.transport, ctx.slurm.work_dir)
    except UsageError as error:
        raise ToolError(str(error)) from error
    name = f"cell-{slugify(args.name)}" if args.name else "cell"  # a job name of letters, digits and dashes only
    return run, CellJob(run_dir(work, run.token), args.job_request(environment, name), tuple(args.outs),
                        chained=bool(args.segments))


def _as_submission(args: CellRunArgs, script: str) -> SubmitArgs:
    chain = {"segments": args.segments, "checkpoint_seconds": args.checkpoint_seconds} if args.segments else {}
    return SubmitArgs.model_validate({"script": script, "goal": args.goal, "name": args.name or "cell", **chain})


class CellRunStatusArgs(ToolArgs):
    """One cell run's job."""

    run: str = Field(pattern=r"^[0-9a-f]{32}$", description="the cell run's token")
    job_id: JobId = Field(description="the Slurm job id of the cell run")


class CellRunStatus(Tool[CellRunStatusArgs]):
    """How a cell run's job stands, the end of its output, and once it ended its result."""

    name = "cell_run_status"
    description = ("Read how a %%betty run cell's job stands and the last lines it printed; once it has ended, "
                   "bring its result, figures and --out values back into the project.")
    Args = CellRunStatusArgs
    tier = Tier.ONCE_PER_SESSION
    chat_only = True
    follows_progress = True

    async def preview(self, ctx: ToolContext, args: CellRunStatusArgs) -> Preview:
        """What is read, and where what comes back is kept."""
        where = run_dir(ctx.slurm.work_dir, args.run)
        return Preview(kind="text", title=f"read cell run job {args.job_id}",
                       text=f"read job {args.job_id}'s state and the end of cell.out and cell.err in {where}; once "
                            "it ended, copy result.json, its signature, outputs.pkl and its figures into .betty/cell-runs")

    async def run(self, ctx: ToolContext, args: CellRunStatusArgs) -> ToolOutcome:
        """The job's state and output tails in ``data``; ``result`` names the local folder once it has ended."""
        try:
            files = run_files(ctx.workspace.state, args.run)
            if not files.exists("manifest.json"):
                raise UsageError(f"no cell run {args.run} is staged in this project")
            where = run_dir(await cell_transfer.absolute_work_dir(ctx.slurm.transport, ctx.slurm.work_dir), args.run)
            job = await ctx.slurm.job(args.job_id)
            finished = job.state.finished
            experiment = recorded_experiment(ctx.workspace, ctx.profile.name, job.job_id)
            if experiment is not None and experiment.chain:  # a chain: it ends when its last segment that runs does
                snapshot = await ctx.slurm.snapshot(experiment.chain.get("jobs") or [experiment.job_id])
                experiment, deciding = read_chain(experiment, snapshot.jobs)
                finished = (experiment.chain or {}).get("ended") is not None
                job = deciding or job
            out, err = await cell_transfer.tails(ctx.slurm.transport, where)
            data: dict[str, Any] = {"state": job.state.value, "finished": finished, "line": job.line(),
                                    "out": out, "err": err, "result": None}
            if finished:
                back = files.child("back").make()
                back.empty()
                copied = await cell_transfer.fetch(ctx.slurm.transport, where, RESULT_FILES, back)
                if "result.json" in copied:
                    # unchecked here (the kernel checks the run's signature before it loads anything): which files
                    result = parse_result(back.read("result.json", 4 * 2**20).decode("utf-8", "replace"))
                    await cell_transfer.fetch(ctx.slurm.transport, where, result.figures, back)
                data["result"] = str(back.path) if copied else None
        except UsageError as error:
            raise ToolError(str(error)) from error
        return ToolOutcome(summary=job.line(), full=job.line(), data=data)
