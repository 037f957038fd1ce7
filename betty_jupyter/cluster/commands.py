"""Glue every face shares: check a cluster, run an allowlisted command, check a script against the partitions."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from .allowlist import CommandPolicy
from .file_reads import READ_LIMIT, run_checked
from .sbatch import PartitionOffer, SbatchScript
from .shared import Cluster
from ..transport.interface import CommandResult, Transport

if TYPE_CHECKING:
    import pandas as pd

    from ..errors import ScriptError
    from .profiles import ClusterProfile


async def cluster_check(profile: "ClusterProfile") -> str:
    """Reach ``profile``'s cluster and run Slurm there: one line with its partitions and the latency of a
    first and a warm command (``betty cluster test``, the panel's Test). Raises the transport's or
    Slurm's BettyError (a HostKeyError carries the fingerprint to confirm)."""
    cluster = Cluster(profile)  # its own link: the check logs in afresh, as a first use would
    try:
        client = cluster.slurm
        began = time.perf_counter()
        partitions = await client.partitions()
        first = time.perf_counter() - began
        began = time.perf_counter()
        await client.queue()
        warm = time.perf_counter() - began
    finally:
        await cluster.close()
    names = ", ".join(partitions["partition"]) or "none"
    return f"{profile.name}: OK — partitions {names}; first command {first * 1000:.0f} ms, warm {warm * 1000:.0f} ms"


async def run_allowed(transport: Transport, policy: CommandPolicy, command: str | Sequence[str],
                      timeout: float = 60.0, limit: int = READ_LIMIT) -> CommandResult:
    """Run ``command`` only if the policy allows it; its files checked where they really lead, its output capped.

    The policy refuses before the transport sees anything. What runs is one remote step
    (:func:`~betty_jupyter.cluster.file_reads.run_checked`): each path opened, the opened file
    checked under the real readable roots and against the secret paths, then read; the
    output cut at ``limit`` bytes on the cluster with a note saying so.
    """
    allowed = policy.check(command)
    return await run_checked(transport, allowed, policy.readable_roots, limit=limit, timeout=timeout)


def partition_offers(partitions: "pd.DataFrame") -> list["PartitionOffer"]:
    """What each partition offers, from :meth:`SlurmClient.partitions`, as plain data."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    offers = []
    for row in partitions.to_dict("records"):
        limit = row["time_limit"]
        minutes = None if pd.isna(limit) else int(limit.total_seconds() // 60)
        largest = row.get("memory_bytes_max")
        offers.append(PartitionOffer(name=str(row["partition"]), gpus=dict(row["gpu_types"]), max_time_minutes=minutes,
                                     max_memory_bytes=None if pd.isna(largest) else int(largest)))
    return offers


def default_partition(partitions: "pd.DataFrame") -> str | None:
    """The partition jobs land in when they name none."""
    defaults = partitions[partitions["default"]]
    return str(defaults.iloc[0]["partition"]) if not defaults.empty else None


def checked_script(text: "str | SbatchScript", partitions: "pd.DataFrame") -> "SbatchScript":
    """Parse ``text`` (unless it is a script already) and validate it against the cluster's partitions (ScriptError
    if it asks the impossible)."""
    script = text if isinstance(text, SbatchScript) else SbatchScript.parse(text)
    script.validate(partition_offers(partitions), default_partition=default_partition(partitions))
    return script


def cant_submit(error: "ScriptError", first_line: int = 1) -> str:
    """The one line that refuses a submission: ``can't submit: line 4: partition 'gpu-large' does not exist; …``.

    Lines are named as the person sees them: ``first_line`` is the number the script's first line
    has where they wrote it (2 in a ``%%betty submit`` cell, under the magic's own line).
    """
    return f"can't submit: {error.numbered_from(first_line)}"


def request_summary(script: "SbatchScript", fallback_partition: str | None = None) -> str:
    """One line describing what a script asks for: partition, GPUs, time."""
    parts = [f"partition {script.get('partition') or fallback_partition or 'default'}"]
    gpus = script.gpu_request()
    if gpus:
        kind, count = gpus
        parts.append(f"{count} GPU{'s' if count != 1 else ''}" + (f" ({kind})" if kind else ""))
    minutes = script.time_minutes()
    parts.append(f"time {minutes} min" if minutes is not None else "partition's time limit")
    return ", ".join(parts)
