"""What the cluster is doing now: partitions × state, the queue's depth and expected waits, the person's own share.

One refresh reads the cluster with two fixed commands and nothing else: one node-oriented ``sinfo`` (each node of
each partition with its state, CPUs allocated/idle/other/total, GRES and GRES in use, memory) and one ``squeue`` of
every job (Betty's pinned queue format, whose start time is, for a pending job, the start Slurm expects for it, as
``squeue --start`` prints it). Both print with Betty's unit separator, never prose.

The answer is plain data (:class:`OverviewData`), the same in every face: the text table of ``betty overview``
and the agent's ``cluster_overview``, the notebook's figure, the panel's Cluster tab. Other users' jobs are only
counted. :class:`OverviewReader` keeps one answer for a few seconds, so several readers cost one read.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from typing_extensions import TypedDict  # pydantic reads TypedDicts from typing only on Python 3.12 and later

from ..errors import SlurmError
from ..gres import gpu_counts
from ..safe_text import terminal_line
from ..cluster.delimited import run_read
from ..cluster.jobs import JobState
from ..cluster.parsing import SEPARATOR, SQUEUE_FIELDS, split_rows

if TYPE_CHECKING:
    from ..cluster.slurm import SlurmClient

SINFO_NODE_FIELDS: tuple[tuple[str, str], ...] = (
    ("Partition", "partition"), ("NodeList", "node"), ("StateLong", "state"), ("CPUsState", "cpus_by_state"),
    ("Gres", "gres"), ("GresUsed", "gres_used"), ("Memory", "memory"), ("AllocMem", "memory_allocated"),
)
"""``sinfo --Node --Format`` fields, one row per node and partition; each ends with Betty's separator."""

QUEUE_FIELDS: tuple[tuple[str, str], ...] = tuple(
    field for field in SQUEUE_FIELDS
    if field[1] in ("job_id", "array_task_id", "user", "partition", "state", "elapsed", "nodes", "cpus",
                    "tres_per_node", "started"))
"""The queue's columns the overview needs: Betty's pinned ``squeue`` format without the text any user writes (job
names, comments, reasons), so a name holding Betty's separator or a line break cannot hide a job from the count."""

NODE_STATES = ("idle", "mixed", "allocated", "down", "other")
"""The states a node is counted in: ``down`` takes down, drained, draining and failing nodes; ``other`` the rest
(completing, reserved, planned, powering up…)."""

USE_STATES = ("allocated", "idle", "down")
"""How CPUs and GPUs are counted: in use by jobs, free on a usable node, or on a node that takes no jobs."""

KEPT_SECONDS = 10.0
"""How long one overview is kept before the next reader asks the cluster again."""

_DOWN_WORDS = ("down", "drain", "fail", "inval", "not_responding", "unknown")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


class Share(TypedDict):
    """Jobs (each array task counted) and what the running ones hold."""

    running: int
    pending: int
    cpus: int
    gpus: int


class PartitionLoad(TypedDict):
    """One partition now: nodes per state, CPUs and GPUs (by type) per use, its queue, the person's share."""

    partition: str
    default: bool
    nodes: dict[str, int]
    cpus: dict[str, int]
    gpus: dict[str, dict[str, int]]
    memory_bytes: int
    memory_allocated_bytes: int
    running: int
    pending: int
    pending_with_estimate: int
    next_start_seconds: float | None
    last_start_seconds: float | None
    mine: Share


class OverviewData(TypedDict):
    """The whole cluster now, as every face shows it (and as JSON)."""

    user: str | None
    read_at: str
    partitions: list[PartitionLoad]
    mine: Share


def sinfo_argv() -> list[str]:
    """The one ``sinfo`` of a refresh: every node of every partition, each field ended by Betty's separator."""
    return ["sinfo", "--Node", "--noheader", "--Format",
            ",".join(f"{field}:0{SEPARATOR}" for field, _ in SINFO_NODE_FIELDS)]


def node_state(text: str) -> str:
    """A node's state as Slurm writes it (``mixed``, ``down*``, ``idle~``, ``drained``) → one of :data:`NODE_STATES`."""
    word = text.strip().lower().rstrip("*~#!%$@^-+")
    if any(down in word for down in _DOWN_WORDS):
        return "down"
    if word.startswith("alloc"):
        return "allocated"
    if word.startswith("mix"):
        return "mixed"
    if word.startswith("idle"):
        return "idle"
    return "other"


