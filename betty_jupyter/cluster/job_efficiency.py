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

import functools
import re
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

from ..errors import UsageError
from .jobs import JobState, job_id
from .parsing import SEPARATOR, duration_seconds, rows, size_bytes, tres_gpus, tres_items
from .tables import size_text
from .text_tables import rows_table

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

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "JobEfficiency":
        """Back from :meth:`as_dict` (the ratios, derived, are left out)."""
        values: dict[str, Any] = {item.name: record.get(item.name) for item in fields(cls)}
        return cls(**values)

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


_AGO = re.compile(r"([0-9]{1,4})([dhm])")
_AGO_UNITS = {"d": 86400, "h": 3600, "m": 60}


def since_start(text: str, now: datetime | None = None) -> datetime | str:
    """``7d``, ``12h``, ``30m`` → the moment that long before ``now``; a date (``2026-11-20[T08:00]``) as it is.

    UsageError, in one line, for anything else.
    """
    ago = _AGO.fullmatch(text.strip())
    if ago:
        return (now or datetime.now()) - timedelta(seconds=int(ago.group(1)) * _AGO_UNITS[ago.group(2)])
    try:
        return _day(text.strip())
    except UsageError:
        raise UsageError(f"since: {text[:40]!r} is neither a span (7d, 12h, 30m) nor a date (2026-11-20)") from None


def parse_efficiency(text: str, fields: Sequence[tuple[str, str]] = EFFICIENCY_FIELDS) -> list[JobEfficiency]:
    """``sacct`` output of :func:`sacct_argv` (or of a call whose :func:`~betty_jupyter.cluster.parsing.joined_fields`
    format ``fields`` holds :data:`EFFICIENCY_FIELDS`) → one :class:`JobEfficiency` per finished job, in sacct's order.

    Steps (``12.batch``, ``12_3.0``) are folded into their job; jobs still pending or running are left out.
    """
    jobs: dict[str, dict[str, str]] = {}
    steps: dict[str, list[dict[str, str]]] = {}
    for row in rows(text, fields, keep=None if fields is EFFICIENCY_FIELDS else EFFICIENCY_FIELDS):
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
    gpus, kind = _gpus(row["alloc_tres"])
    utilization, gpu_memory = _gpu_use(steps)
    limit = _integer(row["time_limit"])
    return JobEfficiency(
        job_id=row["job_id"], name=row["name"], partition=row["partition"], state=state.value, ended=row["ended"],
        elapsed_seconds=_integer(row["elapsed"]) or 0, time_limit_seconds=None if limit is None else limit * 60,
        cpus=cpus, cpu_seconds=duration_seconds(row["total_cpu"]) or 0.0,
        memory_requested_bytes=_requested(row["req_tres"], row["req_mem"], cpus, _integer(row["nodes"]) or 1),
        memory_peak_bytes=peak, memory_peak_step=peak_step, gpus=gpus, gpu_type=kind,
        gpu_utilization=utilization, gpu_memory_bytes=gpu_memory,
    )


def _gpu_use(steps: list[dict[str, str]]) -> tuple[float | None, int | None]:
    """The busiest step's average GPU use (``gres/gpuutil``) and the largest GPU memory (``gres/gpumem``)."""
    utilization: float | None = None
    memory: int | None = None
    for step in steps:
        if "gres/gpu" not in step["usage_ave"] and "gres/gpu" not in step["usage_max"]:
            continue  # most sites gather none: skip reading the list
        busy = _number(tres_items(step["usage_ave"]).get("gres/gpuutil", ""))
        peak = tres_items(step["usage_max"]).get("gres/gpumem")
        used = size_bytes(peak) if peak else None
        utilization = _largest([utilization, busy])
        memory = None if used is None and memory is None else max(used or 0, memory or 0)
    return utilization, memory


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


_requested = functools.lru_cache(maxsize=4096)(requested_memory)  # a thousand jobs ask for a handful of sizes
_gpus = functools.lru_cache(maxsize=4096)(tres_gpus)


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


EFFICIENCY_COLUMNS = ["job_id", "name", "state", "elapsed", "cpu", "memory", "time", "gpus"]
"""The columns ``betty efficiency``, ``%betty efficiency`` and ``cluster_efficiency`` show."""


def percent(ratio: float | None) -> str:
    """``0.337`` → ``34%``; blank when unknown."""
    return "" if ratio is None else f"{ratio * 100:.0f}%"


def shown_row(job: JobEfficiency) -> dict[str, str]:
    """One job as the table shows it: each figure with the amounts it came from (``63% of 500MiB``)."""
    cpu = f"{percent(job.cpu_efficiency)} of {job.cpus} core(s)" if job.cpu_efficiency is not None else ""
    memory = ""
    if job.memory_peak_bytes is not None:
        asked = f" of {short_size(job.memory_requested_bytes)}" if job.memory_requested_bytes else ""
        share = f" ({percent(job.memory_efficiency)})" if asked else ""
        memory = f"{short_size(job.memory_peak_bytes)}{asked}{share}"
    time = f"{percent(job.time_efficiency)} of {clock(job.time_limit_seconds)}" if job.time_limit_seconds else ""
    return {"job_id": job.job_id, "name": job.name, "state": job.state, "elapsed": clock(job.elapsed_seconds),
            "cpu": cpu, "memory": memory, "time": time, "gpus": gpu_text(job)}


def gpu_text(job: JobEfficiency) -> str:
    """``2 × a100, 81% busy, peak 29.3GiB`` / ``1 × gpu, use not gathered here`` / blank without GPUs."""
    if not job.gpus:
        return ""
    shown = f"{job.gpus} × {job.gpu_type or 'gpu'}"
    if job.gpu_utilization is None and job.gpu_memory_bytes is None:
        return f"{shown}, use {NOT_GATHERED}"
    if job.gpu_utilization is not None:
        shown += f", {job.gpu_utilization:.0f}% busy"
    if job.gpu_memory_bytes is not None:
        shown += f", peak {short_size(job.gpu_memory_bytes)}"
    return shown


def summary_line(job: JobEfficiency) -> str:
    """The job's figures in one line, as its experiment page and the job babysitter say them."""
    row = shown_row(job)
    parts = [f"{name} {row[key]}" for key, name in (("cpu", "CPU"), ("memory", "memory"), ("time", "time"),
                                                    ("gpus", "GPUs")) if row[key]]
    return " · ".join(parts) or "accounting recorded no use"


def efficiency_table(jobs: list[JobEfficiency]) -> str:
    """``jobs`` as an aligned text table (each cell on one line, control characters written out)."""
    return rows_table([shown_row(job) for job in jobs], EFFICIENCY_COLUMNS)


def short_size(size: int | None) -> str:
    """Bytes as ``11.2GiB`` (blank when unknown)."""
    return "" if size is None else size_text(size).replace(" ", "")


def clock(seconds: int | None) -> str:
    """Seconds as ``[D-]HH:MM:SS``, as Slurm writes durations and ``--time`` reads them (blank when unknown)."""
    if seconds is None:
        return ""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    return (f"{days}-" if days else "") + f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
