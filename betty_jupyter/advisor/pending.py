"""Why is it pending? One pending job explained from what Slurm reports, each claim with the figure it came from.

:func:`why_pending` reads, through the read policy, in two round trips: the job itself (``squeue --me``), then at
once its partition's priorities (``sprio``), the partition's pending jobs and their expected starts (``squeue``),
the person's fair-share (``sshare``) and what is idle on the cluster (``sinfo``). :class:`WhyPending` says it in
plain words (:meth:`WhyPending.lines`) and as data (:meth:`WhyPending.as_dict`). Other users' jobs are only
counted and their priorities given as a range; their names, users and ids are never read or shown.

When the job waits on others' jobs (``Resources``, ``Priority``), the scheduler is also asked where the same
request would start sooner: the placement advisor's ``sbatch --test-only`` over every partition and GPU type
``sinfo`` offers (:mod:`.placement`), with the job's own script when Betty recorded it, else its request as
squeue reports it. The soonest other placement that starts before the job itself is :class:`Sooner`: the exact
change (``--gres=gpu:h100:2``) and both starts.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from ..errors import SlurmError
from ..cluster.commands import run_allowed
from ..cluster.jobs import JobState, job_id
from ..cluster.allowlist import CommandPolicy
from ..transport.interface import Transport
from ..cluster.sbatch import SbatchScript
from . import slurm_reads as reads
from .estimates import Candidate, StartEstimate, wait_text
from .placement import PlacementAdvisor, placement_changes
from .reasons import Reason, explain

_BACKFILL_MARGIN_MINUTES = 5  # a shorter --time than the window by this much, so the job surely fits
_WAITING_ON_OTHERS = ("Priority", "Resources")


@dataclass(frozen=True)
class QueueAhead:
    """The pending jobs of the job's partition that go before it (higher priority), as counts and a range only."""

    partition: str
    ahead: int
    behind: int
    lowest: int | None
    highest: int | None
    earliest_start: datetime | None  # the soonest expected start among those ahead (their backfill reservation)


@dataclass(frozen=True)
class Sooner:
    """Where the same job would start sooner than where it waits, as ``sbatch --test-only`` answered."""

    estimate: StartEstimate
    """The scheduler's answer for the better placement (its argv is the exact question asked)."""
    changes: dict[str, str | None]
    """The ``#SBATCH`` options that move the job there (``None``: the option goes)."""
    here: datetime | None
    """When the job is expected to start where it waits (``squeue --start``); None: Slurm has not planned it yet."""

    @property
    def candidate(self) -> Candidate:
        """The placement: partition and GPU type."""
        return self.estimate.candidate

    def change(self) -> str:
        """``--gres=gpu:h100:2``: the options that differ, as sbatch spells them."""
        return " ".join(f"--{name}={value}" for name, value in self.changes.items() if value is not None)

    def line(self, now: datetime) -> str:
        """One line: the change, where and when it would start, against when it starts where it waits."""
        start = self.estimate.start
        assert start is not None
        when = wait_text(self.estimate.wait_minutes(now))
        here = (f"Slurm expects it at {self.here:%H:%M} ({_in(self.here, now)})" if self.here
                else "Slurm has planned no start for it yet")
        return (f"{self.change()} would start it {when} ({start:%H:%M}) on {self.candidate.label} (sbatch "
                f"--test-only); where it waits, {here} (squeue --start).")

    def as_dict(self, now: datetime) -> dict[str, Any]:
        """The placement, the change and both starts, as JSON-ready data."""
        start = self.estimate.start
        return {"partition": self.candidate.partition, "gpu_type": self.candidate.gpu_type,
                "label": self.candidate.label, "change": self.change(), "options": dict(self.changes),
                "start": start.isoformat() if start else None,
                "wait_minutes": self.estimate.wait_minutes(now),
                "start_where_it_waits": self.here.isoformat() if self.here else None,
                "asked": " ".join(self.estimate.argv), "line": self.line(now)}