def parse_nodes(text: str) -> dict[str, PartitionLoad]:
    """``sinfo`` output (:func:`sinfo_argv`) → the partitions' nodes, CPUs, GPUs and memory, queue still empty."""
    names = [name for _, name in SINFO_NODE_FIELDS]
    partitions: dict[str, PartitionLoad] = {}
    for cells in split_rows(text, len(names) + 1):
        _add_node(partitions, dict(zip(names, cells)))
    return partitions


def _add_node(partitions: dict[str, PartitionLoad], row: dict[str, str]) -> None:
    name = row["partition"].strip()
    entry = partitions.setdefault(name.rstrip("*"), _empty_partition(name.rstrip("*"), name.endswith("*")))
    state = node_state(row["state"])
    entry["nodes"][state] += 1
    cpus = row["cpus_by_state"].strip().split("/")
    if len(cpus) != 4 or not all(part.isascii() and part.isdigit() for part in cpus):
        raise SlurmError(f"sinfo printed {row['cpus_by_state'][:40]!r} where CPUs allocated/idle/other/total "
                         "were expected")
    allocated, idle, other, _ = (int(part) for part in cpus)
    entry["cpus"]["allocated"] += allocated
    entry["cpus"]["down" if state == "down" else "idle"] += idle
    entry["cpus"]["down"] += other
    try:
        total, used = gpu_counts(row["gres"]), gpu_counts(row["gres_used"])
    except ValueError as error:
        raise SlurmError(f"sinfo printed GRES this version of Betty cannot read: {error}") from error
    for kind, count in total.items():
        gpus = entry["gpus"].setdefault(kind, {use: 0 for use in USE_STATES})
        busy = min(used.get(kind, 0), count)
        gpus["allocated"] += busy
        gpus["down" if state == "down" else "idle"] += count - busy
    entry["memory_bytes"] += _megabytes(row["memory"])
    entry["memory_allocated_bytes"] += _megabytes(row["memory_allocated"])


def _megabytes(text: str) -> int:
    digits = text.strip().rstrip("+")
    return int(digits) * 1024**2 if digits.isascii() and digits.isdigit() else 0


def _empty_share() -> Share:
    return {"running": 0, "pending": 0, "cpus": 0, "gpus": 0}


def _empty_partition(name: str, default: bool) -> PartitionLoad:
    return {"partition": name, "default": default, "nodes": {state: 0 for state in NODE_STATES},
            "cpus": {use: 0 for use in USE_STATES}, "gpus": {}, "memory_bytes": 0, "memory_allocated_bytes": 0,
            "running": 0, "pending": 0, "pending_with_estimate": 0, "next_start_seconds": None,
            "last_start_seconds": None, "mine": _empty_share()}


def add_queue(partitions: dict[str, PartitionLoad], jobs: list[dict[str, Any]], user: str | None,
              now: datetime | None = None) -> Share:
    """Count ``jobs`` (``queue_rows``) into their partitions; the person's share over all partitions.

    A pending job that may run in several partitions (``gpu,cpu``) waits in each of them. Expected starts are
    seconds from ``now`` on the cluster's clock (:func:`cluster_now` when not given); a start already past is 0.
    """
    now = now or cluster_now(jobs)
    mine = _empty_share()
    for job in jobs:
        state = JobState.parse(str(job["state"]))
        if state not in (JobState.PENDING, JobState.RUNNING):
            continue
        tasks = int(job.get("tasks") or 1)
        cpus, gpus = _held(job) if state is JobState.RUNNING else (0, 0)
        own = user is not None and job["user"] == user
        if own:
            _count(mine, state, tasks, cpus, gpus)
        start = _start_seconds(job.get("started") or "", now) if state is JobState.PENDING else None
        for name in str(job["partition"]).split(","):
            entry = partitions.get(name.strip())
            if entry is None:
                continue
            entry["running" if state is JobState.RUNNING else "pending"] += tasks
            if own:
                _count(entry["mine"], state, tasks, cpus, gpus)
            if start is not None:
                _add_start(entry, start, tasks)
    return mine


