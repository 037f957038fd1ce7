"""Start estimates as data, and Slurm's answers read strictly: ``sbatch --test-only``'s sentence, its refusals,
``squeue --start`` rows and partitions' ``TRESBillingWeights``; the ranking of candidates.

Slurm answers ``--test-only`` in prose on stderr; every version from 22.05 to 24.11 prints one of
:data:`START_FORMS` (``sbatch: Job 12 to start at 2026-11-25T04:12:00 using 2 processors on nodes n1 in
partition gpu``), read with a strict pattern; anything else is said to be unreadable, never guessed at. A refusal
(an unknown partition, a request over a limit) becomes one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import SlurmError
from ..safe_text import terminal_line
from ..cluster.parsing import SEPARATOR
from ..cluster.text_tables import aligned
from ..transport.interface import CommandResult

TABLE_COLUMNS = ("rank", "place", "starts", "wait", "fit", "cost", "nodes", "why not")
"""The columns of :meth:`Advice.rows`, in the order every table shows them."""

NOW_SECONDS = 90
"""A start this close to the question is "now"."""

START_FORMS = (
    re.compile(r"^(?:sbatch: )?Job (?P<job>\d+) to start at (?P<start>\S+) using (?P<cpus>\d+) processors "
               r"on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)$"),
    re.compile(r"^(?:sbatch: )?Job (?P<job>\d+) to start at (?P<start>\S+) on cluster (?P<cluster>\S+) using "
               r"(?P<cpus>\d+) processors on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)$"),
)
"""The sentences ``sbatch --test-only`` prints when the job could run (Slurm 22.05 to 24.11; the second one where
the answer names a cluster of a federation or ``--clusters``)."""

_START_TIME = "%Y-%m-%dT%H:%M:%S"
_REFUSAL = re.compile(r"^(?:sbatch: error: |allocation failure: |sbatch: )(?P<reason>.+)$")
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
"""A partition or GPU type name Betty passes to Slurm."""
PENDING_FIELDS = ("%i", "%P", "%T", "%r", "%S", "%D", "%C")
"""The ``squeue --start`` format codes :func:`read_pending` reads: job, partition, state, reason, start, nodes, CPUs."""
_PER_GB = {"K": 1024.0**2, "M": 1024.0, "G": 1.0, "T": 1 / 1024}


@dataclass(frozen=True)
class Candidate:
    """One place a job could run: a partition, a GPU type it offers, a node count; the GPU estimate's headroom."""

    partition: str
    gpu_type: str | None = None
    nodes: int | None = None
    headroom_gib: float | None = None
    """GiB left per GPU by the GPU estimate (negative: the job does not fit); None when no estimate was given."""

    def __post_init__(self) -> None:
        for what, name in (("partition", self.partition), ("GPU type", self.gpu_type)):
            if name is not None and not PLAIN_NAME.fullmatch(name):
                raise SlurmError(f"{what} {name[:40]!r} has characters Slurm names never use; "
                                 "use letters, digits and . _ + -")
        if self.nodes is not None and not 1 <= self.nodes <= 100_000:
            raise SlurmError(f"a node count must be between 1 and 100000, not {self.nodes}")

    @property
    def label(self) -> str:
        """``gpu (a100)``, ``gpu (a100, 2 nodes)``, ``cpu``: how a person names the place."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}" if self.nodes else None
        inside = [part for part in (self.gpu_type, nodes) if part]
        return f"{self.partition} ({', '.join(inside)})" if inside else self.partition


@dataclass(frozen=True)
class StartEstimate:
    """The scheduler's answer for one candidate: when and where it would start, or why it would not run."""

    candidate: Candidate
    argv: tuple[str, ...]
    start: datetime | None = None
    nodes: str | None = None
    processors: int | None = None
    reason: str | None = None
    """One line saying why there is no start time (Slurm's refusal, an answer Betty cannot read, no answer in time)."""
    cost: float | None = None
    """Billing units per hour from the partition's ``TRESBillingWeights`` (None where the site sets none)."""
    cached: bool = False

    @property
    def ok(self) -> bool:
        """Whether the scheduler gave a start time."""
        return self.start is not None

    def wait_minutes(self, now: datetime) -> int | None:
        """Whole minutes from ``now`` to the start, None without a start; 0 when it could start now (within
        :data:`NOW_SECONDS`: candidates asked together are answered a second or two apart)."""
        if self.start is None:
            return None
        seconds = (self.start - now).total_seconds()
        return 0 if seconds <= NOW_SECONDS else math.ceil(seconds / 60)

    def as_dict(self, now: datetime) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "label": self.candidate.label, "partition": self.candidate.partition, "gpu_type": self.candidate.gpu_type,
            "nodes_asked": self.candidate.nodes, "headroom_gib": self.candidate.headroom_gib,
            "start": self.start.strftime(_START_TIME) if self.start else None, "wait_minutes": self.wait_minutes(now),
            "nodes": self.nodes, "processors": self.processors, "reason": self.reason, "cost": self.cost,
            "cached": self.cached, "command": " ".join(self.argv),
        }


