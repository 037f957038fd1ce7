"""Build the model, trace its step, shard it over the GPUs, replay the allocator: one :class:`~.result.TracedEstimate`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..architecture import Architecture
from ..request import EstimateRequest
from .allocator import CachingAllocator
from .experts import EVEN_ROUTING_NOTE
from .memory import ASSUMED_TRUE, TAGS, MemoryTracer, Moment, timeline_of
from .model import Precision, build_model, largest_unit_bytes
from .refusals import check_traceable
from .quantized import quantization_notes, weight_count
from .result import TracedEstimate, TracePoint, runtime_bytes
from .sharding import SHARDED_NOTE, Piece, Sharding, sharded_events
from .step import SETUP, trace_step

TIMELINE_POINTS = 400  # the timeline kept in the result: enough for a plot, small enough to store
BUFFER_OPS = {"weights": "all-gather", "gradients": "reduce-scatter"}  # what makes a buffer sharding adds


@dataclass(frozen=True)
class _Counts:
    params: int
    trainable: int
    gradient_bytes: int
    unit_bytes: tuple[int, int]


def run_trace(arch: Architecture, request: EstimateRequest, hopper: bool = False,
              progress: Callable[[str], None] = lambda _: None, device: str = "meta") -> TracedEstimate:
    """Trace ``request``'s step of ``arch`` on ``device`` (``meta``; ``cpu`` runs it for real, for checks).

    With several GPUs, one GPU's step is traced and :mod:`.sharding` divides it per rank.
    """
    check_traceable(arch, request)
    one_gpu = request.changed(gpus=1, sharding="none") if request.gpus > 1 else request
    where = torch.device(device)
    progress(f"building {arch.name} on {device}")
    model = build_model(arch, one_gpu, where)
    tracer = MemoryTracer(device=where)
    phases = trace_step(model, one_gpu, tracer, progress)
    counts = _counts(model, request)
    del model
    return _result(arch, request, tracer, phases, counts, hopper)


def _counts(model: torch.nn.Module, request: EstimateRequest) -> _Counts:
    trained = [p for p in model.parameters() if p.requires_grad] if request.training else []
    trainable = sum(p.numel() for p in trained)
    params = weight_count(model) - (trainable if request.adapters else 0)  # the base model
    compute = Precision.of(request).autocast or Precision.of(request).weights
    return _Counts(params, trainable, sum(p.numel() * p.element_size() for p in trained),
                   largest_unit_bytes(model, compute))


def _result(arch: Architecture, request: EstimateRequest, tracer: MemoryTracer, phases: dict[str, dict[str, int]],
            counts: _Counts, hopper: bool) -> TracedEstimate:
    events = tracer.phased_events()
    tag_of: Callable[[int], str] = _traced_tag(tracer)
    notes = [ASSUMED_TRUE]
    if request.gpus > 1:
        sharding = Sharding.of(request, counts.unit_bytes, counts.gradient_bytes)
        pieces = [Piece(a.nbytes, a.tag, a.phase, a.weight_copy) for a in tracer.allocations]
        events, tag_of = sharded_events(events, pieces, sharding)
        notes.append(SHARDED_NOTE.format(rule=sharding.rule()))
    timeline = timeline_of(events, tag_of)
    if request.gpus > 1:
        phases = _phase_ends(timeline)
    peak = max((moment for moment in timeline if moment.phase != SETUP), key=lambda moment: moment.total)
    op, module = _made(tracer, events[peak.index][0], tag_of)
    allocator = CachingAllocator().replay((handle, nbytes) for handle, nbytes, _ in events)
    if request.attention == "flash":
        notes.append("attention counted as flash attention does it: no seq × seq scores are stored")
    notes += quantization_notes(request.resolved_precision)
    if arch.is_moe:
        notes.append(EVEN_ROUTING_NOTE)
    return TracedEstimate(
        model=arch.name, request=request, params=counts.params, trainable_params=counts.trainable,
        peak=dict(peak.live), peak_phase=peak.phase, peak_op=op, peak_module=module,
        allocated_bytes=allocator.peak_allocated, reserved_bytes=allocator.peak_reserved,
        runtime_bytes=runtime_bytes(hopper), phases=phases,
        timeline=tuple(TracePoint(m.index, m.phase, m.live) for m in _thinned(timeline, peak.index)),
        notes=tuple(notes),
    )


def _traced_tag(tracer: MemoryTracer) -> Callable[[int], str]:
    return lambda handle: tracer.allocations[handle].tag


def _made(tracer: MemoryTracer, handle: int, tag_of: Callable[[int], str]) -> tuple[str, str]:
    """The operation and module that made allocation ``handle`` (a buffer sharding adds is named by its collective)."""
    if handle < len(tracer.allocations):
        return tracer.allocations[handle].op, tracer.allocations[handle].module
    return BUFFER_OPS[tag_of(handle)], ""


def _phase_ends(timeline: list[Moment]) -> dict[str, dict[str, int]]:
    """The live bytes by tag at the last moment of each phase."""
    ends: dict[str, dict[str, int]] = {}
    for moment in timeline:
        ends[moment.phase] = dict(moment.live)
    return {phase: {tag: live.get(tag, 0) for tag in TAGS} for phase, live in ends.items()}


def _thinned(timeline: list[Moment], peak: int) -> list[Moment]:
    step = max(1, len(timeline) // TIMELINE_POINTS)
    kept = {index for index in range(0, len(timeline), step)} | {peak, len(timeline) - 1}
    return [timeline[index] for index in sorted(kept)]