def _held(job: dict[str, Any]) -> tuple[int, int]:
    """A running job's CPUs and GPUs (its GPUs per node times its nodes)."""
    cpus = str(job.get("cpus") or "")
    nodes = str(job.get("nodes") or "")
    per_node = int(job.get("gpus") or 0)
    return (int(cpus) if cpus.isascii() and cpus.isdigit() else 0,
            per_node * (int(nodes) if nodes.isascii() and nodes.isdigit() else 1))


def _count(share: Share, state: JobState, tasks: int, cpus: int, gpus: int) -> None:
    if state is JobState.RUNNING:
        share["running"] += tasks
        share["cpus"] += cpus
        share["gpus"] += gpus
    else:
        share["pending"] += tasks


def _add_start(entry: PartitionLoad, seconds: float, tasks: int) -> None:
    entry["pending_with_estimate"] += tasks
    first, last = entry["next_start_seconds"], entry["last_start_seconds"]
    entry["next_start_seconds"] = seconds if first is None else min(first, seconds)
    entry["last_start_seconds"] = seconds if last is None else max(last, seconds)


def _start_seconds(text: str, now: datetime) -> float | None:
    try:
        start = datetime.strptime(text.strip(), _TIME_FORMAT)
    except ValueError:
        return None  # N/A, Unknown: Slurm has no estimate for it
    return max(0.0, (start - now).total_seconds())


def cluster_now(jobs: list[dict[str, Any]]) -> datetime:
    """The cluster's clock (its times carry no zone): a running job's start plus its elapsed time, else this
    machine's local time."""
    for job in jobs:
        if job["state"] != JobState.RUNNING.value:
            continue
        elapsed = job.get("elapsed")
        try:
            started = datetime.strptime(str(job.get("started") or "").strip(), _TIME_FORMAT)
        except ValueError:
            continue
        if isinstance(elapsed, timedelta):
            return started + elapsed
    return datetime.now()


async def read_overview(slurm: "SlurmClient", user: str | None) -> OverviewData:
    """The cluster now, from one ``sinfo`` and one ``squeue`` run side by side; ``user``'s share (None: no share)."""
    nodes, jobs = await asyncio.gather(run_read(slurm.transport, sinfo_argv(), slurm.timeout),
                                       slurm.queue_rows(fields=QUEUE_FIELDS))
    if not nodes.ok:
        said = (nodes.stderr or nodes.stdout).strip().splitlines()
        raise SlurmError(f"sinfo failed: {said[-1][:200] if said else f'exit code {nodes.exit_code}'}")
    partitions = parse_nodes(nodes.stdout)
    mine = add_queue(partitions, jobs, user)
    return {"user": user, "read_at": cluster_now(jobs).strftime(_TIME_FORMAT), "partitions": list(partitions.values()),
            "mine": mine}


class OverviewReader:
    """Reads the overview of one cluster, keeping each answer :data:`KEPT_SECONDS`; readers that come while a read
    runs wait for that one. The person's login name comes from ``login`` (the shared cluster's, read once for the
    process), else is asked once (``id -un``, no scheduler call)."""

    def __init__(self, slurm: "SlurmClient", kept: float = KEPT_SECONDS,
                 login: "Callable[[], Awaitable[str | None]] | None" = None) -> None:
        self.slurm = slurm
        self.kept = kept
        self._login = login
        self._user: str | None = None
        self._read: tuple[float, asyncio.Task[OverviewData]] | None = None

    async def user(self) -> str | None:
        """The person's login name on the cluster (None when the cluster does not say)."""
        if self._login is not None:
            return await self._login()
        if self._user is None:
            who = await self.slurm.transport.run(["id", "-un"], self.slurm.timeout)
            name = who.stdout.strip()
            self._user = name if who.ok and name else ""
        return self._user or None

    async def read(self) -> OverviewData:
        """The overview, read now or kept from a read less than :attr:`kept` seconds ago."""
        kept = self._read
        if kept is not None and (not kept[1].done() or time.monotonic() - kept[0] < self.kept):
            if not kept[1].done() or kept[1].exception() is None:
                return await asyncio.shield(kept[1])
        task = asyncio.get_running_loop().create_task(self._fresh())
        self._read = (time.monotonic(), task)
        return await asyncio.shield(task)

    async def _fresh(self) -> OverviewData:
        return await read_overview(self.slurm, await self.user())