@dataclass(frozen=True)
class PendingStart:
    """One of the person's pending jobs and when Slurm expects it to start (``squeue --start``)."""

    job_id: str
    partition: str
    state: str
    reason: str
    start: datetime | None
    nodes: str
    cpus: str


@dataclass
class Advice:
    """Every candidate's estimate, best first, and how many questions reached the scheduler."""

    estimates: list[StartEstimate]
    asked_at: datetime
    scheduler_calls: int

    @property
    def best(self) -> StartEstimate | None:
        """The first candidate with a start time, or None."""
        return next((estimate for estimate in self.estimates if estimate.ok), None)

    def summary(self, limit: int = 3) -> str:
        """``starts ~in 12 min on gpu (a100); ~3 h on gpu (h100), cpu (h100)``: places that start alike share their
        wait, the first ``limit`` waits shown; why not, when no candidate can start."""
        waits: dict[str, list[str]] = {}
        for estimate in self.estimates:
            if estimate.ok:
                waits.setdefault(wait_text(estimate.wait_minutes(self.asked_at)), []).append(estimate.candidate.label)
        if not waits:
            first = self.estimates[0].reason if self.estimates else "no candidate placements"
            return f"no start estimate: {first}"
        return "starts " + "; ".join(f"{wait} on {', '.join(labels)}" for wait, labels in list(waits.items())[:limit])

    def rows(self) -> list[dict[str, str]]:
        """One row of text per candidate, best first, as every table shows them (cells are not yet escaped)."""
        return [estimate_row(number, estimate.as_dict(self.asked_at)) for number, estimate in enumerate(self.estimates, 1)]

    def table(self) -> str:
        """:meth:`rows` as aligned text, each cell on one line with its control characters written out."""
        rows = self.rows()
        return aligned(list(TABLE_COLUMNS), [[terminal_line(row[column]) for column in TABLE_COLUMNS] for row in rows])

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {"asked_at": self.asked_at.strftime(_START_TIME), "scheduler_calls": self.scheduler_calls,
                "summary": self.summary(), "estimates": [estimate.as_dict(self.asked_at) for estimate in self.estimates]}


def estimate_row(number: int, estimate: Mapping[str, Any]) -> dict[str, str]:
    """One estimate in its JSON form (:meth:`StartEstimate.as_dict`) as the text cells of :data:`TABLE_COLUMNS`."""
    headroom, cost, start = estimate.get("headroom_gib"), estimate.get("cost"), estimate.get("start")
    return {
        "rank": str(number) if start else "-", "place": str(estimate.get("label", "")),
        "starts": str(start or "").replace("T", " ")[:16], "wait": wait_text(estimate.get("wait_minutes")) if start else "",
        "fit": f"{headroom:+.1f} GiB" if isinstance(headroom, (int, float)) else "",
        "cost": f"{cost:g}/h" if isinstance(cost, (int, float)) else "", "nodes": str(estimate.get("nodes") or ""),
        "why not": str(estimate.get("reason") or ""),
    }


def wait_text(minutes: int | None) -> str:
    """``now``, ``~in 12 min``, ``~3 h``, ``~2 days``: a wait as a person says it."""
    if minutes is None:
        return "unknown"
    if minutes <= 1:
        return "now"
    if minutes < 90:
        return f"~in {minutes} min"
    if minutes < 48 * 60:
        return f"~{round(minutes / 60)} h"
    return f"~{round(minutes / (24 * 60))} days"


