"""Tools that change or follow jobs: submit (recorded as an experiment), status, cancel."""

from __future__ import annotations

import shlex
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializerFunctionWrapHandler, field_validator, \
    model_serializer, model_validator

from ...cluster.continuation import SIGNAL_SECONDS, ChainPlan, card as chain_card
from ...cluster.commands import cant_submit, checked_script, default_partition, request_summary
from ...cluster.slurm import sbatch_argv
from ...experiments.diagnosis import script_diff
from ...experiments.ledger import Ledger
from ...experiments.record import check_recordable, new_slug, submit_experiment
from ...errors import ScriptError, UsageError
from ...experiments.chain import read_chain, segment_script, submit_chain
from ...experiments.chain_page import PIPELINE, timeline_rows
from ...experiments.gpu_peak import peak_words
from ...experiments.pipeline import cancel_stranded
from ...experiments.refresh import refresh_page
from ...gpu.measured import MARKER, with_sampler
from ...safe_text import terminal_line
from ..card_words import mail_words
from ..models import ADVANCED_FIELD, Preview, Tier, ToolOutcome
from .base import JobId, OptionalJobId, Tool, ToolArgs, ToolContext, ToolError

if TYPE_CHECKING:
    from ...cluster.sbatch import SbatchScript
    from ...experiments.ledger import Experiment
    from ...experiments.workspace import Workspace

MAX_SCRIPT_CHARS = 100_000


