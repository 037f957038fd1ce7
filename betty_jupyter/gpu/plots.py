"""Pictures of an estimate: a stacked bar against the card, and memory against length or batch.

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
from .chart import COLORS, part_label
from .estimate import ITEMS, Estimate, estimate
from .hardware import GpuType
from .request import EstimateRequest


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
