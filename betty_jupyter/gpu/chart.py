"""An estimate's stacked bar as inline SVG, drawn by Betty itself: nothing to import, nothing loaded.

The notebook shows every estimate with this chart (``%betty gpu``, the calculator, the
static record a saved notebook keeps), so showing one costs no plotting library. Each
part of the bar is a ``<rect>`` whose ``data-part`` names the part and whose tooltip gives
its GiB; each GPU's capacity is a dashed line. A traced estimate (:mod:`.trace`) draws the same
bar from its own breakdown, and :func:`timeline_svg` its live memory over the step. Every
piece of text passes through :func:`~betty_jupyter.safe_text.html_text`. Richer pictures (several estimates, a memory
curve) come from :mod:`.plots`, with matplotlib, when a person asks for them.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from ..safe_text import html_text
from .estimate import GIB, ITEMS, Estimate
from .hardware import GpuType
from .trace.result import TRACE_ITEMS, TracedEstimate, TracePoint

COLORS = {
    "weights": "#4C72B0", "gradients": "#DD8452", "optimizer": "#55A868", "activations": "#C44E52",
    "kv_cache": "#8172B3", "quantization": "#937860", "runtime": "#8C8C8C", "logits": "#DA8BC3",
    "allocator": "#CCB974",
}
"""One colour per part of an estimate (formula or traced), the same in every picture."""

LABELS = {"kv_cache": "KV cache", "runtime": "runtime/CUDA", "allocator": "allocator slack"}
"""How a part is named in a legend, where its key is not already the word."""

WIDTH = 460
HEIGHT = 300
LEFT = 56
TOP = 34
BAR_WIDTH = 90
PLOT_WIDTH = 210
PLOT_HEIGHT = 230
"""The chart's size and its plot's place in it, in pixels."""


def part_label(part: str) -> str:
    """A part of an estimate as a legend names it."""
    return LABELS.get(part, part)


def breakdown_parts(result: Estimate | TracedEstimate) -> list[tuple[str, float]]:
    """The non-zero parts of an estimate's peak in GiB, bottom of the bar first (a traced one: its breakdown)."""
    if isinstance(result, TracedEstimate):
        return [(part, gib) for part, gib in result.breakdown_gib().items() if gib > 0]
    return [(part, result.breakdown[part]) for part in ITEMS if result.breakdown.get(part)]


def breakdown_svg(result: Estimate | TracedEstimate, gpus: Sequence[GpuType] = ()) -> str:
    """``result``'s breakdown as one stacked bar in GiB per GPU, with a dashed line at each GPU's capacity."""
    parts = breakdown_parts(result)
    top = max([sum(value for _, value in parts), *(gpu.memory_gib for gpu in gpus), 1.0]) * 1.08
    step = tick_step(top)

    def y(gib: float) -> float:
        return TOP + PLOT_HEIGHT * (1 - gib / top)

    bottom_y, x = TOP + PLOT_HEIGHT, LEFT + (PLOT_WIDTH - BAR_WIDTH) / 2
    shapes = [f'<text x="{WIDTH / 2:.0f}" y="20" text-anchor="middle" font-size="14">Peak GPU memory</text>',
              f'<text transform="translate(16 {TOP + PLOT_HEIGHT / 2:.0f}) rotate(-90)" text-anchor="middle" '
              'font-size="12">GiB per GPU</text>',
              f'<rect x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="none" stroke="currentColor"/>']
    for index in range(math.floor(top / step) + 1):
        tick = index * step
        shapes.append(f'<text x="{LEFT - 5}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="11">{tick:g}</text>')
    base = 0.0
    for part, gib in parts:
        shapes.append(f'<rect data-part="{html_text(part)}" x="{x:.1f}" y="{y(base + gib):.2f}" width="{BAR_WIDTH}" '
                      f'height="{y(base) - y(base + gib):.2f}" fill="{COLORS[part]}">'
                      f'<title>{html_text(part_label(part))} {gib:.2f} GiB</title></rect>')
        base += gib
    for gpu in gpus:
        line = y(gpu.memory_gib)
        shapes.append(f'<line data-gib="{gpu.memory_gib}" x1="{LEFT}" x2="{LEFT + PLOT_WIDTH}" y1="{line:.2f}" '
                      f'y2="{line:.2f}" stroke="currentColor" stroke-dasharray="5 3"/>'
                      f'<text x="{LEFT + 4}" y="{line - 4:.2f}" font-size="10">'
                      f'{html_text(gpu.name)} ({gpu.memory_gib:.0f} GiB)</text>')
    request = result.request
    shapes.append(f'<text x="{LEFT + PLOT_WIDTH / 2:.0f}" y="{bottom_y + 16}" text-anchor="middle" font-size="11">'
                  f'{html_text(result.model)}<tspan x="{LEFT + PLOT_WIDTH / 2:.0f}" dy="14">'
                  f'{html_text(request.method)} {html_text(request.resolved_precision)}</tspan></text>')
    for row, (part, gib) in enumerate(reversed(parts)):
        legend_y = TOP + 6 + 18 * row
        shapes.append(f'<rect x="{LEFT + PLOT_WIDTH + 12}" y="{legend_y}" width="12" height="12" '
                      f'fill="{COLORS[part]}"/>'
                      f'<text x="{LEFT + PLOT_WIDTH + 30}" y="{legend_y + 10}" font-size="11">'
                      f'{html_text(part_label(part))} {gib:.1f}</text>')
    traced = " (traced)" if isinstance(result, TracedEstimate) else ""
    title = f"GPU memory of {result.model}: {result.peak_gib:.1f} GiB per GPU at peak{traced}"
    return svg_chart(WIDTH, HEIGHT, title, shapes)