class EstimateNote(BaseModel):
    """What a submission records of the job's GPU-memory estimate (``gpu_estimate``'s result): its peak and what it
    sized, each field typed and bounded; anything else given is not kept."""

    model_config = ConfigDict(extra="ignore")  # a model passes gpu_estimate's whole result; only these are kept

    peak_gib: float = Field(ge=0, le=1_000_000, description="peak GPU memory per GPU, in GiB, from gpu_estimate")
    model: str | None = Field(None, max_length=300, description="the model that was sized")
    method: str | None = Field(None, max_length=40, description="inference, full, lora or qlora")
    precision: str | None = Field(None, max_length=40, description="the precision it sized",
                                     json_schema_extra=ADVANCED_FIELD)
    gpus: int | None = Field(None, ge=1, le=100_000, description="the GPUs it sized",
                               json_schema_extra=ADVANCED_FIELD)
    peak_moment: str | None = Field(None, max_length=120, description="when in a step the peak comes",
                                       json_schema_extra=ADVANCED_FIELD)
    breakdown: dict[str, float] | None = Field(None, max_length=24, description="GiB of each part of the peak",
                                                  json_schema_extra=ADVANCED_FIELD)
    notes: list[str] | None = Field(None, max_length=12, description="what the estimate noted",
                                     json_schema_extra=ADVANCED_FIELD)

    @field_validator("model", "method", "precision", "peak_moment")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return None if value is None else terminal_line(value)

    @field_validator("breakdown")
    @classmethod
    def _named_parts(cls, parts: dict[str, float] | None) -> dict[str, float] | None:
        if parts is None:
            return None
        if any(not 0 <= size <= 1_000_000 for size in parts.values()):
            raise ValueError("each part is 0 to 1,000,000 GiB")
        return {terminal_line(name)[:60]: size for name, size in parts.items()}

    @field_validator("notes")
    @classmethod
    def _short_notes(cls, notes: list[str] | None) -> list[str] | None:
        return None if notes is None else [terminal_line(note)[:400] for note in notes]

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only the fields the estimate had: a card, a record and a page show what was given, no empty fields."""
        return {name: value for name, value in handler(self).items() if value is not None}


class SubmitArgs(ToolArgs):
    """A batch script and why it runs."""

    script: str = Field(min_length=1, max_length=MAX_SCRIPT_CHARS,
                        description="the whole batch script, '#!/bin/bash' and '#SBATCH' lines first")
    goal: str = Field(min_length=1, max_length=4000, description="what this run is for, in the researcher's words")
    name: str | None = Field(None, max_length=80, description="a short name for the experiment (default: job name)")
    gpu_estimate: Annotated[EstimateNote | None, BeforeValidator(lambda value: None if value == {} else value)] = Field(
        None, description="from gpu_estimate for this job: its peak_gib (shown on the card and recorded); {} is none")
    measure_gpu_peak: bool = Field(
        False, description="true: the job also records its real GPU memory peak (nvidia-smi sampled in the "
                           "background into a file in its working directory, read when it ends) and its page shows "
                           "it beside gpu_estimate's figure; when the person asks to measure the peak")
    replaces: OptionalJobId = Field(
        None, description="a job Betty recorded that this script corrects: the card shows the diff against that "
                          "job's script, and the new page links its page")
    record: bool = Field(True, description="false: submit without writing an experiment page and notebook (the "
                                           "action log still has the call); only when the person asks for it",
                         json_schema_extra=ADVANCED_FIELD)
    segments: int | None = Field(
        None, ge=2, le=50, description="run longer than the time limit: a continuation chain of at most this many "
                                       "jobs of the script's --time, each told to checkpoint before its limit (SIGUSR1) "
                                       "and resuming from the last checkpoint (docs/long-runs.md); only when the "
                                       "person asks for a longer run")
    checkpoint_seconds: int = Field(SIGNAL_SECONDS, ge=10, le=86_400,
                                    description="with segments: how long before each limit the program is told to "
                                                "checkpoint (SIGUSR1)", json_schema_extra=ADVANCED_FIELD)
    end_mail: bool = Field(False, description="Slurm mails the person when the job ends (#SBATCH --mail-type=END, "
                                              "to the address Slurm has for their login; never an address they "
                                              "did not type); only where the site offers it and the person asks",
                           json_schema_extra=ADVANCED_FIELD)
    requeue: bool = Field(False, description="the person agreed that a job Slurm preempts goes back in the queue and "
                                             "resumes from its last checkpoint (--requeue, with Betty's checkpoint "
                                             "helper; docs/long-runs.md); only when the person says so")
    first_line: int = Field(1, ge=1, le=1_000_000,
                            description="the number the person sees beside the script's first line (2 in a "
                                        "%%betty submit cell, under the magic's own line): refusals name lines so",
                            json_schema_extra=ADVANCED_FIELD)


    @model_validator(mode="after")
    def _with_end_mail(self) -> "SubmitArgs":
        """``end_mail``: the script asks Slurm for its end mail, unless it already names its own mail."""
        if self.end_mail and "--mail-type" not in self.script:
            self.script = with_end_mail(self.script)
        return self


def with_end_mail(script: str) -> str:
    """``script`` with ``#SBATCH --mail-type=END`` after its first line (its ``#!``); no address is added."""
    first, newline, rest = script.partition("\n")
    return f"{first}\n#SBATCH --mail-type=END\n{rest}" if newline else f"{first}\n#SBATCH --mail-type=END\n"


