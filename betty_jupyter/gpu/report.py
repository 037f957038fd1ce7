"""An estimate as text a person reads at a glance (the CLI, the notebook)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .estimate import GIB, Estimate
from .hardware import GpuType

if TYPE_CHECKING:
    from .trace.result import TracedEstimate


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


def render_traced(traced: TracedEstimate, formula: Estimate, gpu: GpuType | None = None) -> str:
    """The traced peak's breakdown beside the formula estimate's, where the peak happens, reserved vs allocated."""
    request = traced.request
    lines = [
        f"{traced.model} ({traced.params / 1e9:.2f}B params): {request.method}, {request.resolved_precision}, "
        f"batch {request.batch_size} × {request.seq_len} tokens, traced on meta tensors",
        f"  {'':<14}{'traced':>9}     {'formula':>9}",
    ]
    traced_parts = traced.breakdown_gib()
    formula_parts = dict(formula.breakdown)
    for name, value in traced_parts.items():
        beside = formula_parts.pop(name, None)
        shown = f"{beside:>9.2f} GiB" if beside is not None else f"{'—':>9}    "
        lines.append(f"  {name.replace('_', ' '):<14}{value:>9.2f} GiB {shown}  {_TRACED_TERMS.get(name, '')}".rstrip())
    for name, value in formula_parts.items():
        if value:
            lines.append(f"  {name.replace('_', ' '):<14}{'—':>9}     {value:>9.2f} GiB")
    lines.append(f"  {'peak':<14}{traced.peak_gib:>9.2f} GiB {formula.peak_gib:>9.2f} GiB per GPU")
    lines.append(f"  the peak: {traced.where}")
    lines.append(f"  allocated {traced.allocated_bytes / GIB:.2f} GiB, reserved {traced.reserved_bytes / GIB:.2f} GiB "
                 "(torch.cuda.max_memory_allocated / max_memory_reserved)")
    if gpu is not None:
        room = gpu.memory_gib - traced.peak_gib
        verdict = f"fits, {room:.1f} GiB to spare" if room >= 0 else f"does not fit, {-room:.1f} GiB short"
        lines.append(f"  on {gpu.name} ({gpu.memory_gib:.1f} GiB): {verdict}")
    lines += [f"  note: {note}" for note in traced.notes]
    return "\n".join(lines)


_TRACED_TERMS = {
    "logits": "logits and loss (the formula counts them in activations)",
    "allocator": "caching allocator: rounding and segments beyond live tensors (formula: in runtime)",
    "runtime": "CUDA context and cuBLAS workspace, which no tensor owns",
}
