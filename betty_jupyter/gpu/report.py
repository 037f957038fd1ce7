"""An estimate as text a person reads at a glance (the CLI, the notebook)."""

from __future__ import annotations

from .estimate import Estimate
from .hardware import GpuType


def render_estimate(result: Estimate, gpu: GpuType | None = None) -> str:
    """The breakdown as an aligned table a person reads at a glance."""
    request = result.request
    tokens = f"batch {request.batch_size} × {request.seq_len} tokens"
    lines = [
        f"{result.model} ({result.params / 1e9:.2f}B params): {request.method}, {request.resolved_precision}, "
        f"{request.framework}, {request.gpus} GPU{'s' if request.gpus > 1 else ''}, {tokens}",
    ]
    for name, value in result.breakdown.items():
        term = result.terms.get(name)
        lines.append(f"  {name.replace('_', ' '):<14}{value:>9.2f} GiB" + (f"  {term}" if term else ""))
    lines.append(f"  {'peak':<14}{result.peak_gib:>9.2f} GiB per GPU (at the {result.peak_moment})")
    if result.cpu_gib:
        lines.append(f"  {'CPU RAM':<14}{result.cpu_gib:>9.2f} GiB (offloaded or paged)")
    if gpu is not None:
        room = result.headroom_gib(gpu)
        verdict = f"fits, {room:.1f} GiB to spare" if room >= 0 else f"does not fit, {-room:.1f} GiB short"
        lines.append(f"  on {gpu.name} ({gpu.memory_gib:.1f} GiB): {verdict}")
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)