def svg_chart(width: int, height: int, title: str, shapes_html: list[str]) -> str:
    """One SVG element holding ``shapes_html`` (markup already escaped), titled ``title`` (escaped here).

    Its text, frame and marks are drawn in ``currentColor`` on no background: inline in a notebook they take the
    theme's text colour (light or dark); the side panel sets the colour when it shows the chart as an image.
    """
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="betty-chart" width="{int(width)}" '
            f'height="{int(height)}" viewBox="0 0 {int(width)} {int(height)}" role="img" font-family="sans-serif" '
            f'fill="currentColor" style="max-width:100%;height:auto;color:var(--jp-content-font-color1, #000)"><title>{html_text(title)}</title>{"".join(shapes_html)}</svg>')


TIMELINE_WIDTH = 440
TIMELINE_HEIGHT = 300
TIMELINE_PLOT_WIDTH = 290
TIMELINE_PLOT_HEIGHT = 200
"""The timeline's size and its plot's size, in pixels (the plot starts at ``LEFT``, ``TOP``)."""


SETUP = "setup"
"""The trace's phase before the step (the model being built): not drawn (``trace.step.SETUP``, which imports torch)."""


def step_timeline(traced: TracedEstimate) -> list[TracePoint]:
    """The moments of the step itself: not the model being built before it, nor torn down after its last phase."""
    points = [point for point in traced.timeline if point.phase != SETUP]
    last = traced.phases.get(points[-1].phase) if points else None
    if last is not None:
        end = sum(last.get(part, 0) for part in TRACE_ITEMS)
        while len(points) > 1 and sum(points[-1].live.get(part, 0) for part in TRACE_ITEMS) < end:
            points.pop()
    return points