@dataclass
class WhyPending:
    """The explanation of one job: its state and reason, priority factors, queue, fair-share, start, and advice."""

    job: reads.QueuedJob
    reason: Reason
    now: datetime
    priority: reads.PriorityRow | None = None
    weights: dict[str, int] = field(default_factory=dict)
    qos_limits: list[tuple[str, str]] = field(default_factory=list)
    queue: QueueAhead | None = None
    share: reads.FairShare | None = None
    idle: dict[str, reads.PartitionIdle] = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    sooner: Sooner | None = None
    """Where the same job would start sooner, as the scheduler itself answered; None when nowhere is sooner."""

    @property
    def pending(self) -> bool:
        """Whether the job waits in the queue."""
        return self.job.state is JobState.PENDING

    def headline(self) -> str:
        """One line: the job, its partition, and the reason in plain words (with Slurm's code)."""
        job = self.job
        where = ",".join(job.partitions) or "?"
        if not self.pending:
            return f"Job {job.job_id} is not pending: it is {job.state.value} (squeue, partition {where})."
        reason = self.reason
        return f"Job {job.job_id} is pending in partition {where} because {reason.meaning} (Slurm: {reason.code})."

    def lines(self) -> list[str]:
        """The whole explanation as lines of plain text, each naming the command its figures came from."""
        lines = [self.headline()]
        if not self.pending:
            return lines
        lines += [line for line in (self._limits_line(), self._priority_line(), self._queue_line(),
                                    self._share_line(), self._start_line()) if line]
        lines += [f"What would change it: {advice}" for advice in self.advice]
        return lines

    def _limits_line(self) -> str:
        job = self.job
        parts = []
        if job.dependency:
            parts.append(f"it depends on {job.dependency} (squeue %E)")
        if job.reservation:
            parts.append(f"it asks for reservation {job.reservation} (squeue %v)")
        if self.reason.code.startswith(("QOS", "Assoc")) and (job.qos or job.account):
            parts.append(f"its QOS is {job.qos or '?'} and its account {job.account or '?'} (squeue)")
        if self.qos_limits:
            limits = "; ".join(f"{words} {value}" for words, value in self.qos_limits)
            parts.append(f"QOS {job.qos} limits (sacctmgr show qos): {limits}")
        return ("Details: " + "; ".join(parts) + ".") if parts else ""

    def _priority_line(self) -> str:
        row = self.priority
        if row is None:
            total = f"{self.job.priority:,}" if self.job.priority is not None else "unknown"
            return f"Priority {total} (squeue %Q); sprio lists no factors for it (held jobs and jobs not yet " \
                   "prioritised have none)."
        parts = []
        for key, words in reads.FACTORS:
            normal, weighted = row.factors.get(key, (0.0, 0))
            weight = self.weights.get(key)
            times = f" × {weight:,}" if weight is not None else ""
            parts.append(f"{words} {normal:.2f}{times} = {weighted:,}")
        nice = f", nice {row.nice:+,}" if row.nice else ""
        return f"Priority {row.priority:,} in {row.partition} (sprio, weights from sprio --weights): " + \
            "; ".join(parts) + nice + "."

    def _queue_line(self) -> str:
        queue = self.queue
        if queue is None:
            return ""
        if not queue.ahead:
            return f"No pending job in {queue.partition} goes before it; {queue.behind} wait behind it (sprio)."
        spread = f"{queue.lowest:,}" if queue.lowest == queue.highest else f"{queue.lowest:,}–{queue.highest:,}"
        return (f"{queue.ahead} pending job(s) in {queue.partition} go before it (a higher priority, or the same and "
                f"submitted earlier), with priority {spread}; "
                f"{queue.behind} wait behind it (sprio).")

    def _share_line(self) -> str:
        share = self.share
        if share is None or share.fairshare is None:
            return ""
        used = f", effective usage {share.effective_usage:.2f}" if share.effective_usage is not None else ""
        granted = f"share {share.norm_shares:.2f}" if share.norm_shares is not None else "share unknown"
        return (f"Your fair-share in account {share.account} is {share.fairshare:.2f} (sshare: {granted}{used}); "
                "1 is a light user, 0 has used more than their share.")

    def _start_line(self) -> str:
        start = self.job.expected_start
        if start is None:
            return "Slurm has no start estimate for it yet (squeue --start shows N/A until the backfill scheduler " \
                   "has planned it)."
        return f"Expected start: {start:%Y-%m-%d %H:%M} ({_in(start, self.now)}) (squeue --start)."

    def as_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready data: the figures, the reason, the advice and the lines."""
        job = self.job
        return {
            "job_id": job.job_id, "state": job.state.value, "pending": self.pending,
            "partitions": list(job.partitions), "reason": self.reason.code, "reason_known": self.reason.known,
            "meaning": self.reason.meaning, "change": self.reason.change,
            "priority": self.priority.priority if self.priority else job.priority,
            "factors": {key: {"normalised": normal, "weighted": weighted}
                        for key, (normal, weighted) in (self.priority.factors.items() if self.priority else ())},
            "queue": None if self.queue is None else {
                "partition": self.queue.partition, "ahead": self.queue.ahead, "behind": self.queue.behind,
                "lowest_priority_ahead": self.queue.lowest, "highest_priority_ahead": self.queue.highest,
            },
            "fairshare": None if self.share is None else {
                "account": self.share.account, "fairshare": self.share.fairshare,
                "norm_shares": self.share.norm_shares, "effective_usage": self.share.effective_usage,
            },
            "expected_start": job.expected_start.isoformat() if job.expected_start else None,
            "request": {"cpus": job.cpus, "gpus": job.gpus, "gpu_type": job.gpu_type, "nodes": job.nodes,
                        "time_limit_seconds": job.time_limit_seconds},
            "qos_limits": [{"limit": words, "value": value} for words, value in self.qos_limits],
            "advice": list(self.advice), "lines": self.lines(), "commands": list(self.commands),
            "sooner": self.sooner.as_dict(self.now) if self.sooner else None,
        }


async def why_pending(transport: Transport, policy: CommandPolicy, value: object,
                      now: datetime | None = None, timeout: float = 60.0, script: str | None = None) -> WhyPending:
    """Explain why the person's own job ``value`` waits; a one-line :class:`SlurmError` when it is not theirs or
    not in the queue. ``script``: the job's own batch script where Betty recorded it (the placements asked about
    keep its whole request)."""
    ident = job_id(value)
    commands: list[str] = []

    async def read(argv: list[str]) -> str:
        result = await run_allowed(transport, policy, argv, timeout=timeout)
        commands.append(shlex.join(argv))
        if not result.ok:
            said = next((line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()), "")
            if "Invalid job id" in said:
                raise SlurmError(f"job {ident} is not in the queue (it may have ended); `betty history {ident}` shows "
                                 "finished jobs")
            raise SlurmError(f"{argv[0]} failed: {said[:200] or f'exit code {result.exit_code}'}")
        return result.stdout

    job = reads.parse_job(await read(reads.job_command(ident)), ident)
    if job is None:
        raise SlurmError(f"job {ident} is not one of your jobs in the queue; Betty explains only your own jobs")
    reason = explain(job.reason, job.qos, job.account, job.job_id)
    explanation = WhyPending(job, reason, now or datetime.now(), commands=commands)
    if not explanation.pending or not job.partitions:
        return explanation
    partitions = ",".join(job.partitions)
    second = [reads.priority_command(partitions), reads.queue_command(partitions), reads.share_command(),
              reads.nodes_command(), reads.weights_command()]
    if explanation.reason.code.startswith("QOS") and job.qos:
        second.append(reads.qos_command(job.qos))
    for argv in second:  # a partition name the policy refuses stops them all before any runs
        policy.check(argv)
    texts = await asyncio.gather(*(read(argv) for argv in second))
    priorities, starts = reads.parse_priorities(texts[0]), reads.parse_queue_starts(texts[1])
    explanation.priority, explanation.queue = _standing(job, priorities, starts)
    explanation.share = next((s for s in reads.parse_shares(texts[2]) if s.account == job.account), None)
    explanation.idle = reads.parse_idle(texts[3])
    explanation.weights = reads.parse_weights(texts[4])
    explanation.qos_limits = reads.parse_qos_limits(texts[5], job.qos) if len(texts) > 5 else []
    explanation.advice = advise(explanation)
    if explanation.reason.code in _WAITING_ON_OTHERS:
        explanation.sooner = await sooner(transport, policy, job, script, timeout, commands, now)
        if explanation.sooner is not None:  # the concrete change first, in place of the reason's general words
            general = f"{explanation.reason.change}."
            explanation.advice = [explanation.sooner.line(explanation.now),
                                  *(line for line in explanation.advice if line != general)]
    return explanation


async def sooner(transport: Transport, policy: CommandPolicy, job: reads.QueuedJob, script: str | None,
                 timeout: float = 30.0, commands: list[str] | None = None,
                 now: datetime | None = None) -> Sooner | None:
    """The soonest placement other than the job's own where ``sbatch --test-only`` says the same request starts
    sooner: at least a minute before the job's own expected start (``squeue --start``), or, while Slurm has planned
    no start for it yet, at once. None when there is none, or the scheduler gave no start in time.

    The job's own placement is never asked: a new job there queues behind the job itself, so its answer says
    nothing of when the job starts. Asked through the placement advisor (its candidates, cache and parallel
    budget); each question asked goes into ``commands``.
    """
    drafted = SbatchScript.parse(script) if script else request_script(job)
    advisor = PlacementAdvisor(transport, policy=policy, budget=min(timeout, 30.0))
    own = Candidate(job.partitions[0], job.gpu_type if job.gpus else None)
    candidates = [candidate for candidate in await advisor.candidates(drafted) if candidate != own]
    if not candidates:
        return None
    advice = await advisor.advise(drafted, candidates)
    if commands is not None:
        commands.extend(" ".join(estimate.argv) for estimate in advice.estimates)
    now = now or advice.asked_at
    started = [(estimate, changes) for estimate in advice.estimates if estimate.ok
               if (changes := _changes(drafted, job, estimate.candidate))]  # a place it may already start in: none
    if not started:
        return None
    # the advisor's ranking, and of places that start alike the one that changes least (a GPU type, not a partition)
    best, changes = min(started, key=lambda pair: (pair[0].wait_minutes(now), len(pair[1])))
    here, start = job.expected_start, best.start
    if here is None and best.wait_minutes(now) != 0:  # both in the future and Slurm has not planned the job yet
        return None
    if start is None or (here is not None and (here - start).total_seconds() < 60):
        return None
    return Sooner(best, changes, here)


def _changes(script: SbatchScript, job: reads.QueuedJob, candidate: Candidate) -> dict[str, str | None]:
    """The options that move the job to ``candidate``, only those that differ from what it asks for now."""
    return {name: value for name, value in placement_changes(script, candidate).items()
            if value is not None and _differs(job, name, value, candidate)}


def request_script(job: reads.QueuedJob) -> SbatchScript:
    """The job's request as squeue reports it, as a script to ask ``--test-only`` about (no script was recorded)."""
    options = [("partition", job.partitions[0]), ("nodes", str(job.nodes)),
               ("ntasks-per-node", "1"), ("cpus-per-task", str(max(1, job.cpus // max(1, job.nodes))))]
    if job.time_limit_seconds:
        options.append(("time", str(max(1, int(job.time_limit_seconds // 60)))))
    if job.gpus:
        kind = f"{job.gpu_type}:" if job.gpu_type else ""
        options.append(("gres", f"gpu:{kind}{max(1, job.gpus // max(1, job.nodes))}"))
    return SbatchScript.written(options, "true\n")


def _differs(job: reads.QueuedJob, name: str, value: str, candidate: Candidate) -> bool:
    """Whether setting option ``name`` to ``value`` changes what the job asks for (a change worth naming)."""
    if name == "partition":
        return value not in job.partitions
    if name == "gres":
        return candidate.gpu_type != job.gpu_type
    if name == "nodes":
        return value != str(job.nodes)
    return True


def _standing(job: reads.QueuedJob, priorities: Sequence[reads.PriorityRow],
              starts: Sequence[tuple[str, int, datetime | None]]) -> tuple[reads.PriorityRow | None, QueueAhead | None]:
    """The job's own sprio row (its highest-priority partition) and the jobs ahead of it there: a higher priority,
    or the same one and submitted earlier (a lower id), as Slurm orders them."""
    own = [row for row in priorities if row.job_id == job.job_id]
    if not own:
        return None, None
    mine = max(own, key=lambda row: row.priority)
    others = {row.job_id: row.priority for row in priorities
              if row.partition == mine.partition and row.job_id != job.job_id}
    ahead_ids = {ident for ident, p in others.items() if (p, -_number(ident)) > (mine.priority, -_number(job.job_id))}
    ahead = [others[ident] for ident in ahead_ids]
    expected = [start for ident, _, start in starts if ident in ahead_ids and start is not None]
    queue = QueueAhead(mine.partition, len(ahead), len(others) - len(ahead), min(ahead, default=None),
                       max(ahead, default=None), min(expected, default=None))
    return mine, queue


def _number(ident: str) -> int:
    first = ident.split("_", 1)[0]
    return int(first) if first.isdigit() else 0


def advise(explanation: WhyPending) -> list[str]:
    """What would change the wait, each with its figures: another partition, a smaller request, a shorter --time."""
    job, idle = explanation.job, explanation.idle
    change = explanation.reason.change
    advice = [f"{change}."] if change and explanation.reason.known else []
    if explanation.reason.code not in _WAITING_ON_OTHERS and not explanation.reason.code.startswith(("QOS", "Assoc")):
        return advice
    for name, part in sorted(idle.items()):
        if name not in job.partitions and _fits(job, part):
            advice.append(f"partition {name} has {_idle_text(job, part)} idle now (sinfo): the same request could "
                          f"start there at once (--partition={name}).")
    smaller = [_smaller_request(job, idle[name]) for name in job.partitions if name in idle]
    advice += [text for text in smaller if text]
    window = _backfill_window(explanation)
    if window:
        advice.append(window)
    return advice


def _fits(job: reads.QueuedJob, part: reads.PartitionIdle) -> bool:
    return part.cpus_idle >= job.cpus and (job.gpus == 0 or part.idle_gpus(job.gpu_type) >= job.gpus)


def _idle_text(job: reads.QueuedJob, part: reads.PartitionIdle) -> str:
    text = f"{part.cpus_idle} of {part.cpus_total} CPUs"
    if job.gpus:
        kind = f" {job.gpu_type}" if job.gpu_type else ""
        text += f" and {part.idle_gpus(job.gpu_type)} of {part.total_gpus(job.gpu_type)}{kind} GPUs"
    return text


def _smaller_request(job: reads.QueuedJob, part: reads.PartitionIdle) -> str:
    kind = f" {job.gpu_type}" if job.gpu_type else ""
    if job.gpus:
        free = part.idle_gpus(job.gpu_type)
        if 0 < free < job.gpus:
            return (f"ask for {free}{kind} GPU(s) instead of {job.gpus}: {free} of {part.total_gpus(job.gpu_type)}"
                    f"{kind} GPUs in {part.name} are idle now (sinfo).")
        return ""
    if 0 < part.cpus_idle < job.cpus:
        return (f"ask for {part.cpus_idle} CPU(s) instead of {job.cpus}: {part.cpus_idle} of {part.cpus_total} CPUs "
                f"in {part.name} are idle now (sinfo).")
    return ""


def _backfill_window(explanation: WhyPending) -> str:
    """A shorter --time that ends before the jobs ahead are expected to start, when what it asks for is idle now."""
    job, queue = explanation.job, explanation.queue
    if queue is None or queue.earliest_start is None:
        return ""
    part = explanation.idle.get(queue.partition)
    minutes = int((queue.earliest_start - explanation.now).total_seconds() // 60) - _BACKFILL_MARGIN_MINUTES
    limit = job.time_limit_seconds
    if part is None or not _fits(job, part) or minutes < 1 or (limit is not None and limit <= minutes * 60):
        return ""
    asked = f"{int(limit // 60)} min" if limit is not None else "no limit"
    return (f"a --time of at most {minutes} min (it asks for {asked}) fits the backfill window: the jobs ahead are "
            f"expected to start at {queue.earliest_start:%H:%M} (squeue --start), and {_idle_text(job, part)} "
            f"are idle until then (sinfo).")


def _in(start: datetime, now: datetime) -> str:
    seconds = (start - now).total_seconds()
    if seconds <= 60:
        return "any moment now"
    minutes = int(seconds // 60)
    return f"in {minutes} min" if minutes < 120 else f"in {minutes // 60} h {minutes % 60:02d} min"
