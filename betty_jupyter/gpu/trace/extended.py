"""A model deeper than the trace runs: traced at two small depths, its byte counts extended in a straight line.

A decoder's layers are one module repeated with the same tensors, so each layer adds the same
bytes to what a step keeps (its weights, gradients, optimizer state, saved activations, KV
cache), while the rest (embeddings, the head, the logits) does not change with depth. Tracing
the model with :data:`SHALLOW` and :data:`DEEP` layers and drawing the straight line through
the two gives every byte count at the model's own depth, in the time two small traces take,
whatever the depth. Where the peak happens is the deeper trace's; its timeline is scaled item
by item to the extended peak. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..architecture import Architecture
from .result import TracedEstimate, TracePoint

SHALLOW = 8
DEEP = 16
"""The two depths traced for a deeper model (even, so alternating local and global layers stay in step; deep
enough that the step's peak is the same moment in both)."""
MOE_DEPTHS = (4, 8)
"""The two depths traced for a mixture of many experts (:func:`depths_for`): each expert is its own loop of
operations, so a layer of 128 experts costs as much to trace as dozens of dense ones. Still past DeepSeek's three
dense first layers, and even, so experts every other layer (Llama 4 Maverick) stay in step."""
EXPERT_LAYERS = 1024
"""The most experts, summed over layers, a trace runs in full (Mixtral: 32 layers × 8); beyond, it extends."""


def depths_for(arch: Architecture, most_layers: int) -> tuple[int, int] | None:
    """The two depths to trace ``arch`` at and extend from, or ``None`` to trace it whole: a model deeper than
    ``most_layers``, or one whose experts over all layers exceed :data:`EXPERT_LAYERS`."""
    if arch.is_moe and arch.layers * arch.experts > EXPERT_LAYERS and arch.layers > MOE_DEPTHS[1]:
        return MOE_DEPTHS
    return (SHALLOW, DEEP) if arch.layers > most_layers else None


def at_depth(arch: Architecture, layers: int) -> Architecture:
    """``arch`` with ``layers`` layers, the same share of them sliding-window layers (and MoE layers)."""
    window = round(arch.sliding_window_layers * layers / arch.layers) if arch.layers else 0
    moe = None if arch.moe_layers is None else round(arch.moe_layers * layers / arch.layers)
    return replace(arch, layers=layers, sliding_window_layers=window, moe_layers=moe)


def extended(shallow: TracedEstimate, deep: TracedEstimate, arch: Architecture,
             depths: tuple[int, int] = (SHALLOW, DEEP)) -> TracedEstimate:
    """``deep``'s estimate with each byte count moved along the line through ``shallow`` and ``deep`` (traced at
    ``depths`` layers) to ``arch.layers`` layers."""
    low_depth, high_depth = depths
    share = (arch.layers - high_depth) / (high_depth - low_depth)

    def line(low: int, high: int) -> int:
        return max(0, round(high + (high - low) * share))

    def items(low: Mapping[str, int], high: Mapping[str, int]) -> dict[str, int]:
        return {name: line(low.get(name, 0), high.get(name, 0)) for name in {**low, **high}}

    if (shallow.peak_phase, shallow.peak_op) == (deep.peak_phase, deep.peak_op):
        peak = items(shallow.peak, deep.peak)
    else:  # the peak is another moment at each depth: keep the deeper one's make-up, at the extended size
        grown = line(shallow.allocated_bytes, deep.allocated_bytes) / max(1, deep.allocated_bytes)
        peak = {name: round(value * grown) for name, value in deep.peak.items()}
    scale = {name: peak[name] / deep.peak[name] for name in peak if deep.peak.get(name)}
    timeline = tuple(TracePoint(point.index, point.phase,
                                {name: round(value * scale.get(name, 1.0)) for name, value in point.live.items()})
                     for point in deep.timeline)
    note = (f"traced with {low_depth} and {high_depth} of its {arch.layers:,} identical layers and extended in a "
            "straight line (each layer adds the same bytes); the timeline is the deeper trace's, scaled")
    return replace(
        deep, model=arch.name, params=line(shallow.params, deep.params),
        trainable_params=line(shallow.trainable_params, deep.trainable_params), peak=peak,
        allocated_bytes=line(shallow.allocated_bytes, deep.allocated_bytes),
        reserved_bytes=line(shallow.reserved_bytes, deep.reserved_bytes),
        phases={phase: items(shallow.phases.get(phase, {}), live) for phase, live in deep.phases.items()},
        timeline=timeline, notes=(*deep.notes, note))