def timeline_svg(traced: TracedEstimate) -> str:
    """Live GPU memory over the traced step as stacked areas by part, each phase's start and the peak marked."""
    points = step_timeline(traced)
    if not points:
        return svg_chart(TIMELINE_WIDTH, TIMELINE_HEIGHT, f"no timeline was kept for {traced.model}", [])
    totals = [sum(point.live.get(part, 0) for part in TRACE_ITEMS) / GIB for point in points]
    top = max([*totals, 0.001]) * 1.12
    step, first, last = tick_step(top), points[0].index, max(points[-1].index, points[0].index + 1)

    def x(index: int) -> float:
        return LEFT + TIMELINE_PLOT_WIDTH * (index - first) / (last - first)

    def y(gib: float) -> float:
        return TOP + TIMELINE_PLOT_HEIGHT * (1 - gib / top)

    shapes = [f'<text x="{LEFT + TIMELINE_PLOT_WIDTH / 2:.0f}" y="16" text-anchor="middle" font-size="14">'
              'Live GPU memory over the step (traced)</text>',
              f'<text transform="translate(16 {TOP + TIMELINE_PLOT_HEIGHT / 2:.0f}) rotate(-90)" text-anchor="middle" '
              'font-size="12">GiB live</text>',
              f'<text x="{LEFT + TIMELINE_PLOT_WIDTH / 2:.0f}" y="{TOP + TIMELINE_PLOT_HEIGHT + 16}" '
              'text-anchor="middle" font-size="11">allocations and frees, in the order the step makes them</text>']
    for index in range(math.floor(top / step) + 1):
        tick = index * step
        shapes.append(f'<text x="{LEFT - 5}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="11">{tick:g}</text>')
    base = [0.0] * len(points)
    drawn = []
    for part in TRACE_ITEMS:
        values = [point.live.get(part, 0) / GIB for point in points]
        if not any(values):
            continue
        upper = [b + v for b, v in zip(base, values, strict=True)]
        outline = ([f"{x(p.index):.1f},{y(u):.2f}" for p, u in zip(points, upper, strict=True)]
                   + [f"{x(p.index):.1f},{y(b):.2f}" for p, b in reversed(list(zip(points, base, strict=True)))])
        shapes.append(f'<polygon data-part="{html_text(part)}" points="{" ".join(outline)}" fill="{COLORS[part]}">'
                      f'<title>{html_text(part_label(part))}</title></polygon>')
        drawn.append(part)
        base = upper
    shapes.append(f'<rect x="{LEFT}" y="{TOP}" width="{TIMELINE_PLOT_WIDTH}" height="{TIMELINE_PLOT_HEIGHT}" '
                  'fill="none" stroke="currentColor"/>')
    shapes += _phase_marks(points, x)
    shapes += _peak_mark(traced, points, totals, x, y)
    for row, part in enumerate(reversed(drawn)):
        legend_y = TOP + 6 + 18 * row
        shapes.append(f'<rect x="{LEFT + TIMELINE_PLOT_WIDTH + 12}" y="{legend_y}" width="12" height="12" '
                      f'fill="{COLORS[part]}"/><text x="{LEFT + TIMELINE_PLOT_WIDTH + 30}" y="{legend_y + 10}" '
                      f'font-size="11">{html_text(part_label(part))}</text>')
    request = traced.request
    shapes.append(f'<text x="{LEFT + TIMELINE_PLOT_WIDTH / 2:.0f}" y="{TOP + TIMELINE_PLOT_HEIGHT + 34}" '
                  f'text-anchor="middle" font-size="11">{html_text(traced.model)}, {html_text(request.method)} '
                  f'{html_text(request.resolved_precision)}, batch {request.batch_size} × {request.seq_len} tokens</text>')
    title = f"Live GPU memory of {traced.model} over one step: the peak in {traced.where}"
    return svg_chart(TIMELINE_WIDTH, TIMELINE_HEIGHT, title, shapes)


def _phase_marks(points: Sequence[TracePoint], x: Callable[[int], float]) -> list[str]:
    """Each phase named above the plot where it starts, with a dotted line where it takes over from the one before."""
    marks = [f'<text x="{LEFT + 3}" y="{TOP - 4}" font-size="10">{html_text(points[0].phase.replace("_", " "))}</text>']
    for before, point in zip(points, points[1:]):
        if point.phase == before.phase:
            continue
        where = x(point.index)
        anchor, shift = ("end", -3.0) if where > LEFT + TIMELINE_PLOT_WIDTH * 0.8 else ("start", 3.0)
        marks.append(f'<line data-phase="{html_text(point.phase)}" x1="{where:.1f}" x2="{where:.1f}" y1="{TOP}" '
                     f'y2="{TOP + TIMELINE_PLOT_HEIGHT}" stroke="currentColor" stroke-opacity="0.7" stroke-dasharray="2 2"/>'
                     f'<text x="{where + shift:.1f}" y="{TOP - 4}" text-anchor="{anchor}" font-size="10">'
                     f'{html_text(point.phase.replace("_", " "))}</text>')
    return marks


def _peak_mark(traced: TracedEstimate, points: Sequence[TracePoint], totals: list[float],
               x: Callable[[int], float], y: Callable[[float], float]) -> list[str]:
    """A dot at the highest moment, with its GiB of live tensors."""
    at = max(range(len(points)), key=totals.__getitem__)
    gib = totals[at]
    anchor = "end" if x(points[at].index) > LEFT + TIMELINE_PLOT_WIDTH * 0.6 else "start"
    shift = -7 if anchor == "end" else 7
    return [f'<circle data-peak="{gib:.3f}" cx="{x(points[at].index):.1f}" cy="{y(gib):.2f}" r="4" fill="currentColor">'
            f'<title>peak: {html_text(traced.where)}</title></circle>'
            f'<text x="{x(points[at].index) + shift:.1f}" y="{y(gib) + 4:.2f}" text-anchor="{anchor}" font-size="11">'
            f'peak {gib:.2f} GiB live</text>']


def tick_step(top: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving at most six ticks up to ``top``."""
    power = 10.0 ** math.floor(math.log10(top / 6))
    return next(power * factor for factor in (1, 2, 5, 10) if top / (power * factor) <= 6)
