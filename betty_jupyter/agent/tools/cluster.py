"""Tools that read the cluster: an allowlisted command, the queue, partitions, accounting, a job's log."""

from __future__ import annotations

import shlex
import weakref
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator

from ...cluster.commands import run_allowed
from ...cluster.jobs import JobState
from ...cluster.parsing import jobs_by
from ...cluster.tables import PARTITION_COLUMNS, QUEUE_COLUMNS, readable
from ...cluster.text_tables import rows_table
from ...errors import BettyError, PolicyError
from ...safe_text import terminal_line
from ..budget import Paging, job_order
from ..models import Preview, Tier, ToolOutcome
from .base import JobId, OptionalJobId, Tool, ToolArgs, ToolContext, ToolError, clip

if TYPE_CHECKING:
    import pandas as pd

    from ...cluster.slurm import LogFile, SlurmClient

TABLE_ROWS = 20
A = TypeVar("A", bound=BaseModel)


def table(frame: "pd.DataFrame", columns: list[str], rows: int | None = TABLE_ROWS) -> str:
    """The chosen columns of ``frame`` as aligned text, cells as a person reads them; the first ``rows`` rows
    (all when None)."""
    shown = readable(frame if rows is None else frame.head(rows), columns)  # only the rows shown are rendered
    if shown.empty:
        return "(none)"
    text = shown.to_string(index=False)
    left = len(frame) - len(shown)
    return text + (f"\n[… {left} more row(s); the action log has them all]" if left > 0 else "")


def first_rows(rows: list[dict[str, Any]], shown: int = TABLE_ROWS) -> str:
    """The first ``shown`` of a table's plain rows as aligned text (what a person's chat shows under the call),
    and how many more there are."""
    if not rows:
        return "(none)"
    text = rows_table(rows[:shown], QUEUE_COLUMNS)
    left = len(rows) - shown
    return text + (f"\n[… {left} more row(s)]" if left > 0 else "")


def counts_by_state(frame: "pd.DataFrame") -> str:
    """``3 jobs: 2 RUNNING, 1 PENDING``; each task of a pending array (one row) is a job."""
    if frame.empty:
        return "0 jobs"
    return state_counts([(str(state), int(n)) for state, n in jobs_by(frame, "state").items()])


def state_counts(counts: list[tuple[str, int]]) -> str:
    """``3 jobs: 2 RUNNING, 1 PENDING`` from jobs per state, most first."""
    if not counts:
        return "0 jobs"
    return f"{sum(n for _, n in counts)} job(s): " + ", ".join(f"{n} {state}" for state, n in counts)


def newest_first(frame: "pd.DataFrame") -> "pd.DataFrame":
    """The jobs with the newest first (by job id, an array's tasks together): "my last job" is the first row."""
    if frame.empty or "job_id" not in frame.columns:
        return frame
    order = [job_order(ident) for ident in frame["job_id"]]
    return frame.iloc[sorted(range(len(frame)), key=lambda row: order[row], reverse=True)].reset_index(drop=True)


CONTROLLER_STATES = (JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED, JobState.COMPLETED,
                     JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL,
                     JobState.PREEMPTED, JobState.BOOT_FAIL, JobState.DEADLINE)
"""The states ``squeue --states`` lists a job in, ended ones included while the controller keeps them."""


async def newest_job(ctx: ToolContext, pending: bool = False) -> str:
    """The id of the person's newest job of the last week (``pending``: of their jobs waiting in the queue).

    What a call that names no job means: "my last job", "my pending job". ToolError when there is none.
    """
    uid = str(await ctx.slurm.login_uid())
    if pending:
        ids = list((await ctx.slurm.queue(user=uid, states=["PENDING"]))["job_id"])
        what = "no job waiting in the queue"
    else:
        # The controller knows a job that just ended before accounting does: both are asked, the controller for
        # its jobs in every state it keeps (ended ones for a few minutes).
        kept = await ctx.slurm.queue(user=uid, states=[state.value for state in CONTROLLER_STATES])
        ids = [*kept["job_id"], *(await ctx.slurm.history(since="now-7days"))["job_id"]]
        what = "no job in the last 7 days"
    if not ids:
        raise ToolError(f"you have {what}; cluster_queue and cluster_history list your jobs")
    return str(max(ids, key=job_order)).split("[")[0]


def bound_to_shown_job(args: A, preview: Preview) -> A:
    """``args`` naming the job the card showed, when the call named none: the run reads that job, not a newer one."""
    shown = preview.details.get("job_id")
    if getattr(args, "job_id", None) is None and isinstance(shown, str):
        return args.model_copy(update={"job_id": shown})
    return args


def _command(*words: str | None) -> str:
    return shlex.join(word for word in words if word)


