"""Pictures of an estimate: a stacked bar against the card, memory against length or batch, a traced step's timeline.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through
``pyplot``: nothing global is touched, no window opens, and a caller renders them with
``figure.savefig(...)`` (Agg) or lets Jupyter display them. matplotlib is imported here
only, and only when a picture is asked for; the notebook's views of one estimate draw
their bar without it (:mod:`.chart`).
"""

from __future__ import annotations

from typing import Literal, Sequence

from matplotlib.figure import Figure

from .architecture import Architecture
from .chart import COLORS, part_label, step_timeline
from .estimate import GIB, ITEMS, Estimate, estimate
from .hardware import GpuType
from .request import EstimateRequest
from .trace.result import TRACE_ITEMS, TracedEstimate


def breakdown_chart(estimates: Estimate | Sequence[Estimate], gpus: Sequence[GpuType] = (),
                    labels: Sequence[str] | None = None) -> Figure:
    """A stacked bar per estimate (weights, gradients, …) with a line at each GPU's capacity."""
    items = [estimates] if isinstance(estimates, Estimate) else list(estimates)
    names = list(labels) if labels else [_bar_label(item) for item in items]
    figure = Figure(figsize=(max(4.0, 1.6 * len(items) + 2.5), 4.5), layout="constrained")
    axes = figure.subplots()
    bottoms = [0.0] * len(items)
    for part in ITEMS:
        heights = [item.breakdown[part] for item in items]
        if not any(heights):
            continue
        axes.bar(names, heights, bottom=bottoms, color=COLORS[part], label=part_label(part), gid=part)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for gpu in gpus:
        axes.axhline(gpu.memory_gib, linestyle="--", color="black", linewidth=1)
        axes.annotate(f"{gpu.name} ({gpu.memory_gib:.0f} GiB)", (0, gpu.memory_gib), xycoords=("axes fraction", "data"),
                      xytext=(4, 3), textcoords="offset points", fontsize=8)
    axes.set_ylabel("GiB per GPU")
    axes.set_title("Peak GPU memory")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def _bar_label(item: Estimate) -> str:
    request = item.request
    return f"{item.model}\n{request.method} {request.resolved_precision}"


def memory_curve(model: Architecture | str, request: EstimateRequest, values: Sequence[int],
                 vary: Literal["seq_len", "batch_size"] = "seq_len", gpus: Sequence[GpuType] = ()) -> Figure:
    """Peak memory as ``vary`` (sequence length or batch) grows, with each GPU's limit marked."""
    peaks = [estimate(model, request.changed(**{vary: value})).peak_gib for value in values]
    figure = Figure(figsize=(6.0, 4.0), layout="constrained")
    axes = figure.subplots()
    axes.plot(list(values), peaks, marker="o", color=COLORS["activations"], label="estimated peak", gid="peak")
    for gpu in gpus:
        limit = gpu.memory_gib * request.profile.memory_utilization
        axes.axhline(limit, linestyle="--", linewidth=1, color="black")
        axes.annotate(gpu.name, (1, limit), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                      textcoords="offset points", ha="right", fontsize=8)
    if vary == "seq_len" and len(values) > 1 and values[-1] / max(values[0], 1) >= 8:
        axes.set_xscale("log", base=2)
    axes.set_xlabel("sequence length (tokens)" if vary == "seq_len" else "micro-batch size")
    axes.set_ylabel("GiB per GPU")
    axes.set_title(f"{estimate(model, request).model}: {request.method}, {request.resolved_precision}")
    axes.legend(fontsize=8)
    return figure


def trace_timeline(traced: TracedEstimate) -> Figure:
    """Live memory over a traced step, stacked by part, with each phase's start and the peak marked."""
    points = step_timeline(traced)
    moments = [point.index for point in points]
    figure = Figure(figsize=(7.0, 4.0), layout="constrained")
    axes = figure.subplots()
    parts = [part for part in TRACE_ITEMS if any(point.live.get(part, 0) for point in points)]
    axes.stackplot(moments, *[[point.live.get(part, 0) / GIB for point in points] for part in parts],
                   colors=[COLORS[part] for part in parts], labels=[part_label(part) for part in parts])
    late = moments[0] + 0.8 * (moments[-1] - moments[0]) if points else 0
    for before, point in zip(points, points[1:]):
        if point.phase != before.phase:
            axes.axvline(point.index, linestyle=":", color="#555", linewidth=1, gid=f"phase-{point.phase}")
            axes.annotate(point.phase.replace("_", " "), (point.index, 1), xycoords=("data", "axes fraction"),
                          xytext=(-3 if point.index > late else 3, -10), textcoords="offset points", fontsize=8,
                          ha="right" if point.index > late else "left")
    if points:
        totals = [sum(point.live.values()) / GIB for point in points]
        at = max(range(len(points)), key=totals.__getitem__)
        axes.plot([moments[at]], [totals[at]], "o", color="black", gid="peak")
        axes.annotate(f"peak {totals[at]:.2f} GiB live", (moments[at], totals[at]), xytext=(7, -3),
                      textcoords="offset points", fontsize=8)
        axes.set_xlim(moments[0], moments[-1])
        axes.set_ylim(0, max(totals) * 1.2)
    axes.set_xlabel("allocations and frees, in the order the step makes them")
    axes.set_ylabel("GiB live")
    request = traced.request
    axes.set_title(f"{traced.model}: {request.method}, batch {request.batch_size} × {request.seq_len} (traced)")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure
