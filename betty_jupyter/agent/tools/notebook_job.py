"""``notebook_submit``: a notebook of the project run on a compute node with its parameters injected, as a job.

The card (tier 2) shows the generated batch script and the exact cell of parameters that is
inserted; on approval the notebook (one per point of a ``grid``: a sweep, one job array) and
Betty's runner go into the run's own directory (:func:`~...cluster.cell_transfer.upload_files`,
as a cell run's do) and the script is submitted once and recorded as an experiment. Once the job
has ended, :func:`bring_back` copies the executed notebook(s) into the project (``notebook_collect``,
tier 1, for the agent and the panel; ``betty submit-notebook`` calls it when the job ends): a single
run's becomes the experiment's notebook.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ...compute import cell_transfer
from ...cluster.job_request import CellEnvironment, cell_environment
from ...compute.cell_job import run_dir
from ...compute.notebook_job import (
    MAX_NOTEBOOK_BYTES, NEEDED, Injected, NotebookJob, executed_names, inject, notebook_bytes, parameter_name,
    parse_parameters, parse_value, read_notebook, read_notebook_and_digest, runner_source,
)
from ...compute.notebook_job import RUNNER as NOTEBOOK_RUNNER
from ...compute.private_folder import PrivateFolder
from ...cluster.sbatch import SbatchScript
from ...errors import UsageError
from ...experiments.ledger import Ledger
from ...experiments.notebook_file import write_notebook
from ...experiments.record import slugify, submit_experiment
from ...experiments.sweep import Grid, grid_table, recorded_grid, sweep_script
from ...wiki import WikiStore
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError
from .job_args import JobRequestArgs, Minutes
from .jobs import ClusterSubmit, SubmitArgs, checked_submission

if TYPE_CHECKING:
    from ...cluster.slurm import SlurmClient
    from ...experiments.ledger import Experiment
    from ...experiments.workspace import Workspace


class NotebookSubmitArgs(JobRequestArgs):
    """A notebook of the project, its parameters (or a grid of them) and the job it asks for."""

    notebook: str = Field(min_length=1, max_length=1000, description="the notebook's path in the project")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                               description="the notebook file's sha256 as read before asking; when given, a notebook "
                                           "changed since is refused and nothing is sent (the approved card binds "
                                           "the run to the digest it shows either way)")
    params: list[Annotated[str, Field(max_length=2000)]] = Field(
        default_factory=list, max_length=100, description='each parameter as NAME=VALUE: ["lr=3e-4", "epochs=10"]')
    grid: list[Annotated[str, Field(max_length=4000)]] = Field(
        default_factory=list, max_length=20, description='a sweep: each parameter and its values: ["lr=1e-4,3e-4"]')
    time: Minutes = Field(description="the job's time limit in minutes (each task's in a sweep)")
    goal: str = Field("a notebook run on the cluster", min_length=1, max_length=4000,
                      description="what this run is for, in the researcher's words")


class NotebookSubmit(Tool[NotebookSubmitArgs]):
    """Run a notebook on a compute node with its parameters injected, recorded as an experiment."""

    name = "notebook_submit"
    description = ("Run a notebook of the project as a Slurm job: its parameters are injected after its cell "
                   "tagged 'parameters' (papermill's convention), it is executed with nbclient in a named "
                   "environment, and the executed notebook comes back as the experiment's notebook. With a grid, "
                   "one job array runs the notebook at every point.")
    Args = NotebookSubmitArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: NotebookSubmitArgs) -> Preview:
        """The script exactly as submitted and the exact cell of parameters each run gets; nothing is sent."""
        plan = await _planned(ctx, args)
        submitted = await ClusterSubmit().script_preview(ctx, _as_submission(args, plan.script.text),
                                                         checks_paths=False)
        first = plan.injected[0]
        parameters = "\n".join(f"# task {index}\n{injected.source}" for index, injected in enumerate(plan.injected))
        details: dict[str, Any] = {
            "notebook": f"{args.notebook} ({len(first.notebook['cells']) - 1} cells)",
            "parameters": parameters if plan.grid else first.source,
            "injected": first.where(), "runs in": plan.job.environment.describe(), "run directory": plan.job.run_dir,
            "sha256": plan.digest, **submitted.details,
        }
        if plan.grid:
            details.update(tasks=len(plan.grid), points=grid_table(plan.grid))
        slug = str(details.get("page", "")).removeprefix("wiki/experiments/").removesuffix(".md")
        what = f"a sweep of {len(plan.grid)} notebook runs" if plan.grid else "a notebook"
        return Preview(kind="script", title=f"run {what} as {slug} on {ctx.profile.name}: {details['resources']}",
                       text=plan.script.text, details=details, inputs={args.notebook: f"sha256:{plan.digest}"})

    def bound(self, args: NotebookSubmitArgs, preview: Preview) -> NotebookSubmitArgs:
        """The run sends exactly the notebook file the card showed: its digest goes into the arguments."""
        return args.model_copy(update={"sha256": preview.details.get("sha256")})

    async def run(self, ctx: ToolContext, args: NotebookSubmitArgs) -> ToolOutcome:
        """Check again, upload the notebook(s) and the runner, submit the script once, record it.

        Only the notebook file whose digest the approved card showed is sent (into the card's run
        directory, named by what is sent); one saved or replaced since is refused and nothing is sent.
        """
        if args.sha256 is None:
            raise ToolError(f"{args.notebook[:200]!r} runs only as an approved card showed it, "
                            "and no card's digest came with this call; nothing was sent")
        plan = await _planned(ctx, args)
        script = checked_submission(_as_submission(args, plan.script.text), await ctx.slurm.partitions(), plan.script)
        names = [f"notebook-{index}.ipynb" for index in range(len(plan.injected))] if plan.grid else ["notebook.ipynb"]
        files = [(name, notebook_bytes(injected.notebook)) for name, injected in zip(names, plan.injected)]
        await cell_transfer.upload_files(ctx.slurm.transport, plan.job.run_dir,
                                         [*files, (NOTEBOOK_RUNNER, runner_source())])
        sweep = {"grid": plan.grid.words(), "at_once": None} if plan.grid else None
        experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script,
                                             goal=args.goal, name=_experiment_name(args), sweep=sweep)
        page = f"wiki/{experiment.page}"
        what = f"a sweep of {len(plan.grid)} runs of {args.notebook}" if plan.grid else args.notebook
        summary = (f"submitted job {experiment.job_id} on {experiment.cluster} as {experiment.slug}: {what} in "
                   f"{plan.job.run_dir}; page {page}, notebook {experiment.notebook}")
        data = {"job_id": experiment.job_id, "run_dir": plan.job.run_dir, "slug": experiment.slug, "page": page,
                "notebook": experiment.notebook, "cluster": experiment.cluster,
                "tasks": len(plan.grid) if plan.grid else 0}
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}", data=data,
                           artifacts=[page, experiment.notebook])


@dataclass(frozen=True)
class _Plan:
    """What one ``notebook_submit`` sends: the job, its script, each run's notebook, the grid (None: one run)."""

    job: NotebookJob
    script: SbatchScript
    """The script exactly as submitted (a sweep's with its array lines), read once."""
    injected: list[Injected]
    grid: Grid | None
    digest: str
    """The sha256 of the notebook file's bytes, exactly as read for this plan."""