# ----- as text ---------------------------------------------------------------------------------------------------
def wait_text(seconds: float | None) -> str:
    """An expected wait as a person reads it: ``now``, ``~12 min``, ``~3 h``, ``~2 d``; ``unknown`` without one."""
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return "now"
    if seconds < 3600:
        return f"~{round(seconds / 60)} min"
    if seconds < 86400 * 2:
        return f"~{seconds / 3600:.0f} h"
    return f"~{seconds / 86400:.0f} d"


def gpus_text(gpus: dict[str, dict[str, int]]) -> str:
    """GPUs by type as ``a100 2/4 used, h100 0/2 used (1 down)``; blank when the partition has none."""
    parts = []
    for kind, uses in gpus.items():
        total = sum(uses.values())
        down = f" ({uses['down']} down)" if uses["down"] else ""
        parts.append(f"{kind} {uses['allocated']}/{total} used{down}")
    return ", ".join(parts)


OVERVIEW_COLUMNS = ["partition", "nodes idle/mixed/alloc/down", "CPUs used/total", "GPUs", "running", "pending",
                    "next start", "yours"]
"""The overview table's columns, in every face."""


def overview_rows(overview: OverviewData) -> list[list[str]]:
    """One row of text per partition, the cells of :data:`OVERVIEW_COLUMNS` (not yet escaped for any face)."""
    rows = []
    for entry in overview["partitions"]:
        nodes = entry["nodes"]
        cpus = entry["cpus"]
        mine = entry["mine"]
        yours = (f"{mine['running']} running ({mine['cpus']} CPUs, {mine['gpus']} GPUs), {mine['pending']} pending"
                 if mine["running"] or mine["pending"] else "")
        rows.append([
            entry["partition"] + ("*" if entry["default"] else ""),
            f"{nodes['idle']}/{nodes['mixed']}/{nodes['allocated']}/{nodes['down']}",
            f"{cpus['allocated']}/{sum(cpus.values())}" + (f" ({cpus['down']} down)" if cpus["down"] else ""),
            gpus_text(entry["gpus"]),
            str(entry["running"]),
            str(entry["pending"]),
            wait_text(entry["next_start_seconds"]) if entry["pending"] else "",
            yours,
        ])
    return rows


def overview_table(overview: OverviewData) -> str:
    """The overview as an aligned text table with one line about the person's share; control characters written out."""
    rows = [[terminal_line(cell) for cell in row] for row in overview_rows(overview)]
    header = OVERVIEW_COLUMNS
    widths = [max([len(header[i]), *(len(row[i]) for row in rows)]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    if not rows:
        lines.append("(no partitions)")
    return "\n".join(lines) + "\n" + share_line(overview)


def share_line(overview: OverviewData) -> str:
    """``yours: 2 running (4 CPUs, 1 GPU), 1 pending``; who could not be told when the login name is unknown."""
    mine = overview["mine"]
    if overview["user"] is None:
        return "yours: unknown (Betty could not learn your login name on this cluster)"
    who = terminal_line(overview["user"])
    return (f"yours ({who}): {mine['running']} running ({mine['cpus']} CPUs, {mine['gpus']} GPUs), "
            f"{mine['pending']} pending")


def waits_line(overview: OverviewData) -> str:
    """Expected waits per partition in one line: ``gpu: next start ~12 min, last ~3 h (4 of 6 estimated)``."""
    parts = []
    for entry in overview["partitions"]:
        if not entry["pending"]:
            continue
        name = terminal_line(entry["partition"])
        if entry["next_start_seconds"] is None:
            parts.append(f"{name}: {entry['pending']} pending, expected start unknown (Slurm has no estimate yet)")
            continue
        parts.append(f"{name}: next start {wait_text(entry['next_start_seconds'])}, last "
                     f"{wait_text(entry['last_start_seconds'])} ({entry['pending_with_estimate']} of "
                     f"{entry['pending']} estimated)")
    return "; ".join(parts) if parts else "nothing is pending"