# ----- reading what Slurm printed --------------------------------------------------------------------------------------

def read_start(candidate: Candidate, result: CommandResult) -> StartEstimate:
    """Slurm's answer to one ``sbatch --test-only`` as a :class:`StartEstimate` (a refusal as its one-line reason)."""
    argv = tuple(result.argv)
    lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    matches = [found for line in lines for form in START_FORMS if (found := form.match(line))]
    if result.ok and len(matches) == 1:
        found = matches[0]
        try:
            start = datetime.strptime(found["start"], _START_TIME)
        except ValueError:
            return StartEstimate(candidate, argv, reason=f"Slurm gave the start time {found['start'][:40]!r} in a "
                                 f"form Betty does not read (expected {_START_TIME}; is SLURM_TIME_FORMAT set?)")
        return StartEstimate(candidate, argv, start=start, nodes=found["nodes"], processors=int(found["cpus"]))
    if result.ok:
        first = lines[0][:120] if lines else "nothing"
        return StartEstimate(candidate, argv, reason=f"Slurm's answer did not read as a start estimate: {first!r}")
    return StartEstimate(candidate, argv, reason=refusal_reason(lines, result.exit_code))


def refusal_reason(lines: Sequence[str], exit_code: int) -> str:
    """One line from a refused ``--test-only``: Slurm's most specific words (``sbatch: error:`` before
    ``allocation failure:``), without its prefixes."""
    specific = [line for line in lines if line.startswith("sbatch: error: ")]
    reasons = [found["reason"].strip() for line in specific + list(lines) if (found := _REFUSAL.match(line))]
    text = reasons[0] if reasons else (lines[0] if lines else f"sbatch exited {exit_code} without a word")
    return f"Slurm refused: {text[:200]}"


def read_pending(text: str) -> list[PendingStart]:
    """``squeue --start`` rows in Betty's fixed format (fields split at Betty's own separator)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(SEPARATOR)
        if len(fields) != len(PENDING_FIELDS):
            raise SlurmError(f"squeue --start printed a row of {len(fields)} fields, not {len(PENDING_FIELDS)}; "
                             "Betty reads nothing it cannot read exactly")
        job, partition, state, reason, start, nodes, cpus = (field.strip() for field in fields)
        rows.append(PendingStart(job, partition, state, reason, _start_time(start), nodes, cpus))
    return rows


def _start_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, _START_TIME)
    except ValueError:
        return None  # N/A, Unknown: Slurm has no estimate yet


def read_billing_weights(text: str) -> dict[str, dict[str, float]]:
    """Each partition's ``TRESBillingWeights`` from ``scontrol -o show partition`` (one record a line, read field by
    field); a partition without weights is absent."""
    weights: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        fields = dict(word.partition("=")[::2] for word in line.split() if "=" in word)
        name, value = fields.get("PartitionName"), fields.get("TRESBillingWeights")
        if name and value:
            weights[name] = _weights(value)
    return weights


def _weights(text: str) -> dict[str, float]:
    """``CPU=1.0,Mem=0.25G,GRES/gpu:a100=4`` as {tres: weight per unit}, memory per GB (Slurm reads a memory weight
    without a unit as per MB)."""
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        number = re.fullmatch(r"(\d*\.?\d+)([KMGT]?)", value.strip())
        if name.strip() and number:
            tres = name.strip().lower()
            per_gb = _PER_GB[number[2] or "M"] if tres == "mem" else 1.0
            weights[tres] = float(number[1]) * per_gb
    return weights


def rank(estimates: Iterable[StartEstimate], now: datetime) -> list[StartEstimate]:
    """Best first: those with a start time by the minute they start, then more headroom, then lower cost."""
    def key(estimate: StartEstimate) -> tuple[bool, int, float, float, str]:
        wait = estimate.wait_minutes(now)
        headroom = estimate.candidate.headroom_gib
        return (not estimate.ok, wait if wait is not None else 0, -(headroom if headroom is not None else 0.0),
                estimate.cost if estimate.cost is not None else 0.0, estimate.candidate.label)
    return sorted(estimates, key=key)