class ClusterSubmit(Tool[SubmitArgs]):
    """Submit a batch script once and record it as an experiment (wiki page + notebook)."""

    name = "cluster_submit"
    description = ("Submit a batch script with sbatch, exactly once, and record it as an experiment: a wiki page "
                   "and a notebook. The script is checked against the cluster's partitions first.")
    Args = SubmitArgs
    tier = Tier.ALWAYS_ASK
    only_adds = True

    async def preview(self, ctx: ToolContext, args: SubmitArgs) -> Preview:
        """The script exactly as uploaded, what it asks for, where it goes, its environment, the sbatch command and
        what it names, checked on the cluster."""
        return await self.script_preview(ctx, args)

    async def script_preview(self, ctx: ToolContext, args: SubmitArgs, checks_paths: bool = True) -> Preview:
        """:meth:`preview`; ``checks_paths=False`` for a script Betty writes around folders it makes at upload (a
        cell's or notebook's run), whose own tool checks what it needs."""
        args = with_sampler_asked(args)
        if args.record:
            check_recordable(args.script, args.goal, args.name)
        elif args.replaces is not None:
            raise ToolError("replaces: a resubmission is recorded beside the job it corrects; leave record out")
        partitions = await ctx.slurm.partitions()
        script = checked_submission(args, partitions)
        try:
            environment = ctx.slurm.job_environment(script)
        except ScriptError as error:
            raise ToolError(cant_submit(error, args.first_line)) from error
        checked = await preflight(ctx, script, args.first_line) if checks_paths else None
        name = args.name or script.get("job-name") or "job"
        slug = planned_slug(ctx.workspace, name) if args.record else None
        remote = f"{ctx.slurm.work_dir}/scripts/{slug or '<fresh token>'}.sbatch"
        command = shlex.join(sbatch_argv(environment, "betty:<fresh token>", (), remote))
        resources = request_summary(script, default_partition(partitions))
        details: dict[str, Any] = {
            "cluster": ctx.profile.name, "resources": resources, "script_path": remote, "command": command,
            "environment": environment.describe(), "goal": args.goal,
            "partitions": sorted({str(name) for name in partitions["partition"]}),
            "checked on the cluster": checked,
        }
        details["mail"] = mail_words(script.get("mail-type"), script.get("mail-user"))
        if args.end_mail:
            details["end mail"] = True
        if slug is None:
            details["recorded"] = False
            return Preview(kind="script", title=f"submit {name} to {ctx.profile.name}, not recorded: {resources}",
                           text=args.script, details=details)
        details.update(page=f"wiki/experiments/{slug}.md", notebook=f"notebooks/experiments/{slug}.ipynb")
        if args.gpu_estimate is not None:
            details["gpu_estimate"] = args.gpu_estimate.model_dump()
            details["gpu_memory"] = estimate_line(details["gpu_estimate"])
        if args.measure_gpu_peak:
            details["gpu_peak"] = PEAK_WORDS
            details["gpu_memory"] = "; ".join(filter(None, [details.get("gpu_memory"), "its real peak is measured"]))
        if args.segments is not None or args.requeue:
            return _chain_preview(ctx, args, script, slug, details)
        original = _replaced(ctx, args)
        if original is not None:
            return _resubmission_preview(args, original, slug, details)
        return Preview(kind="script", title=f"submit {slug} to {ctx.profile.name}: {resources}",
                       text=args.script, details=details)

    async def run(self, ctx: ToolContext, args: SubmitArgs) -> ToolOutcome:
        """Check the script again, submit it once, write the page, notebook and log line."""
        args = with_sampler_asked(args)
        script = checked_submission(args, await ctx.slurm.partitions())
        await preflight(ctx, script, args.first_line)  # what was there when the card was shown may be gone now
        if not args.record:
            ident = await ctx.slurm.submit(script)
            summary = f"submitted job {ident} on {ctx.profile.name}; not recorded (no page, no notebook)"
            return ToolOutcome(summary=summary, data={"job_id": ident, "cluster": ctx.profile.name, "page": None})
        estimate = None if args.gpu_estimate is None else args.gpu_estimate.model_dump()
        if args.segments is not None or args.requeue:
            return await _submit_chain(ctx, args, script, estimate)
        original = _replaced(ctx, args)
        replaces = None if original is None else {"slug": original.slug, "job_id": original.job_id}
        experiment = await submit_experiment(ctx.slurm, ctx.workspace, ctx.profile.name, script,
                                             goal=args.goal, name=args.name, gpu_estimate=estimate,
                                             replaces=replaces,
                                             gpu_peak={"sampled": True} if args.measure_gpu_peak else None)
        page = f"wiki/{experiment.page}"
        summary = (f"submitted job {experiment.job_id} on {experiment.cluster} as {experiment.slug}; "
                   f"page {page}, notebook {experiment.notebook}")
        return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}",
                           data=experiment, artifacts=[page, experiment.notebook])


PEAK_WORDS = ("measured: nvidia-smi samples every GPU's memory in the background (the lines after the #SBATCH "
              "lines); the highest goes to betty-gpu-peak-<job id>.txt in the job's working directory, and Betty "
              "records it, beside the estimate, when the job ends")
