"""Build the model, trace its step, replay the allocator: one :class:`~.result.TracedEstimate`."""

from __future__ import annotations

from typing import Callable

import torch

from ..architecture import Architecture
from ..request import EstimateRequest
from .allocator import CachingAllocator
from .memory import ASSUMED_TRUE, MemoryTracer, Moment
from .model import build_model, check_traceable
from .experts import EVEN_ROUTING_NOTE
from .quantized import quantization_notes
from .result import TracedEstimate, TracePoint, runtime_bytes
from .step import SETUP, trace_step

TIMELINE_POINTS = 400  # the timeline kept in the result: enough for a plot, small enough to store


def run_trace(arch: Architecture, request: EstimateRequest, hopper: bool = False,
              progress: Callable[[str], None] = lambda _: None, device: str = "meta") -> TracedEstimate:
    """Trace ``request``'s step of ``arch`` on ``device`` (``meta``; ``cpu`` runs it for real, for checks)."""
    check_traceable(arch, request)
    where = torch.device(device)
    progress(f"building {arch.name} on {device}")
    model = build_model(arch, request, where)
    tracer = MemoryTracer(device=where)
    phases = trace_step(model, request, tracer, progress)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad) if request.training else 0
    params = sum(p.numel() for p in model.parameters()) - (trainable if request.adapters else 0)  # the base model
    del model
    return _result(arch, request, tracer, phases, params, trainable, hopper)


def _result(arch: Architecture, request: EstimateRequest, tracer: MemoryTracer, phases: dict[str, dict[str, int]],
            params: int, trainable: int, hopper: bool) -> TracedEstimate:
    timeline = tracer.timeline()
    peak = max((moment for moment in timeline if moment.phase != SETUP), key=lambda moment: moment.total)
    made_peak = tracer.allocations[tracer.events()[peak.index][0]]
    allocator = CachingAllocator().replay(tracer.events())
    notes = [ASSUMED_TRUE]
    if request.attention == "flash":
        notes.append("attention counted as flash attention does it: no seq × seq scores are stored")
    notes += quantization_notes(request.resolved_precision)
    if arch.is_moe:
        notes.append(EVEN_ROUTING_NOTE)
    return TracedEstimate(
        model=arch.name, request=request, params=params, trainable_params=trainable, peak=dict(peak.live),
        peak_phase=peak.phase, peak_op=made_peak.op, peak_module=made_peak.module,
        allocated_bytes=allocator.peak_allocated, reserved_bytes=allocator.peak_reserved,
        runtime_bytes=runtime_bytes(hopper), phases=phases,
        timeline=tuple(TracePoint(m.index, m.phase, m.live) for m in _thinned(timeline, peak.index)),
        notes=tuple(notes),
    )


def _thinned(timeline: list[Moment], peak: int) -> list[Moment]:
    step = max(1, len(timeline) // TIMELINE_POINTS)
    kept = {index for index in range(0, len(timeline), step)} | {peak, len(timeline) - 1}
    return [timeline[index] for index in sorted(kept)]