async def _planned(ctx: ToolContext, args: NotebookSubmitArgs) -> _Plan:
    """The plan, the environment checked on the cluster (and that it imports nbclient and ipykernel)."""
    try:
        path = _in_project(ctx.workspace.root, args.notebook)
        book, digest = read_notebook_and_digest(path)
        if args.sha256 is not None and digest != args.sha256:
            raise UsageError(f"{args.notebook[:200]} is not the notebook shown for this run (it changed since); "
                             "nothing was sent: ask again to see it as it is now")
        parameters = parse_parameters(args.params)
        grid = Grid.parse(args.grid) if args.grid else None
        if grid is not None:
            for each in grid.names:
                parameter_name(each, "--grid")
            clash = sorted(set(grid.names) & set(parameters))
            if clash:
                raise UsageError(f"{clash[0]} is both a --param and in the --grid; give it once")
            injected = [inject(book, {**parameters, **{k: parse_value(v) for k, v in point.items()}})
                        for point in grid.points()]
        else:
            injected = [inject(book, parameters)]
        environment = cell_environment(ctx.profile.environments, args.env, ctx.profile.name)
        await _check_environment(ctx, environment)
        work = await cell_transfer.absolute_work_dir(ctx.slurm.transport, ctx.slurm.work_dir)
        token = _token(injected)
        name = f"nb-{slugify(_experiment_name(args))}"
        job = NotebookJob(run_dir(work, token, "notebook"), args.job_request(environment, name),
                          len(grid) if grid else 0)
        script = SbatchScript.parse(sweep_script(job.script(), grid)) if grid else job.script()
    except UsageError as error:
        raise ToolError(str(error)) from error
    return _Plan(job, script, injected, grid, digest)


async def _check_environment(ctx: ToolContext, environment: CellEnvironment) -> None:
    await cell_transfer.check_environment(ctx.slurm.transport, environment)
    argv, problem = environment.imports_check(NEEDED)
    found = await ctx.slurm.transport.run(argv, timeout=120)
    if not found.ok:
        known = ", ".join(sorted(ctx.profile.environments)) or "none is configured"
        raise UsageError(f"{problem}; a notebook runs with nbclient and ipykernel: install them there "
                         f"(pip install nbclient ipykernel) or run it in another environment of "
                         f"{ctx.profile.name} ({known}); nothing was submitted")


