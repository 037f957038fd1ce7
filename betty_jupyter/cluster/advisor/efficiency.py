"""How much of what they asked for finished jobs used: the figures ``seff`` gives, for many jobs from ONE ``sacct``.

For each job:

* **CPU efficiency** = TotalCPU / (Elapsed × AllocCPUS): 1.0 when every allocated core was busy all along.
* **Memory**: the largest MaxRSS of any step (accounting samples it every ``JobAcctGatherFrequency``) against
  the memory requested for the whole job. The request is read from ``ReqTRES``'s ``mem=`` (the job's total
  in every Slurm version that prints it); failing that from ``ReqMem``, which Slurm before 21.08 printed per
  CPU (``4000Mc``) or per node (``4000Mn``), and later versions as a plain per-node size.
* **Time**: Elapsed against the time limit (``TimelimitRaw``, minutes; ``UNLIMITED`` is no limit).
* **GPUs**: how many were allocated (``AllocTRES``' ``gres/gpu``), and their use where the site's accounting
  gathers it (``gres/gpuutil`` in ``TRESUsageInAve``, ``gres/gpumem`` in ``TRESUsageInMax``); "not gathered
  here" otherwise.

Every field comes from a fixed ``--format`` split on a separator Betty chose, so a job name holding ``|``, a line
break or markup cannot shift a column (:func:`~betty_jupyter.cluster.parsing.rows`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from ...errors import UsageError
from ..jobs import JobState, job_id
from ..parsing import SEPARATOR, duration_seconds, rows, size_bytes, tres_gpus, tres_items

if TYPE_CHECKING:
    from ..slurm import SlurmClient

EFFICIENCY_FIELDS: tuple[tuple[str, str], ...] = (
    ("JobID", "job_id"), ("JobName", "name"), ("Partition", "partition"), ("State", "state"), ("End", "ended"),
    ("ElapsedRaw", "elapsed"), ("TimelimitRaw", "time_limit"), ("AllocCPUS", "cpus"), ("NNodes", "nodes"),
    ("TotalCPU", "total_cpu"), ("ReqMem", "req_mem"), ("MaxRSS", "max_rss"), ("ReqTRES", "req_tres"),
    ("AllocTRES", "alloc_tres"), ("TRESUsageInMax", "usage_max"), ("TRESUsageInAve", "usage_ave"),
)
"""``sacct --format`` fields of :func:`sacct_argv`, in column order: (field, column name)."""

NOT_GATHERED = "not gathered here"
"""What the GPU use columns say where the site's accounting does not gather GPU TRES."""


@dataclass(frozen=True)
class JobEfficiency:
    """What one finished job asked for and what it used (None where accounting has no figure)."""

    job_id: str
    name: str
    partition: str
    state: str
    ended: str
    """As accounting wrote it (``2026-11-25T03:22:00``)."""
    elapsed_seconds: int
    time_limit_seconds: int | None
    """None: no limit."""
    cpus: int
    cpu_seconds: float
    """TotalCPU: user and system time of every step together."""
    memory_requested_bytes: int | None
    memory_peak_bytes: int | None
    """The largest MaxRSS of any step."""
    memory_peak_step: str | None
    gpus: int
    gpu_type: str | None
    gpu_utilization: float | None
    """Average GPU use in percent (``gres/gpuutil``), where accounting gathers it."""
    gpu_memory_bytes: int | None
    """Peak GPU memory (``gres/gpumem``), where accounting gathers it."""

    @property
    def cpu_efficiency(self) -> float | None:
        """TotalCPU / (Elapsed × AllocCPUS); None for a job that never ran."""
        if self.elapsed_seconds <= 0 or self.cpus <= 0:
            return None
        return self.cpu_seconds / (self.elapsed_seconds * self.cpus)

    @property
    def memory_efficiency(self) -> float | None:
        """Peak MaxRSS / requested memory."""
        if not self.memory_requested_bytes or self.memory_peak_bytes is None:
            return None
        return self.memory_peak_bytes / self.memory_requested_bytes

    @property
    def time_efficiency(self) -> float | None:
        """Elapsed / time limit."""
        if not self.time_limit_seconds:
            return None
        return self.elapsed_seconds / self.time_limit_seconds

    def as_dict(self) -> dict[str, Any]:
        """The fields and the three ratios, as ``--json`` and the agent give them."""
        return {**asdict(self), "cpu_efficiency": self.cpu_efficiency, "memory_efficiency": self.memory_efficiency,
                "time_efficiency": self.time_efficiency}