"""What a card says of a submission that measures its GPU peak."""


def with_sampler_asked(args: SubmitArgs) -> SubmitArgs:
    """``args`` with the GPU peak sampler in its script when the person asked to measure the peak, or the script
    carries it already (a measured job resubmitted); ToolError when it cannot be (not recorded). A chain (segments or
    requeue) keeps the person's script: each segment's script gets the sampler (``segment_script``)."""
    if not args.measure_gpu_peak and (MARKER not in args.script or not args.record):
        return args
    if not args.record:
        raise ToolError("measure_gpu_peak: the peak is recorded on the job's experiment; leave record out")
    if args.segments is not None or args.requeue:
        return args.model_copy(update={"measure_gpu_peak": True})
    return args.model_copy(update={"script": with_sampler(args.script), "measure_gpu_peak": True})


def _chain_plan(args: SubmitArgs, script: "SbatchScript") -> ChainPlan:
    """The chain the person asked for, checked against the script's time limit; ToolError in one line."""
    if not args.record or args.replaces is not None:
        raise ToolError("segments: a chain is recorded as a new experiment; leave record and replaces out")
    plan = ChainPlan(cap=int(args.segments or 1), signal_seconds=args.checkpoint_seconds, requeue=args.requeue)
    try:
        plan.check(script.time_minutes())
    except UsageError as error:
        raise ToolError(str(error)) from error
    return plan


def _chain_preview(ctx: ToolContext, args: SubmitArgs, script: "SbatchScript", slug: str,
                   details: dict[str, Any]) -> Preview:
    """The whole chain on one card: the script every segment runs, its segments, signal, cap and most time."""
    plan = _chain_plan(args, script)
    try:
        text = segment_script(ctx.slurm, args.script, plan, slug, args.measure_gpu_peak)
    except UsageError as error:
        raise ToolError(str(error)) from error
    gpus = script.gpu_request()
    details["chain"] = chain_card(plan, script.time_minutes() or 0, gpus[1] if gpus else 0)
    if plan.cap > 1:
        details["command"] += f"  (then {plan.cap - 1} more, each with --dependency=afterany:<the one before>)"
    shape = f"as a chain of up to {plan.cap} segments" if plan.cap > 1 else "to resume from its checkpoint"
    title = (f"submit {slug} to {ctx.profile.name} {shape}" + (", requeued if preempted" if plan.requeue else "")
             + f": {details['resources']}")
    return Preview(kind="script", title=title, text=text, details=details)


async def _submit_chain(ctx: ToolContext, args: SubmitArgs, script: "SbatchScript",
                        estimate: dict[str, Any] | None) -> ToolOutcome:
    """Submit every segment once and record the chain as one experiment."""
    plan = _chain_plan(args, script)
    try:
        experiment = await submit_chain(ctx.slurm, ctx.workspace, ctx.profile.name, script, plan, goal=args.goal,
                                        name=args.name, gpu_estimate=estimate,
                                        measure_gpu_peak=args.measure_gpu_peak)
    except UsageError as error:
        raise ToolError(str(error)) from error
    jobs = (experiment.chain or {}).get("jobs") or [experiment.job_id]
    page = f"wiki/{experiment.page}"
    segments = f"{len(jobs)} segments" if len(jobs) > 1 else "1 segment"
    summary = (f"submitted a chain of {segments} on {experiment.cluster} as {experiment.slug} "
               f"(jobs {', '.join(jobs)}); page {page}, notebook {experiment.notebook}")
    return ToolOutcome(summary=summary, full=f"{summary}\nscript: {experiment.script_path}",
                       data=experiment, artifacts=[page, experiment.notebook])


def _replaced(ctx: ToolContext, args: SubmitArgs) -> "Experiment | None":
    """The recorded experiment a resubmission corrects; ToolError when Betty has no record of it."""
    if args.replaces is None:
        return None
    original = recorded_experiment(ctx.workspace, ctx.profile.name, args.replaces)
    if original is None:
        raise ToolError(f"replaces: job {args.replaces} was not submitted through Betty on {ctx.profile.name}, so "
                        "there is no script to compare with; leave replaces out")
    return original


