"""What "why is it pending?" reads from Slurm: the commands (fixed formats) and their pure parsers.

Every command runs through the read policy, which refuses control characters, so the fields are split by
:data:`DELIMITER`, a printable character the policy lets through and no Slurm name or number read here uses;
Slurm's reason comes last and keeps the rest of its line. A row with a field too many or too few (an
administrator's name holding the delimiter) is refused (:class:`~betty_jupyter.errors.SlurmError`), never guessed
at. The format codes used exist unchanged from Slurm 22.05 to 24.11. Other users' jobs are read only as job ids
and numbers: no user, no job name is ever asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Sequence

from ..errors import SlurmError
from ..cluster.jobs import JobState
from ..cluster.parsing import duration_seconds, tres_gpus

DELIMITER = "^"
"""Between fields: printable (the read policy refuses control characters), and in no field these reads ask for."""

JOB_FIELDS: tuple[tuple[str, str], ...] = (
    ("%i", "job_id"), ("%T", "state"), ("%P", "partition"), ("%q", "qos"), ("%a", "account"), ("%Q", "priority"),
    ("%S", "expected_start"), ("%l", "time_limit"), ("%D", "nodes"), ("%C", "cpus"), ("%b", "tres_per_node"),
    ("%E", "dependency"), ("%v", "reservation"), ("%r", "reason"),
)
"""squeue ``--format`` of the person's own job; the reason last (it may hold the delimiter's neighbours)."""

PRIORITY_FIELDS: tuple[tuple[str, str], ...] = (
    ("%i", "job_id"), ("%r", "partition"), ("%Y", "priority"), ("%a", "age"), ("%A", "age_weighted"),
    ("%f", "fairshare"), ("%F", "fairshare_weighted"), ("%j", "job_size"), ("%J", "job_size_weighted"),
    ("%p", "partition_factor"), ("%P", "partition_weighted"), ("%q", "qos"), ("%Q", "qos_weighted"), ("%N", "nice"),
)
"""sprio ``--format``: each factor normalised (0–1) and weighted (what it adds to the priority)."""

FACTORS = (("age", "age"), ("fairshare", "fair-share"), ("job_size", "job size"), ("partition_factor", "partition"),
           ("qos", "QOS"))
"""The priority factors Betty explains, as sprio's columns and in words."""

QUEUE_FIELDS: tuple[tuple[str, str], ...] = (("%i", "job_id"), ("%Q", "priority"), ("%S", "expected_start"))
"""squeue ``--format`` of the pending jobs of a partition: ids, priorities and expected starts only."""

SHARE_FIELDS = ("Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare")
"""sshare ``--format`` of the person's own associations."""

NODE_FIELDS = ("Partition", "StateCompact", "CPUsState", "Gres", "GresUsed")
"""sinfo ``--Format`` per node and partition: state, CPUs allocated/idle/other/total, GPUs configured and used."""

QOS_LIMITS: tuple[tuple[str, str], ...] = (
    ("MaxTRESPU", "per person"), ("MaxJobsPU", "running jobs per person"), ("MaxSubmitPU", "jobs queued per person"),
    ("MaxTRESPA", "per account"), ("MaxTRES", "per job"), ("MaxWall", "longest job"),
    ("GrpTRES", "for everyone together"), ("GrpJobs", "running jobs for everyone together"),
)
"""sacctmgr's QOS limit fields, and each in words."""

_NO_VALUE = ("", "N/A", "(null)", "None", "Unknown", "NONE")


def job_command(ident: str) -> list[str]:
    """``squeue`` of the person's own job ``ident`` (``--me``: someone else's job reads as nothing)."""
    return ["squeue", "--noheader", "--me", f"--jobs={ident}", "--format", _format(JOB_FIELDS)]


def priority_command(partitions: str) -> list[str]:
    """``sprio`` of every pending job in ``partitions`` (comma-separated)."""
    return ["sprio", "--noheader", "--partition", partitions, "--format", _format(PRIORITY_FIELDS)]


WEIGHT_FIELDS = ("%A", "%F", "%J", "%P", "%Q")
"""sprio ``--weights`` ``--format``: the site's weight of each of :data:`FACTORS`, in that order."""


def weights_command() -> list[str]:
    """``sprio --weights``: what each factor is multiplied by."""
    return ["sprio", "--noheader", "--weights", "--format", DELIMITER.join(WEIGHT_FIELDS)]