class RunArgs(ToolArgs):
    """One read-only command."""

    command: str = Field(min_length=1, max_length=2000,
                         description="one plain read-only command, e.g. 'squeue --me' or 'sinfo -s'; no shell")


class ClusterRun(Tool[RunArgs]):
    """Run one command from the read-only allowlist."""

    name = "cluster_run"
    description = ("Run one read-only command on the cluster (squeue, sinfo, sacct, scontrol show, sprio, sshare, "
                   "seff, and ls/cat/head/tail/wc/du/df under the readable roots). No shell: no pipes, ';' or '$'.")
    Args = RunArgs
    tier = Tier.ONCE_PER_SESSION

    def rule_values(self, ctx: ToolContext, args: RunArgs) -> dict[str, Any]:
        """The command's one canonical spelling (``' cat x'``, ``"'c'at -- x"`` → ``cat /home/me/x``, ``head -n5 x``
        → ``head -n 5 /home/me/x``); as written when refused."""
        try:
            return {"command": ctx.policy().check(args.command).canonical}
        except BettyError:
            return super().rule_values(ctx, args)

    async def preview(self, ctx: ToolContext, args: RunArgs) -> Preview:
        """The exact command line that would run, or the allowlist's refusal."""
        try:
            allowed = ctx.policy().check(args.command)
        except PolicyError as refusal:
            return Preview(kind="text", title=f"refused on {ctx.profile.name}", text=str(refusal),
                           details={"refused": True, "cluster": ctx.profile.name})
        details = {"cluster": ctx.profile.name, "argv": list(allowed.argv), "refused": False}
        if allowed.paths:
            details["paths_checked"] = list(allowed.paths)
        return Preview(kind="command", title=f"run on {ctx.profile.name}", text=allowed.command_line, details=details)

    async def run(self, ctx: ToolContext, args: RunArgs) -> ToolOutcome:
        """Run it through :func:`run_allowed`: the policy refuses before the transport sees anything."""
        result = await run_allowed(ctx.slurm.transport, ctx.policy(), args.command)
        full = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr.strip() else "")
        if not result.ok:
            first = next((line for line in (result.stderr or result.stdout).splitlines() if line.strip()), "")
            return ToolOutcome(ok=False, summary=f"{shlex.join(result.argv)} exited {result.exit_code}: {first}",
                               full=full)
        return ToolOutcome(summary=clip(result.stdout) or "(no output)", full=full,
                           data={"argv": list(result.argv), "exit_code": result.exit_code})


class QueueArgs(ToolArgs):
    """Filters for the queue."""

    user: str | None = Field(None, description="only this user's jobs")
    states: list[str] | None = Field(None, description="only these states, e.g. ['PENDING', 'RUNNING']")
    partition: str | None = Field(None, description="only this partition")
    offset: int = Field(0, ge=0, description="skip this many rows (the answer says when there are more)")

    @field_validator("states")
    @classmethod
    def _known_states(cls, states: list[str] | None) -> list[str] | None:
        for state in states or []:
            if JobState.parse(state) is JobState.UNKNOWN:
                known = ", ".join(s.value for s in JobState if s is not JobState.UNKNOWN)
                raise ValueError(f"{state[:30]!r} is not a Slurm job state; use one of {known}")
        return states


class ClusterQueue(Tool[QueueArgs]):
    """The jobs in the queue."""

    name = "cluster_queue"
    description = "List jobs in the Slurm queue (squeue), optionally of one user, in some states or one partition."
    Args = QueueArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: QueueArgs) -> Preview:
        """The squeue call (its output format is pinned by Betty)."""
        states = ",".join(args.states) if args.states else None
        text = _command("squeue", "--user" if args.user else None, args.user, "--states" if states else None,
                        states, "--partition" if args.partition else None, args.partition)
        return Preview(kind="command", title=f"read the queue on {ctx.profile.name}",
                       text=f"{text}  (Betty's pinned --format)")

    async def run(self, ctx: ToolContext, args: QueueArgs) -> ToolOutcome:
        """The queue as a DataFrame in ``data`` and its counts; each face renders what it shows of it (the model a
        page of :mod:`..budget`, from ``offset``)."""
        read = await ctx.slurm.queue_table(user=args.user, states=args.states, partition=args.partition)
        counts = state_counts(read.jobs_by_state())
        return ToolOutcome.of_table(read, summary=f"{counts}\n{first_rows(read.rows)}",
                                    paging=Paging(args.offset, "states, partition or user"))


class NoArgs(ToolArgs):
    """This tool takes no arguments."""


