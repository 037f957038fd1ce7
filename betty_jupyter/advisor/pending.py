"""Why is it pending? One pending job explained from what Slurm reports, each claim with the figure it came from.

:func:`why_pending` reads, through the read policy, in two round trips: the job itself (``squeue --me``), then at
once its partition's priorities (``sprio``), the partition's pending jobs and their expected starts (``squeue``),
the person's fair-share (``sshare``) and what is idle on the cluster (``sinfo``). :class:`WhyPending` says it in
plain words (:meth:`WhyPending.lines`) and as data (:meth:`WhyPending.as_dict`). Other users' jobs are only
counted and their priorities given as a range; their names, users and ids are never read or shown.
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
from . import slurm_reads as reads
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
        }


async def why_pending(transport: Transport, policy: CommandPolicy, value: object,
                      now: datetime | None = None, timeout: float = 60.0) -> WhyPending:
    """Explain why the person's own job ``value`` waits; a one-line :class:`SlurmError` when it is not theirs or
    not in the queue."""
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
    return explanation


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