def parse_weights(text: str) -> dict[str, int]:
    """The weight of each factor (:data:`FACTORS` keys); empty when sprio printed none."""
    rows = split_rows(text, len(WEIGHT_FIELDS), "sprio --weights")
    if not rows:
        return {}
    return {key: _int(cell) or 0 for (key, _), cell in zip(FACTORS, rows[0])}


def queue_command(partitions: str) -> list[str]:
    """``squeue`` of the pending jobs in ``partitions``: their priority and expected start (``squeue --start``'s)."""
    return ["squeue", "--noheader", "--states", "PENDING", "--partition", partitions, "--format", _format(QUEUE_FIELDS)]


def share_command() -> list[str]:
    """``sshare`` of the person's own associations (``-U``), parsable."""
    return ["sshare", "--noheader", "--parsable2", "-U", "--format", ",".join(SHARE_FIELDS)]


def nodes_command() -> list[str]:
    """``sinfo`` per node and partition, unpadded fields."""
    fields = [f"{name}:0{DELIMITER}" for name in NODE_FIELDS[:-1]] + [f"{NODE_FIELDS[-1]}:0"]
    return ["sinfo", "--noheader", "--Node", "--Format", ",".join(fields)]


def qos_command(qos: str) -> list[str]:
    """``sacctmgr show qos QOS`` with the limits of :data:`QOS_LIMITS`, parsable."""
    return ["sacctmgr", "--noheader", "--parsable2", "show", "qos", qos,
            "format=Name," + ",".join(name for name, _ in QOS_LIMITS)]


def parse_qos_limits(text: str, qos: str) -> list[tuple[str, str]]:
    """The limits QOS ``qos`` sets, as (words, value) pairs in :data:`QOS_LIMITS` order; empty ones left out."""
    for cells in split_rows(text, len(QOS_LIMITS) + 1, "sacctmgr", delimiter="|"):
        if cells[0] == qos:
            return [(words, value) for (_, words), value in zip(QOS_LIMITS, cells[1:]) if _text(value)]
    return []


def _format(fields: Sequence[tuple[str, str]]) -> str:
    return DELIMITER.join(code for code, _ in fields)


def split_rows(text: str, width: int, what: str, delimiter: str = DELIMITER,
               rest_last: bool = False) -> list[list[str]]:
    """Each line of ``text`` as exactly ``width`` fields; ``rest_last``: the last field keeps the rest of the line."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split(delimiter, width - 1) if rest_last else line.split(delimiter)
        if len(cells) != width:
            raise SlurmError(f"{what} printed a line Betty cannot read exactly ({len(cells)} fields, not {width})")
        rows.append([cell.strip() for cell in cells])
    return rows


@dataclass(frozen=True)
class QueuedJob:
    """The person's own job as squeue reports it."""

    job_id: str
    state: JobState
    partitions: tuple[str, ...]
    qos: str
    account: str
    priority: int | None
    expected_start: datetime | None
    time_limit_seconds: float | None
    nodes: int
    cpus: int
    gpus: int
    gpu_type: str | None
    dependency: str
    reservation: str
    reason: str


def parse_job(text: str, ident: str) -> QueuedJob | None:
    """The row of job ``ident`` (None when squeue printed none)."""
    rows = [dict(zip((name for _, name in JOB_FIELDS), cells))
            for cells in split_rows(text, len(JOB_FIELDS), "squeue", rest_last=True)]
    row = next((r for r in rows if r["job_id"] == ident), None)
    if row is None:
        return None
    per_node, kind = tres_gpus(row["tres_per_node"])
    nodes = _int(row["nodes"]) or 1
    return QueuedJob(
        job_id=row["job_id"], state=JobState.parse(row["state"]),
        partitions=tuple(p for p in row["partition"].split(",") if p), qos=_text(row["qos"]),
        account=_text(row["account"]), priority=_int(row["priority"]), expected_start=_time(row["expected_start"]),
        time_limit_seconds=duration_seconds(row["time_limit"]), nodes=nodes, cpus=_int(row["cpus"]) or 1,
        gpus=per_node * nodes, gpu_type=kind, dependency=_text(row["dependency"]),
        reservation=_text(row["reservation"]), reason=_text(row["reason"]) or "None",
    )


@dataclass(frozen=True)
class PriorityRow:
    """One pending job's priority in one partition, from sprio: the total, and each factor normalised and weighted."""

    job_id: str
    partition: str
    priority: int
    factors: dict[str, tuple[float, int]] = field(default_factory=dict)
    nice: int = 0


