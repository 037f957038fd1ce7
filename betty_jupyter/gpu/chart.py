"""An estimate's stacked bar as inline SVG, drawn by Betty itself: nothing to import, nothing loaded.

The notebook shows every estimate with this chart (``%betty gpu``, the calculator, the
static record a saved notebook keeps), so showing one costs no plotting library. Each
part of the bar is a ``<rect>`` whose ``data-part`` names the part and whose tooltip gives
its GiB; each GPU's capacity is a dashed line. Every piece of text passes through
:func:`~betty_jupyter.safe_text.html_text`. Richer pictures (several estimates, a memory
curve) come from :mod:`.plots`, with matplotlib, when a person asks for them.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..safe_text import html_text
from .estimate import ITEMS, Estimate
from .hardware import GpuType

COLORS = {
    "weights": "#4C72B0", "gradients": "#DD8452", "optimizer": "#55A868", "activations": "#C44E52",
    "kv_cache": "#8172B3", "quantization": "#937860", "runtime": "#8C8C8C",
}
"""One colour per part of an estimate, the same in every picture."""

LABELS = {"kv_cache": "KV cache", "runtime": "runtime/CUDA"}
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


def breakdown_svg(result: Estimate, gpus: Sequence[GpuType] = ()) -> str:
    """``result``'s breakdown as one stacked bar in GiB per GPU, with a dashed line at each GPU's capacity."""
    parts = [(part, result.breakdown[part]) for part in ITEMS if result.breakdown.get(part)]
    top = max([sum(value for _, value in parts), *(gpu.memory_gib for gpu in gpus), 1.0]) * 1.08
    step = _tick_step(top)

    def y(gib: float) -> float:
        return TOP + PLOT_HEIGHT * (1 - gib / top)

    bottom_y, x = TOP + PLOT_HEIGHT, LEFT + (PLOT_WIDTH - BAR_WIDTH) / 2
    shapes = [f'<text x="{WIDTH / 2:.0f}" y="20" text-anchor="middle" font-size="14">Peak GPU memory</text>',
              f'<text transform="translate(16 {TOP + PLOT_HEIGHT / 2:.0f}) rotate(-90)" text-anchor="middle" '
              'font-size="12">GiB per GPU</text>',
              f'<rect x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="none" stroke="#333"/>']
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
                      f'y2="{line:.2f}" stroke="black" stroke-dasharray="5 3"/>'
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
    title = f"GPU memory of {result.model}: {result.peak_gib:.1f} GiB per GPU at peak"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="betty-chart" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" font-family="sans-serif" style="max-width:100%;height:auto">'
            f'<title>{html_text(title)}</title>{"".join(shapes)}</svg>')


def _tick_step(top: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving at most six ticks up to ``top``."""
    power = 10.0 ** math.floor(math.log10(top / 6))
    return next(power * factor for factor in (1, 2, 5, 10) if top / (power * factor) <= 6)
