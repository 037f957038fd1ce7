"""An estimate as text a person reads at a glance (the CLI, the notebook)."""

from __future__ import annotations

from typing import Any, Mapping

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
    lines += _breakdown_lines(result.breakdown, result.peak_gib, result.peak_moment, result.terms)
    if result.cpu_gib:
        lines.append(f"  {'CPU RAM':<14}{result.cpu_gib:>9.2f} GiB (offloaded or paged)")
    if gpu is not None:
        room = result.headroom_gib(gpu)
        verdict = f"fits, {room:.1f} GiB to spare" if room >= 0 else f"does not fit, {-room:.1f} GiB short"
        lines.append(f"  on {gpu.name} ({gpu.memory_gib:.1f} GiB): {verdict}")
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)


def render_estimate_record(data: Mapping[str, Any]) -> str:
    """An estimate's JSON form (:meth:`Estimate.as_dict`, as a submission carries it) as the same breakdown.

    The form comes from elsewhere (the agent passes it on): what is not a number is left out.
    """
    about = ", ".join(str(data[key]) for key in ("model", "method", "precision", "framework") if data.get(key))
    breakdown = data.get("breakdown")
    parts = {str(k): v for k, v in breakdown.items() if _number(v)} if isinstance(breakdown, Mapping) else {}
    terms = data.get("terms")
    said = {str(k): str(v) for k, v in terms.items() if isinstance(v, str)} if isinstance(terms, Mapping) else {}
    peak = data.get("peak_gib")
    lines = [about] if about else []
    lines += _breakdown_lines(parts, peak if _number(peak) else None, str(data.get("peak_moment") or "peak"), said)
    notes = data.get("notes")
    lines += [f"  note: {note}" for note in notes if isinstance(note, str)] if isinstance(notes, list) else []
    return "\n".join(lines)


def _breakdown_lines(breakdown: Mapping[str, float], peak: float | None, moment: str,
                     terms: Mapping[str, str]) -> list[str]:
    """One line per part (with what its term holds), then the peak."""
    lines = [f"  {name.replace('_', ' '):<14}{value:>9.2f} GiB" + (f"  {terms[name]}" if terms.get(name) else "")
             for name, value in breakdown.items()]
    if peak is not None:
        lines.append(f"  {'peak':<14}{peak:>9.2f} GiB per GPU (at the {moment})")
    return lines


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
