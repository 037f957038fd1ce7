"""``cluster_pipeline``: several batch scripts (preprocess → train → evaluate) submitted as one card, each step queued
after the steps it needs (``afterok``), recorded as one experiment (``docs/long-runs.md``)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ...cluster.commands import default_partition, request_summary
from ...cluster.jobs import array_task_count
from ...cluster.pipeline import MAX_STEPS, Step, card, checked_steps, dependency_options, linear
from ...cluster.step_outputs import MAX_OUTPUTS, checked_output
from ...errors import UsageError
from ...experiments.pipeline import pipeline_text, submit_pipeline
from ...experiments.record import check_recordable
from ..models import Preview, Tier, ToolOutcome
from .base import OptionalJobId, Tool, ToolArgs, ToolContext, ToolError
from .jobs import MAX_SCRIPT_CHARS, SubmitArgs, checked_submission, planned_slug, preflight, recorded_experiment

if TYPE_CHECKING:
    from ...cluster.sbatch import SbatchScript
    from ...experiments.ledger import Experiment


class PipelineStep(ToolArgs):
    """One step: its name, its whole batch script, the earlier steps it runs after, and the files it leaves."""

    name: str = Field(min_length=1, max_length=40, description="the step's short name: preprocess, train, evaluate…")
    script: str = Field(min_length=1, max_length=MAX_SCRIPT_CHARS,
                        description="the step's whole batch script, '#!/bin/bash' and '#SBATCH' lines first (a "
                                    "job array with #SBATCH --array is one step)")
    after: list[str] | None = Field(None, max_length=MAX_STEPS,
                                    description="the names of earlier steps it runs after, once they all succeeded "
                                                "(default: the step before, unless aftercorr names steps; [] "
                                                "starts at once)")
    aftercorr: list[str] = Field([], max_length=MAX_STEPS,
                                 description="earlier job-array steps this job-array step runs after task by task "
                                             "(--dependency=aftercorr: its task N once their task N succeeded); "
                                             "both arrays of the same size")
    singleton: bool = Field(False, description="wait until no other job of the person with this step's job name "
                                               "runs (--dependency=singleton)")
    outputs: list[str] = Field([], max_length=MAX_OUTPUTS,
                               description="files or folders this step leaves for the steps after it (absolute, or "
                                           "relative to its working directory); checked on the cluster when it "
                                           "ends: a missing one stops the steps after it")


class PipelineArgs(ToolArgs):
    """The steps in order and what the pipeline is for."""

    steps: list[PipelineStep] = Field(min_length=1, max_length=MAX_STEPS,
                                      description="the steps, in order (2 or more, unless replaces is given)")
    goal: str = Field(min_length=1, max_length=4000, description="what the pipeline is for, in the researcher's words")
    name: str | None = Field(None, max_length=80, description="a short name for the experiment (default: the first "
                                                               "step's job name)")
    replaces: OptionalJobId = Field(None, description="the job of a failed step of a pipeline Betty recorded: these "
                                                      "steps run that step again and the steps after it (one step "
                                                      "is enough), recorded as linked to that pipeline")

    def planned(self, tasks: dict[str, int] | None = None) -> list[Step]:
        """The steps with their edges (a step that names none runs after the one before) and, from ``tasks``, each
        one's number of tasks; UsageError when wrong."""
        names = [step.name for step in self.steps]
        edges = linear(names, {s.name: tuple(s.after) if s.after is not None else () for s in self.steps
                               if s.after is not None or s.aftercorr})
        return checked_steps([Step(s.name, s.script, edges[s.name], tuple(s.aftercorr), s.singleton,
                                   (tasks or {}).get(s.name), tuple(checked_output(path) for path in s.outputs))
                              for s in self.steps], least=1 if self.replaces else 2)