def sacct_argv(job_ids: Iterable[object] | None = None, since: str | datetime | None = None) -> list[str]:
    """The one ``sacct`` call for every job asked about: steps included (MaxRSS is a step's figure)."""
    argv = ["sacct", "--parsable2", "--noheader", f"--delimiter={SEPARATOR}",
            "--format", ",".join(field for field, _ in EFFICIENCY_FIELDS)]
    if job_ids is not None:
        argv += ["--jobs", ",".join(job_id(i) for i in job_ids)]
    if since is not None:
        argv += ["--starttime", since.strftime("%Y-%m-%dT%H:%M:%S") if isinstance(since, datetime) else _day(since)]
    return argv


def _day(text: str) -> str:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?", text):
        raise UsageError(f"since: {text[:40]!r} is not a date; write 2026-11-20 or 2026-11-20T08:00")
    return text


def parse_efficiency(text: str) -> list[JobEfficiency]:
    """``sacct`` output of :func:`sacct_argv` → one :class:`JobEfficiency` per finished job, in sacct's order.

    Steps (``12.batch``, ``12_3.0``) are folded into their job; jobs still pending or running are left out.
    """
    jobs: dict[str, dict[str, str]] = {}
    steps: dict[str, list[dict[str, str]]] = {}
    for row in rows(text, EFFICIENCY_FIELDS):
        owner, dot, _ = row["job_id"].partition(".")
        if dot:
            steps.setdefault(owner, []).append(row)
        else:
            jobs[owner] = row
    found = [_job(row, steps.get(ident, [])) for ident, row in jobs.items()]
    return [job for job in found if job is not None]


def _job(row: dict[str, str], steps: list[dict[str, str]]) -> JobEfficiency | None:
    state = JobState.parse(row["state"])
    if not state.finished:
        return None
    cpus = _integer(row["cpus"]) or 0
    peak, peak_step = _peak_memory(steps)
    usage_max = tres_items(",".join(step["usage_max"] for step in steps))
    usage_ave = [tres_items(step["usage_ave"]) for step in steps]
    gpus, kind = tres_gpus(row["alloc_tres"])
    limit = _integer(row["time_limit"])
    return JobEfficiency(
        job_id=row["job_id"], name=row["name"], partition=row["partition"], state=state.value, ended=row["ended"],
        elapsed_seconds=_integer(row["elapsed"]) or 0, time_limit_seconds=None if limit is None else limit * 60,
        cpus=cpus, cpu_seconds=duration_seconds(row["total_cpu"]) or 0.0,
        memory_requested_bytes=requested_memory(row["req_tres"], row["req_mem"], cpus, _integer(row["nodes"]) or 1),
        memory_peak_bytes=peak, memory_peak_step=peak_step, gpus=gpus, gpu_type=kind,
        gpu_utilization=_largest(_number(item.get("gres/gpuutil", "")) for item in usage_ave),
        gpu_memory_bytes=size_bytes(usage_max["gres/gpumem"]) if usage_max.get("gres/gpumem") else None,
    )


def requested_memory(req_tres: str, req_mem: str, cpus: int, nodes: int) -> int | None:
    """The whole job's requested memory in bytes: ``ReqTRES`` ``mem=`` first, else ``ReqMem`` by its suffix."""
    tres = tres_items(req_tres).get("mem")
    if tres:
        return size_bytes(tres)
    if not req_mem:
        return None
    size = size_bytes(req_mem)
    if size is None:
        return None
    return size * (cpus if req_mem.endswith("c") else nodes)


def _peak_memory(steps: list[dict[str, str]]) -> tuple[int | None, str | None]:
    peak: int | None = None
    name: str | None = None
    for step in steps:
        size = size_bytes(step["max_rss"]) if step["max_rss"] else None
        if size is not None and (peak is None or size > peak):
            peak, name = size, step["job_id"].partition(".")[2]
    return peak, name


def _integer(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _largest(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


async def job_efficiency(slurm: "SlurmClient", job_ids: Iterable[object] | None = None,
                         since: str | datetime | None = None) -> list[JobEfficiency]:
    """Efficiency of the connected person's finished jobs (``job_ids``, or those started since ``since``): one sacct."""
    return parse_efficiency(await slurm.accounting(sacct_argv(job_ids, since)))