class ClusterPartitions(Tool[NoArgs]):
    """The cluster's partitions."""

    name = "cluster_partitions"
    description = "List the cluster's partitions (sinfo): nodes and CPUs idle/total, memory, GPU types, time limit."
    Args = NoArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: NoArgs) -> Preview:
        """The sinfo call."""
        return Preview(kind="command", title=f"read the partitions of {ctx.profile.name}",
                       text="sinfo  (Betty's pinned --format)")

    async def run(self, ctx: ToolContext, args: NoArgs) -> ToolOutcome:
        """The partitions as a DataFrame in ``data``."""
        frame = await ctx.slurm.partitions()
        text = table(frame, PARTITION_COLUMNS, rows=None)
        names = ", ".join(f"{terminal_line(row['partition'])}{' (default)' if row['default'] else ''}"
                          for row in frame.to_dict("records"))
        return ToolOutcome(summary=clip(f"{len(frame)} partition(s): {names}\n{text}"), full=text, data=frame)


class HistoryArgs(ToolArgs):
    """Which jobs to read from accounting."""

    job_ids: list[JobId] | None = Field(None, max_length=200, description="these jobs only")
    since: str | None = Field(None, description="jobs started since, e.g. '2026-11-20' or 'now-2days'")
    all_users: bool = Field(False, description="every user's jobs, not only yours")
    offset: int = Field(0, ge=0, description="skip this many rows (the answer says when there are more)")


class ClusterHistory(Tool[HistoryArgs]):
    """Finished and running jobs from accounting."""

    name = "cluster_history"
    description = "Read jobs from Slurm accounting (sacct): state, exit code, elapsed time, peak memory, GPUs."
    Args = HistoryArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: HistoryArgs) -> Preview:
        """The sacct call."""
        ids = ",".join(args.job_ids) if args.job_ids else None
        text = _command("sacct", "--jobs" if ids else None, ids, "--starttime" if args.since else None, args.since,
                        "--allusers" if args.all_users else None)
        return Preview(kind="command", title=f"read accounting on {ctx.profile.name}",
                       text=f"{text}  (Betty's pinned --format)")

    async def run(self, ctx: ToolContext, args: HistoryArgs) -> ToolOutcome:
        """The jobs as a DataFrame in ``data``."""
        frame = newest_first(await ctx.slurm.history(args.job_ids, since=args.since, all_users=args.all_users))
        return ToolOutcome(summary=f"{counts_by_state(frame)}; newest first", data=frame,
                           paging=Paging(args.offset, "job_ids or since"))


class LogArgs(ToolArgs):
    """Which log to read."""

    job_id: OptionalJobId = Field(None, description="the job (default: your newest job)")
    stream: Literal["out", "err"] = Field("out", description="'out' for stdout, 'err' for stderr")
    lines: int = Field(50, ge=1, le=2000, description="how many lines from the end")


_PREVIEWED: "weakref.WeakKeyDictionary[SlurmClient, dict[tuple[str, str], LogFile]]" = weakref.WeakKeyDictionary()
"""The log file each session's last preview showed, per job and stream: the run reads that one."""


class JobLogs(Tool[LogArgs]):
    """The end of a job's output."""

    name = "job_logs"
    description = "Read the last lines a job wrote to its stdout ('out') or stderr ('err')."
    Args = LogArgs
    tier = Tier.ONCE_PER_SESSION
    follows_progress = True

    def bound(self, args: LogArgs, preview: Preview) -> LogArgs:
        """The job the card showed, when the call named none."""
        return bound_to_shown_job(args, preview)

    async def preview(self, ctx: ToolContext, args: LogArgs) -> Preview:
        """The tail command on the file the controller recorded for the job (refused here when Betty may not read it)."""
        job = await ctx.slurm.job(args.job_id or await newest_job(ctx))
        log = await ctx.slurm.log_file(job.job_id, args.stream)
        _PREVIEWED.setdefault(ctx.slurm, {})[log.job_id, log.stream] = log
        return Preview(kind="command", title=f"read the end of job {job.job_id}'s std{args.stream}",
                       text=log.command(args.lines).command_line,
                       details={"job_id": job.job_id, "name": job.name, "state": job.state.value, "path": log.path})

    async def run(self, ctx: ToolContext, args: LogArgs) -> ToolOutcome:
        """The lines of the file the preview showed (resolved now when none was shown), the last ones kept."""
        ident = args.job_id or await newest_job(ctx)
        previewed = _PREVIEWED.get(ctx.slurm, {}).pop((ident, args.stream), None)
        log = previewed or await ctx.slurm.log_file(ident, args.stream)
        job = await ctx.slurm.job(ident)
        text = await ctx.slurm.read_log(log, args.lines)
        about = f"job {job.job_id} ({terminal_line(job.name)}), {job.state.value}" + (
            f", exit code {job.exit_code}" if job.exit_code and job.state.finished else "")
        shown = clip(text, lines=args.lines, keep="tail") if text.strip() else "(nothing written yet)"
        return ToolOutcome(summary=f"{about}; the end of its std{args.stream}:\n{shown}", full=text)