def _token(injected: list[Injected]) -> str:
    """The run's name: a digest of what is sent, so the card and the submission name the same directory."""
    digest = hashlib.sha256()
    for each in injected:
        digest.update(notebook_bytes(each.notebook))
    return digest.hexdigest()[:32]


def _in_project(root: Path, notebook: str) -> Path:
    path = (root / notebook).resolve()
    if not path.is_relative_to(root.resolve()):
        raise UsageError(f"{notebook[:200]!r} is not in the project {root}; run a notebook of the project")
    return path


def _experiment_name(args: NotebookSubmitArgs) -> str:
    """The experiment's name: the one given, or the notebook's (``train`` for ``train.ipynb``)."""
    return args.name or Path(args.notebook).stem


def _as_submission(args: NotebookSubmitArgs, script: str) -> SubmitArgs:
    return SubmitArgs.model_validate({"script": script, "goal": args.goal, "name": _experiment_name(args)})


async def bring_back(slurm: "SlurmClient", workspace: "Workspace", experiment: "Experiment") -> list[str]:
    """Copy an ended run's executed notebook(s) into the project; the project paths written.

    A single run's executed notebook becomes the experiment's notebook; a sweep's task N is kept
    beside it as ``<slug>.task-N.ipynb``. Each is checked to be a valid notebook before it is written
    (it comes from the cluster); a missing one (the job ended before the notebook started) is left out.
    """
    where = SbatchScript.parse(experiment.script).get("chdir")
    tasks = len(recorded_grid(experiment.sweep)) if experiment.sweep else 0
    if not where or "/runs/notebook-" not in where:
        raise UsageError(f"{experiment.slug} is not a notebook run; nothing to bring back")
    kept = PrivateFolder(workspace.state, ("notebook-runs", experiment.slug)).make()
    folder = kept.path
    copied = await cell_transfer.fetch(slurm.transport, where, executed_names(tasks), kept, MAX_NOTEBOOK_BYTES)
    written = []
    for name in copied:
        book = read_notebook(folder / name)
        target = workspace.root / experiment.notebook
        if tasks:
            target = target.with_name(f"{experiment.slug}.task-{name.removeprefix('executed-')}")
        write_notebook(target, book)
        written.append(str(target.relative_to(workspace.root)))
    if written:
        WikiStore(workspace.wiki).log(f"the executed notebook of {experiment.slug} came back: {', '.join(written)}")
    return written


class NotebookCollectArgs(ToolArgs):
    """One recorded notebook run."""

    experiment: str = Field(min_length=1, max_length=120,
                            description="the notebook run's experiment: its slug or its job's id")


class NotebookCollect(Tool[NotebookCollectArgs]):
    """Bring an ended notebook run's executed notebook(s) back into the project."""

    name = "notebook_collect"
    description = ("Once a notebook run (notebook_submit) has ended, copy its executed notebook back: a single "
                   "run's becomes the experiment's notebook, a sweep's each task's is kept beside it.")
    Args = NotebookCollectArgs
    tier = Tier.ONCE_PER_SESSION
    changes_project = True

    async def preview(self, ctx: ToolContext, args: NotebookCollectArgs) -> Preview:
        """What is read and what is written."""
        experiment = _recorded(ctx, args.experiment)
        return Preview(kind="text", title=f"bring back the executed notebook of {experiment.slug}",
                       text=f"read job {experiment.job_id}'s state, then copy its executed notebook(s) from the run's "
                            f"directory into the project as {experiment.notebook} (a sweep's beside it)",
                       details={"experiment": experiment.slug, "job_id": experiment.job_id})

    async def run(self, ctx: ToolContext, args: NotebookCollectArgs) -> ToolOutcome:
        """Refused while the job runs; the project paths written in ``data``."""
        experiment = _recorded(ctx, args.experiment)
        job = await ctx.slurm.job(experiment.job_id)
        if not job.state.finished:
            raise ToolError(f"job {experiment.job_id} of {experiment.slug} is {job.state.value}; its notebook comes "
                            "back once it has ended")
        try:
            written = await bring_back(ctx.slurm, ctx.workspace, experiment)
        except UsageError as error:
            raise ToolError(str(error)) from error
        summary = (f"job {experiment.job_id} ended {job.state.value}; executed notebook: "
                   f"{', '.join(written) or 'none came back (the job ended before the notebook started)'}")
        return ToolOutcome(summary=summary, full=summary, data={"written": written, "state": job.state.value},
                           artifacts=written)


def _recorded(ctx: ToolContext, experiment: str) -> "Experiment":
    tracked = Ledger(ctx.workspace.ledger_path).get(experiment) if ctx.workspace.ledger_path.exists() else None
    if tracked is None or tracked.experiment.cluster != ctx.profile.name:
        raise ToolError(f"no notebook run {experiment[:80]!r} is recorded for {ctx.profile.name} in this project; "
                        "`betty experiments list` shows what is")
    return tracked.experiment
