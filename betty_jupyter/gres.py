"""Slurm's GRES text, read once for every layer that needs it (standard library only)."""

from __future__ import annotations

import re


def gpu_counts(gres: str) -> dict[str, int]:
    """GPUs per type from a GRES string such as ``gpu:a100:4,gpu:h100:2`` (as ``sinfo`` prints it).

    Socket bindings (``gpu:a100:4(S:0-1)``), other resources (``shard:8``) and ``(null)`` are
    ignored; an untyped ``gpu:4`` is counted under the type ``gpu``. A GPU entry whose count
    is not a number raises ``ValueError`` naming it.
    """
    counts: dict[str, int] = {}
    for raw in re.split(r",(?![^(]*\))", gres.strip()):
        resource = re.sub(r"\(.*\)$", "", raw.strip())
        fields = resource.split(":")
        if not resource or fields[0] != "gpu" or len(fields) < 2:
            continue
        kind, count = (fields[1], fields[2]) if len(fields) >= 3 else ("gpu", fields[1])
        if not count.isdigit():
            raise ValueError(f"cannot read the GPU count in GRES {resource!r}; expected e.g. gpu:a100:4")
        counts[kind] = counts.get(kind, 0) + int(count)
    return counts
