"""Slurm's words as types: job ids, job states, and one job's record."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..errors import SlurmError, UsageError

_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")  # ASCII only: \d would accept "１２３"


def job_id(value: object) -> str:
    """A job id a command line may carry (``123`` or ``123_4``); anything else is refused."""
    text = str(value).strip()
    if not _JOB_ID.fullmatch(text):
        raise UsageError(f"{str(value)[:40]!r} is not a Slurm job id; use digits, or 123_4 for an array task")
    return text


def array_task_count(spec: str) -> int:
    """How many jobs one row of the queue stands for, from its array task ids (squeue's ``%K``).

    A pending array is one row: ``0-999%10`` is 1000 tasks, ``1,3,5-9`` is 7, ``0-20:5`` is 5; a plain
    job (blank) or one task (``4``) is 1. Text Betty cannot read counts as the one row it is.
    """
    text = spec.strip().strip("[]").split("%", 1)[0]
    if not text:
        return 1
    total = 0
    for part in text.split(","):
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        if not (first.isascii() and first.isdigit() and (not last or last.isascii() and last.isdigit())
                and (not step or step.isascii() and step.isdigit() and int(step) > 0)):
            return 1
        if not last:
            total += 1
        elif int(last) >= int(first):
            total += (int(last) - int(first)) // int(step or 1) + 1
    return max(total, 1)


def parse_sbatch_output(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` (``id`` or ``id;cluster``)."""
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    if not lines:
        raise SlurmError("sbatch printed no job id")
    first = lines[-1].split(";", 1)[0].strip()
    if not first.isdigit():
        raise SlurmError(f"sbatch printed {lines[-1]!r} where a job id was expected")
    return first


class JobState(str, enum.Enum):
    """Every state ``squeue``/``sacct`` report; parse with :meth:`parse`."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    RESIZING = "RESIZING"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    REVOKED = "REVOKED"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str) -> "JobState":
        """``CANCELLED by 1000`` → CANCELLED; short codes (``PD``, ``R``, ``CA``, ``OOM``…) too."""
        word = text.strip().split(" ", 1)[0].rstrip("+").upper() if text.strip() else "UNKNOWN"
        word = _SHORT_CODES.get(word, word)
        try:
            return cls(word)
        except ValueError:
            return cls.UNKNOWN

    @property
    def finished(self) -> bool:
        """Whether the job will not run again by itself."""
        return self in _FINISHED

    @property
    def succeeded(self) -> bool:
        """Whether it ended well."""
        return self is JobState.COMPLETED


_FINISHED = {
    JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY,
    JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL, JobState.DEADLINE, JobState.REVOKED,
    JobState.SPECIAL_EXIT,
}
_SHORT_CODES = {
    "PD": "PENDING", "CF": "CONFIGURING", "R": "RUNNING", "CG": "COMPLETING", "S": "SUSPENDED",
    "ST": "STOPPED", "SI": "SIGNALING", "SO": "STAGE_OUT", "RS": "RESIZING", "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD", "RF": "REQUEUE_FED", "RD": "RESV_DEL_HOLD", "CD": "COMPLETED",
    "CA": "CANCELLED", "F": "FAILED", "TO": "TIMEOUT", "OOM": "OUT_OF_MEMORY", "NF": "NODE_FAIL",
    "PR": "PREEMPTED", "BF": "BOOT_FAIL", "DL": "DEADLINE", "RV": "REVOKED", "SE": "SPECIAL_EXIT",
}


@dataclass(frozen=True)
class Job:
    """One job as Betty knows it from the queue or from accounting."""

    job_id: str
    name: str
    user: str
    partition: str
    state: JobState
    reason: str | None = None
    exit_code: str | None = None
    submitted: datetime | None = None
    started: datetime | None = None
    ended: datetime | None = None
    elapsed: timedelta | None = None
    time_limit: timedelta | None = None
    nodes: int | None = None
    nodelist: str | None = None
    gpus: int = 0
    gpu_type: str | None = None
    max_rss_bytes: int | None = None
    """The largest MaxRSS of the job's steps (accounting's sample of its peak memory)."""
    max_rss_step: str | None = None
    """The step that reached it (``batch``, ``0``…)."""
    comment: str | None = None
    work_dir: str | None = None
    stdout_path: str | None = None
    stderr_path: str | None = None
    tasks: dict[str, int] | None = None
    """For a job array read as one job (:mod:`.arrays`): how many of its tasks are in each state; None otherwise."""
    shown_task: str | None = None
    """For an ended array that did not complete: the task whose state it takes (its log tells why)."""

    def line(self) -> str:
        """The job in one line: ``job 12 (train) RUNNING · partition gpu · elapsed 0:01:02 · node n1``."""
        parts = [f"job {self.job_id} ({self.name}) {self.state.value}", f"partition {self.partition or '?'}"]
        if self.exit_code and self.state.finished:
            parts.append(f"exit code {self.exit_code}")
        if self.elapsed is not None:
            parts.append(f"elapsed {self.elapsed}")
        if self.nodelist:
            parts.append(f"node {self.nodelist}")
        if self.reason and not self.state.finished and self.reason != "None":
            parts.append(f"waiting: {self.reason}")
        if self.gpus:
            parts.append(f"{self.gpus} GPU(s) {self.gpu_type or ''}".rstrip())
        if self.tasks:
            parts.append(task_summary(self.tasks))
        return " · ".join(parts)


def task_summary(tasks: dict[str, int]) -> str:
    """``9 tasks: 7 COMPLETED, 2 FAILED`` (an array's tasks by state, the most first)."""
    ordered = sorted(tasks.items(), key=lambda item: (-item[1], item[0]))
    return f"{sum(tasks.values())} tasks: " + ", ".join(f"{count} {state}" for state, count in ordered)