def _resubmission_preview(args: SubmitArgs, original: "Experiment", slug: str, details: dict[str, Any]) -> Preview:
    """The new script as a diff against the one it corrects, every line shown (whole-file context)."""
    details["replaces"] = {"job_id": original.job_id, "experiment": original.slug, "page": f"wiki/{original.page}"}
    whole = max(original.script.count("\n"), args.script.count("\n")) + 1
    diff = script_diff(original.script, args.script, f"{original.slug}.sbatch (job {original.job_id})",
                       f"{slug}.sbatch", context=whole)
    title = f"resubmit {original.slug} as {slug} to {original.cluster}: {details['resources']}"
    if not diff:  # the same script again: show it, since a diff would be empty
        return Preview(kind="script", title=f"{title} (the script of job {original.job_id}, unchanged)",
                       text=args.script, details=details)
    return Preview(kind="diff", title=title, text=diff, details=details)


async def preflight(ctx: ToolContext, script: "SbatchScript", first_line: int = 1) -> list[str]:
    """What the script names, checked on the cluster (:mod:`~betty_jupyter.cluster.preflight`): the card's lines;
    ToolError ``can't submit: line N: …`` when something the job cannot start without is missing."""
    checked = await ctx.slurm.preflight(script)
    refusal = checked.refusal(first_line)
    if refusal is not None:
        raise ToolError(refusal)
    return checked.lines()


def checked_submission(args: SubmitArgs, partitions: Any, written: "SbatchScript | None" = None) -> "SbatchScript":
    """The script checked against the partitions; ToolError ``can't submit: line N: …`` (as the person sees it).

    ``written``: the script as Betty wrote it (``args.script`` is its text), checked as it is, not read again.
    What comes back is what the record and ``sbatch`` take: the script is read once per submission.
    """
    if written is not None and written.text != args.script:
        raise ToolError("the script checked is not the script shown; nothing was submitted")
    try:
        return checked_script(written or args.script, partitions)
    except ScriptError as error:
        raise ToolError(cant_submit(error, args.first_line)) from error


def estimate_line(gpu_estimate: dict[str, Any]) -> str:
    """``GPU memory estimate: 21.3 GiB per GPU (Llama-3.1-8B, lora)`` from an estimate's dict."""
    peak = gpu_estimate.get("peak_gib")
    if not isinstance(peak, (int, float)) or isinstance(peak, bool):
        return "GPU memory estimate given (no peak_gib in it)"
    about = ", ".join(str(gpu_estimate[k]) for k in ("model", "method") if gpu_estimate.get(k))
    return f"GPU memory estimate: {peak:.1f} GiB per GPU" + (f" ({about})" if about else "")


def planned_slug(workspace: "Workspace", name: str) -> str:
    """The slug :func:`submit_experiment` will choose for ``name`` today, found without writing anything."""
    ledger = Ledger(workspace.ledger_path) if workspace.ledger_path.exists() else _NoLedger()
    return new_slug(workspace, ledger, name, date.today())


class _NoLedger(Ledger):
    """Stands in for a ledger not created yet (creating it would be a side effect of a preview)."""

    def __init__(self) -> None:  # no file: nothing is recorded yet
        pass

    def slugs(self) -> set[str]:
        """No slug is taken."""
        return set()

    def slugs_from(self, base: str) -> set[str]:
        """No slug is taken."""
        return set()


class JobArgs(ToolArgs):
    """One job."""

    job_id: JobId = Field(description="the Slurm job id, such as '123' or '123_4'")