def parse_priorities(text: str) -> list[PriorityRow]:
    """sprio's rows (format :data:`PRIORITY_FIELDS`)."""
    names = [name for _, name in PRIORITY_FIELDS]
    rows = []
    for cells in split_rows(text, len(names), "sprio"):
        row = dict(zip(names, cells))
        factors = {key: (_float(row[key]), _int(row[f"{key}_weighted" if key != "partition_factor"
                                                   else "partition_weighted"]) or 0) for key, _ in FACTORS}
        rows.append(PriorityRow(row["job_id"], row["partition"], _int(row["priority"]) or 0, factors,
                                _int(row["nice"]) or 0))
    return rows


def parse_queue_starts(text: str) -> list[tuple[str, int, datetime | None]]:
    """squeue's pending jobs (format :data:`QUEUE_FIELDS`): id, priority, expected start (None when not estimated)."""
    return [(cells[0], _int(cells[1]) or 0, _time(cells[2]))
            for cells in split_rows(text, len(QUEUE_FIELDS), "squeue")]


@dataclass(frozen=True)
class FairShare:
    """The person's standing in one account, from sshare."""

    account: str
    norm_shares: float | None
    effective_usage: float | None
    fairshare: float | None


def parse_shares(text: str) -> list[FairShare]:
    """sshare's rows of the person's own associations (``--parsable2``: fields split by ``|``)."""
    rows = []
    for cells in split_rows(text, len(SHARE_FIELDS), "sshare", delimiter="|"):
        row = dict(zip(SHARE_FIELDS, cells))
        if row["User"]:  # the account's own row (no user) is the group's, not the person's
            rows.append(FairShare(row["Account"], _maybe_float(row["NormShares"]),
                                  _maybe_float(row["EffectvUsage"]), _maybe_float(row["FairShare"])))
    return rows


@dataclass
class PartitionIdle:
    """What one partition has idle now, summed over its usable nodes (from sinfo)."""

    name: str
    cpus_idle: int = 0
    cpus_total: int = 0
    gpus_idle: dict[str, int] = field(default_factory=dict)
    gpus_total: dict[str, int] = field(default_factory=dict)

    def idle_gpus(self, kind: str | None) -> int:
        """Idle GPUs of ``kind`` (any kind when None)."""
        return sum(n for k, n in self.gpus_idle.items() if kind is None or k == kind)

    def total_gpus(self, kind: str | None) -> int:
        """GPUs of ``kind`` (any kind when None) on the partition's usable nodes."""
        return sum(n for k, n in self.gpus_total.items() if kind is None or k == kind)


_USABLE = ("idle", "mix", "mixed")


def parse_idle(text: str) -> dict[str, PartitionIdle]:
    """sinfo's node rows (fields :data:`NODE_FIELDS`) summed per partition; drained or down nodes count for nothing."""
    partitions: dict[str, PartitionIdle] = {}
    for cells in split_rows(text, len(NODE_FIELDS), "sinfo"):
        name, state, cpus, gres, used = cells
        part = partitions.setdefault(name.rstrip("*"), PartitionIdle(name.rstrip("*")))
        if state.rstrip("*~#!%$@^-+") not in _USABLE:
            continue
        counts = cpus.split("/")
        if len(counts) == 4 and all(c.isdigit() for c in counts):
            part.cpus_idle += int(counts[1])
            part.cpus_total += int(counts[3])
        totals, taken = _gpu_counts(gres), _gpu_counts(used)
        for kind, count in totals.items():
            part.gpus_total[kind] = part.gpus_total.get(kind, 0) + count
            part.gpus_idle[kind] = part.gpus_idle.get(kind, 0) + max(count - taken.get(kind, 0), 0)
    return partitions


def _gpu_counts(gres: str) -> dict[str, int]:
    """``gpu:a100:4(IDX:0-3),gpu:h100:2`` → ``{"a100": 4, "h100": 2}`` (an untyped ``gpu:2`` is ``"gpu"``)."""
    counts: dict[str, int] = {}
    for item in gres.split(","):  # a "(IDX:0,2)" split off here names no GPU and is passed over
        words = item.split("(", 1)[0].split(":")
        if not words or words[0] != "gpu" or len(words) < 2 or not words[-1].isdigit():
            continue
        kind = words[1] if len(words) == 3 else "gpu"
        counts[kind] = counts.get(kind, 0) + int(words[-1])
    return counts


def _text(value: str) -> str:
    return "" if value in _NO_VALUE else value


def _int(value: str) -> int | None:
    text = value.strip()
    return int(text) if text.lstrip("-").isdigit() else None


def _float(value: str) -> float:
    return _maybe_float(value) or 0.0


def _maybe_float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _time(value: str) -> datetime | None:
    if _text(value) == "":
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
