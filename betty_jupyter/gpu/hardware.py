"""GPU types, their memory, and the cluster's partitions as plain data.

Memory sizes are the totals ``nvidia-smi`` reports (in MiB), not the marketing figure: an
"A100 80GB" shows 81920 MiB, an "H100 80GB" 81559 MiB, an "RTX 4090" 24564 MiB. Partitions
come in as Slurm GRES strings (``gpu:a100:4,gpu:h100:2``), exactly what ``sinfo -o %G``
prints, so this module never talks to Slurm itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import GpuEstimateError
from ..gres import gpu_counts


@dataclass(frozen=True)
class GpuType:
    """A GPU model and the memory one card offers."""

    name: str
    memory_mib: int
    aliases: tuple[str, ...] = ()

    @property
    def memory_gib(self) -> float:
        """Total memory in GiB (what ``nvidia-smi`` reports, divided by 1024)."""
        return self.memory_mib / 1024


GPU_TYPES: tuple[GpuType, ...] = (
    GpuType("T4", 15360, ("tesla-t4",)),
    GpuType("V100-16GB", 16160, ("v100", "v100-sxm2-16gb", "v100-pcie-16gb", "tesla-v100")),
    GpuType("V100-32GB", 32768, ("v100-32g", "v100s", "v100-sxm2-32gb")),
    GpuType("A10", 23028, ("a10g", "a10-24gb")),
    GpuType("L4", 23034, ()),
    GpuType("RTX3090", 24576, ("3090", "geforce-rtx-3090", "rtx-3090")),
    GpuType("RTX4090", 24564, ("4090", "geforce-rtx-4090", "rtx-4090")),
    GpuType("RTX-A6000", 49140, ("a6000", "rtx-a6000")),
    GpuType("A40", 46068, ()),
    GpuType("L40S", 46068, ("l40s-48gb", "l40")),
    GpuType("A100-40GB", 40960, ("a100", "a100-sxm4-40gb", "a100-pcie-40gb", "a100-40g", "a100-40")),
    GpuType("A100-80GB", 81920, ("a100-80g", "a100-80", "a100-sxm4-80gb", "a100-pcie-80gb", "a100l")),
    GpuType("H100-80GB", 81559, ("h100", "h100-80g", "h100-sxm5-80gb", "h100-pcie", "h100-80")),
    GpuType("H100-NVL", 95830, ("h100-nvl-94gb", "h100nvl")),
    GpuType("H200", 143771, ("h200-141gb", "h200-sxm-141gb")),
)


def _key(name: str) -> str:
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    return re.sub(r"^(nvidia-|tesla-)+", "", key)


def gpu_type(name: str, memory_gib: float | None = None) -> GpuType:
    """The GPU type called ``name`` (forgiving of Slurm's ``nvidia_a100-sxm4-80gb`` spellings).

    With ``memory_gib`` any name is accepted: a type the table does not know yet.
    """
    if memory_gib is not None:
        if memory_gib <= 0:
            raise GpuEstimateError(f"GPU memory for {name!r} must be positive (got {memory_gib} GiB)")
        return GpuType(name, round(memory_gib * 1024))
    key = _key(name)
    for gpu in GPU_TYPES:
        if key in (_key(gpu.name), *(_key(alias) for alias in gpu.aliases)):
            return gpu
    known = ", ".join(gpu.name for gpu in GPU_TYPES)
    raise GpuEstimateError(
        f"unknown GPU type {name!r}; known types: {known} (or give its memory, e.g. {name}=48 for 48 GiB)"
    )


@dataclass(frozen=True)
class Partition:
    """A Slurm partition as plain data: its name and how many GPUs of each type one node has."""

    name: str
    gpus: dict[str, int] = field(default_factory=dict)

    def gpu_types(self) -> list[tuple[GpuType, int]]:
        """(GPU type, cards per node) for every GPU type in this partition."""
        return [(gpu_type(name), count) for name, count in self.gpus.items()]


def parse_gres(gres: str) -> dict[str, int]:
    """GPU counts per type from a Slurm GRES string such as ``gpu:a100:4,gpu:h100:2``."""
    try:
        return gpu_counts(gres)
    except ValueError as error:
        raise GpuEstimateError(str(error)) from error


def parse_partition(text: str) -> Partition:
    """A partition from ``name=gres`` (``gpu=gpu:a100:4,gpu:h100:2``), as the CLI takes it."""
    name, sep, gres = text.partition("=")
    if not sep or not name.strip():
        raise GpuEstimateError(f"--partitions wants name=gres pairs like gpu=gpu:a100:4 (got {text!r})")
    counts = parse_gres(gres)
    if not counts:
        raise GpuEstimateError(f"partition {name!r} lists no GPUs in {gres!r}; expected e.g. gpu:a100:4")
    for kind in counts:
        gpu_type(kind)
    return Partition(name.strip(), counts)


def parse_gpu_type(text: str) -> GpuType:
    """A GPU type from ``a100-80gb`` or ``mygpu=48`` (a name with its memory in GiB)."""
    name, sep, memory = text.partition("=")
    if not sep:
        return gpu_type(name)
    try:
        return gpu_type(name, float(memory))
    except ValueError as exc:
        raise GpuEstimateError(f"GPU memory in {text!r} is not a number of GiB") from exc