class ClusterStatus(Tool[JobArgs]):
    """A job's state now; its experiment page is brought up to date when Betty recorded it."""

    name = "cluster_status"
    description = ("Read one job's state now (state, exit code, elapsed, node, reason it waits). When the job was "
                   "submitted through Betty, its experiment page's Status and Runtime are updated too.")
    Args = JobArgs
    tier = Tier.ONCE_PER_SESSION
    follows_progress = True

    async def preview(self, ctx: ToolContext, args: JobArgs) -> Preview:
        """What is read, and which page would be updated."""
        experiment = recorded_experiment(ctx.workspace, ctx.profile.name, args.job_id)
        page = f"; update wiki/{experiment.page} (Status and Runtime only)" if experiment else ""
        return Preview(kind="text", title=f"read job {args.job_id}'s state",
                       text=f"read job {args.job_id} on {ctx.profile.name} (squeue, sacct, scontrol show job){page}",
                       details={"page": f"wiki/{experiment.page}" if experiment else None})

    async def run(self, ctx: ToolContext, args: JobArgs) -> ToolOutcome:
        """The job's record in ``data``; the page's auto region rewritten when it is recorded."""
        job = await ctx.slurm.job(args.job_id)
        line = job.line()
        experiment = recorded_experiment(ctx.workspace, ctx.profile.name, job.job_id)
        artifacts = []
        if experiment is not None and experiment.chain:
            snapshot = await ctx.slurm.snapshot(experiment.chain.get("jobs") or [experiment.job_id])
            experiment, deciding = read_chain(experiment, snapshot.jobs)
            kind = "pipeline" if (experiment.chain or {}).get("kind") == PIPELINE else "chain"
            if kind == "pipeline":
                cancelled = await cancel_stranded(ctx.slurm, experiment, snapshot.jobs)
                line += f"; cancelled {', '.join(cancelled)}: they wait on a step that failed" if cancelled else ""
            line += f"; {kind} {experiment.slug}: " + "; ".join(
                f"{'segment' if number.isdigit() else 'step'} {number} job {ident} {why}"
                for number, ident, _, why in timeline_rows(experiment))
            job = deciding or job
        if experiment is not None and experiment.gpu_peak:
            words = peak_words(experiment)
            line += f"; {words}" if words else "; its GPU peak is measured and read when it ends"
        if experiment is not None:
            await refresh_page(ctx.slurm, ctx.workspace, experiment, job)
            line += f"; page wiki/{experiment.page} updated"
            artifacts.append(f"wiki/{experiment.page}")
        return ToolOutcome(summary=line, full=line, data=job, artifacts=artifacts)


def recorded_experiment(workspace: "Workspace", cluster: str, job: str) -> "Experiment | None":
    """The experiment Betty recorded for ``job`` on ``cluster``, read without creating the ledger."""
    if not workspace.ledger_path.exists():
        return None
    ledger = Ledger(workspace.ledger_path)
    found = [t.experiment for t in ledger.all() if t.experiment.job_id == job and t.experiment.cluster == cluster]
    if found:
        return found[-1]
    chain = ledger.of_segment(cluster, job)
    return chain.experiment if chain is not None else None


class ClusterCancel(Tool[JobArgs]):
    """Cancel a job."""

    name = "cluster_cancel"
    description = "Cancel one job (scancel). The person sees the job's name and state before approving."
    Args = JobArgs
    tier = Tier.ALWAYS_ASK

    async def preview(self, ctx: ToolContext, args: JobArgs) -> Preview:
        """The job's name and state and the scancel command; a finished job is refused."""
        job = await ctx.slurm.job(args.job_id)
        if job.state.finished:
            raise ToolError(f"job {job.job_id} ({job.name}) already ended ({job.state.value}); nothing to cancel")
        return Preview(kind="command", title=f"cancel job {job.job_id} ({job.name}, {job.state.value})",
                       text=shlex.join(["scancel", job.job_id]),
                       details={"job_id": job.job_id, "name": job.name, "state": job.state.value, "user": job.user,
                                "partition": job.partition, "cluster": ctx.profile.name})

    async def run(self, ctx: ToolContext, args: JobArgs) -> ToolOutcome:
        """scancel, once."""
        await ctx.slurm.cancel(args.job_id)
        summary = f"cancelled job {args.job_id} on {ctx.profile.name}"
        return ToolOutcome(summary=summary, full=summary)
