"""Glue every face shares: run an allowlisted command, check a script against the partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..errors import PolicyError
from .policy import CommandPolicy
from .transport import CommandResult, Transport

if TYPE_CHECKING:
    import pandas as pd

    from .sbatch import PartitionOffer, SbatchScript


async def run_allowed(transport: Transport, policy: CommandPolicy, command: str | Sequence[str],
                      timeout: float = 60.0) -> CommandResult:
    """Run ``command`` only if the policy allows it, file paths checked after resolving symlinks.

    The policy refuses before the transport sees anything; only ``realpath`` (Betty's own
    read) runs to resolve the paths a file reader would open.
    """
    allowed = policy.check(command)
    if allowed.paths:
        roots = policy.readable_roots
        resolved = await resolve_paths(transport, [*allowed.paths, *roots])
        # Compare real paths with real roots: a root may itself be a link (/home → /gpfs/home).
        real_roots = CommandPolicy([resolved[root] for root in roots], policy.home, policy.extra_commands)
        real_roots.check_resolved(allowed, resolved)
    return await transport.run(list(allowed.argv), timeout)


async def resolve_paths(transport: Transport, paths: Sequence[str]) -> dict[str, str]:
    """Each path's canonical form on the cluster (symlinks followed), by ``realpath -m``."""
    result = await transport.run(["realpath", "-m", "--", *paths])
    lines = result.stdout.splitlines()
    if not result.ok or len(lines) != len(paths):
        raise PolicyError(f"refused: could not resolve {', '.join(paths)} on the cluster to check where they lead")
    return dict(zip(paths, lines))


def partition_offers(partitions: "pd.DataFrame") -> list["PartitionOffer"]:
    """What each partition offers, from :meth:`SlurmClient.partitions`, as plain data."""
    import pandas as pd

    from .sbatch import PartitionOffer

    offers = []
    for row in partitions.to_dict("records"):
        limit = row["time_limit"]
        minutes = None if pd.isna(limit) else int(limit.total_seconds() // 60)
        offers.append(PartitionOffer(name=str(row["partition"]), gpus=dict(row["gpu_types"]), max_time_minutes=minutes))
    return offers


def default_partition(partitions: "pd.DataFrame") -> str | None:
    """The partition jobs land in when they name none."""
    defaults = partitions[partitions["default"]]
    return str(defaults.iloc[0]["partition"]) if not defaults.empty else None


def checked_script(text: str, partitions: "pd.DataFrame") -> "SbatchScript":
    """Parse ``text`` and validate it against the cluster's partitions (ScriptError if it asks the impossible)."""
    from .sbatch import SbatchScript

    script = SbatchScript.parse(text)
    script.validate(partition_offers(partitions), default_partition=default_partition(partitions))
    return script


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