class ClusterPipeline(Tool[PipelineArgs]):
    """Submit a pipeline of steps with dependencies once and record it as one experiment."""

    name = "cluster_pipeline"
    description = ("Submit several batch scripts as one pipeline (e.g. preprocess → train → evaluate): every step "
                   "now, each queued after the steps it needs succeed (--dependency=afterok); when a step fails the "
                   "steps after it are cancelled. Recorded as one experiment (page and notebook) with every step.")
    Args = PipelineArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: PipelineArgs) -> Preview:
        """Every step's script as uploaded, the edges between them, what each asks for, checked on the cluster."""
        steps, scripts = await self._checked(ctx, args)
        partitions = await ctx.slurm.partitions()
        slug = planned_slug(ctx.workspace, args.name or scripts[0].get("job-name") or steps[0].name)
        asked = {step.name: request_summary(script, default_partition(partitions))
                 for step, script in zip(steps, scripts)}
        checked = {step.name: await preflight(ctx, script) for step, script in zip(steps, scripts)}
        commands = {step.name: " ".join(["sbatch", *dependency_options([f"${n}_job" for n in step.after],
                                                                       [f"${n}_job" for n in step.aftercorr],
                                                                       step.singleton),
                                         shlex.quote(f"{ctx.slurm.work_dir}/scripts/{slug}-{step.name}.sbatch")])
                    for step in steps}  # $prep_job: the job id step prep gets
        details: dict[str, Any] = {
            "cluster": ctx.profile.name, "goal": args.goal, "pipeline": card(steps), "resources": asked,
            "commands": commands, "checked on the cluster": checked,
            "page": f"wiki/experiments/{slug}.md", "notebook": f"notebooks/experiments/{slug}.ipynb",
        }
        original = self._replaced(ctx, args)
        if original is not None:
            details["replaces"] = {"job_id": args.replaces, "experiment": original.slug,
                                   "page": f"wiki/{original.page}", "runs again": " → ".join(s.name for s in steps)}
        title = f"submit pipeline {slug} to {ctx.profile.name}: " + " → ".join(step.name for step in steps)
        return Preview(kind="script", title=title, text=pipeline_text(steps), details=details)

    async def run(self, ctx: ToolContext, args: PipelineArgs) -> ToolOutcome:
        """Check every step again, submit each once, and record the pipeline."""
        steps, scripts = await self._checked(ctx, args)
        for script in scripts:
            await preflight(ctx, script)
        try:
            original = self._replaced(ctx, args)
            experiment = await submit_pipeline(
                ctx.slurm, ctx.workspace, ctx.profile.name, list(zip(steps, scripts)), goal=args.goal, name=args.name,
                replaces=None if original is None else {"slug": original.slug, "job_id": str(args.replaces)})
        except UsageError as error:
            raise ToolError(str(error)) from error
        jobs = ", ".join(f"{s['name']} {s['job_id']}" for s in (experiment.chain or {}).get("steps") or [])
        page = f"wiki/{experiment.page}"
        summary = (f"submitted pipeline {experiment.slug} on {experiment.cluster} ({jobs}); page {page}, notebook "
                   f"{experiment.notebook}")
        return ToolOutcome(summary=summary, full=summary, data=experiment, artifacts=[page, experiment.notebook])

    @staticmethod
    def _replaced(ctx: ToolContext, args: PipelineArgs) -> "Experiment | None":
        """The pipeline whose failed step ``args.replaces`` names (None when it names none); ToolError otherwise."""
        if args.replaces is None:
            return None
        original = recorded_experiment(ctx.workspace, ctx.profile.name, args.replaces)
        if original is None or (original.chain or {}).get("kind") != "pipeline":
            raise ToolError(f"replaces: job {args.replaces} is not a step of a pipeline Betty recorded on "
                            f"{ctx.profile.name}; leave replaces out")
        return original

    async def _checked(self, ctx: ToolContext, args: PipelineArgs) -> tuple[list[Step], list["SbatchScript"]]:
        try:
            args.planned()  # the edges and names first: one line for a pipeline that cannot run
        except UsageError as error:
            raise ToolError(str(error)) from error
        partitions = await ctx.slurm.partitions()
        scripts = []
        for step in args.steps:
            try:
                scripts.append(checked_submission(SubmitArgs.model_validate({"script": step.script, "goal": args.goal}),
                                                  partitions))
            except ToolError as error:
                raise ToolError(f"step {step.name}: {error}") from error
        try:
            steps = args.planned({step.name: array_task_count(script.get("array") or "")
                                  for step, script in zip(args.steps, scripts)})
            check_recordable(pipeline_text(steps), args.goal, args.name)
        except UsageError as error:
            raise ToolError(str(error)) from error
        return steps, scripts
