"""What a job may cost and what an account used this month, in GPU-hours and CPU-hours, from Slurm's own records.

A job's cost is read from its batch script alone: the most it can use if it runs to its ``--time``
(GPUs × nodes × array tasks × hours, and CPUs the same way). What an account used is summed from
accounting, one allowlisted ``sacct`` read of every allocation in the account since the month began
(``sacct -a -A ACCOUNT -S START -X -P -n -o JobID,ElapsedRaw,AllocTRES``): each allocation's elapsed
hours times the GPUs and CPUs it held. Rows that do not parse are refused, never guessed at.

Where Slurm keeps other users' jobs or usage private (``PrivateData=jobs`` or ``usage`` in ``slurm.conf``), that
read lists only the person's own allocations, so an account's use is not known from it (:func:`hidden_usage`):
Betty says so rather than show the person's own share as the account's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from ..errors import ScriptError, SlurmError
from .jobs import array_task_count
from .parsing import tres_gpus
from .sbatch import SbatchScript

USAGE_FIELDS = ("JobID", "ElapsedRaw", "AllocTRES")
"""sacct ``--format`` of an account's allocations: the id, seconds run, and what each held."""
ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""What an account name Betty passes to sacct may hold."""


@dataclass(frozen=True)
class Cost:
    """GPU-hours and CPU-hours: what a job may use, or what an account used."""

    gpu_hours: float = 0.0
    cpu_hours: float = 0.0

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.gpu_hours + other.gpu_hours, self.cpu_hours + other.cpu_hours)


def job_cost(script: SbatchScript) -> Cost | None:
    """The most a job can use if it runs to its ``--time``; None when it has no time of its own (the partition's).
    ScriptError when its time or GPUs cannot be read."""
    minutes = script.time_minutes()
    if minutes is None:
        return None
    nodes = max_nodes(script.get("nodes"))
    tasks = array_task_count(script.get("array") or "")
    gpus = script.gpu_request()
    hours = minutes / 60 * nodes * tasks
    return Cost(gpu_hours=(gpus[1] if gpus else 0) * hours, cpu_hours=_cpus_per_node(script, nodes) * hours)


def script_account(script: SbatchScript) -> str | None:
    """The account a script names (``--account``), or None."""
    return script.get("account") or None


def usage_argv(account: str, since: datetime) -> list[str]:
    """The ``sacct`` read of every allocation in ``account`` since ``since``; SlurmError for a name that is no
    account's."""
    if not ACCOUNT_NAME.match(account):
        raise SlurmError(f"{account[:40]!r} is not an account name Betty reads usage for")
    return ["sacct", "-a", "-X", "-P", "-n", "-A", account, "-S", since.strftime("%Y-%m-%dT00:00:00"),
            "-o", ",".join(USAGE_FIELDS)]


def parse_usage(text: str) -> Cost:
    """The GPU-hours and CPU-hours of sacct's rows (:data:`USAGE_FIELDS`, ``|``-separated); SlurmError naming a
    row that does not parse."""
    total = Cost()
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(USAGE_FIELDS) or not cells[1].isdigit():
            raise SlurmError(f"sacct printed a row Betty cannot read: {line[:80]!r}")
        hours = int(cells[1]) / 3600
        cpus = re.search(r"(?:^|,)cpu=(\d+)", cells[2])
        total += Cost(gpu_hours=tres_gpus(cells[2])[0] * hours, cpu_hours=(int(cpus.group(1)) if cpus else 0) * hours)
    return total


HIDING = ("jobs", "usage")
"""``PrivateData`` flags under which ``sacct -a`` lists only the person's own allocations."""


def hidden_usage(config: str) -> str | None:
    """The ``PrivateData`` setting (``PrivateData=usage``) that hides other users' allocations from the usage read,
    as ``scontrol show config`` prints it; None when it hides none."""
    for line in config.splitlines():
        name, _, value = line.partition("=")
        if name.strip().lower() == "privatedata":
            flags = [flag.strip().lower() for flag in value.split(",")]
            hiding = [flag for flag in flags if flag in HIDING]
            return f"PrivateData={','.join(hiding)}" if hiding else None
    return None


def month_start(now: datetime) -> datetime:
    """The first day of ``now``'s month, at midnight: where a month's budget starts counting."""
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def budget_line(cost: Cost | None, used: Cost, allowed_gpu: float | None, allowed_cpu: float | None,
                account: str) -> str:
    """``uses up to 8 GPU-hours; this month 41 of 500 GPU-hours of account lab used`` (and the CPU-hours where the
    budget gives them); over budget it says so."""
    parts: list[str] = []
    for unit, spent, allowed, asked in (("GPU-hours", used.gpu_hours, allowed_gpu, cost and cost.gpu_hours),
                                        ("CPU-hours", used.cpu_hours, allowed_cpu, cost and cost.cpu_hours)):
        if allowed is None:
            continue
        uses = "uses up to ? (no --time)" if cost is None else f"uses up to {hours_text(asked or 0)} {unit}"
        line = f"{uses}; this month {hours_text(spent)} of {hours_text(allowed)} {unit} of account {account} used"
        if cost is not None and spent + (asked or 0) > allowed:
            line += f" (this job would take it over by {hours_text(spent + (asked or 0) - allowed)})"
        parts.append(line)
    return "; ".join(parts)


def billed_line(gpus: int, elapsed_seconds: float, script_text: str) -> str:
    """What accounting billed an ended job against what its card said at the limit:
    ``billed: 0.037 GPU-hours (card said 0.033 at the limit; it ran 7 s past its limit before Slurm ended it)``, the
    GPUs it held (``AllocTRES``) times the seconds it ran; "" for a job that held no GPUs. The card's figure is
    :func:`job_cost` of the script it ran; Slurm ends a job at its limit only when it next checks limits, and
    bills the seconds in between."""
    if gpus <= 0 or elapsed_seconds < 0:
        return ""
    billed = f"billed: {hours_text(gpus * elapsed_seconds / 3600)} GPU-hours"
    try:
        script = SbatchScript.parse(script_text)
        card, minutes = job_cost(script), script.time_minutes()
    except ScriptError:
        return billed
    if card is None or minutes is None:
        return billed
    past = int(elapsed_seconds - minutes * 60)
    late = f"; it ran {past} s past its limit before Slurm ended it" if past > 0 else ""
    return f"{billed} (card said {hours_text(card.gpu_hours)} at the limit{late})"


def max_nodes(value: str | None) -> int:
    """The most nodes ``--nodes`` lets Slurm give (``2-4`` is 4); 1 when unset."""
    if not value:
        return 1
    counts = [int(part) for part in value.replace("-", " ").replace(",", " ").split() if part.isdigit()]
    return max(counts) if counts else 1


def _cpus_per_node(script: SbatchScript, nodes: int) -> int:
    """CPUs per node: ``--cpus-per-task`` × tasks per node (``--ntasks-per-node``, else ``--ntasks`` spread)."""
    def count(option: str) -> int | None:
        value = script.get(option) or ""
        if value and not value.isdigit():
            raise ScriptError(f"--{option}={value[:20]} is not a whole number")
        return int(value) if value else None

    per_task = count("cpus-per-task") or 1
    tasks = count("ntasks-per-node") or math.ceil((count("ntasks") or 1) / nodes)
    return per_task * max(tasks, 1)


def hours_text(hours: float) -> str:
    """Hours as a person reads them: ``8``, ``0.5``, ``41.3``; below one hour two significant digits (``0.067``, a
    GPU for four minutes), and ``<0.001`` below that."""
    if hours >= 1 or hours <= 0:
        return f"{round(hours, 1):g}"
    if hours < 0.001:
        return "<0.001"
    return f"{float(f'{hours:.2g}'):f}".rstrip("0").rstrip(".")
