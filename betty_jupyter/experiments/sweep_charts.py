"""A sweep's comparison as SVG drawn by Betty itself: each metric against its step (a line per task) and each
metric's final value against each parameter (a point per task).

The side panel shows these as images (its ``ChartImage``), as it shows a GPU estimate's bar
(:mod:`betty_jupyter.gpu.chart`, whose frame and ticks these share); nothing is imported to
draw them. Every piece of text (a parameter's value is anyone's text) passes through
:func:`~betty_jupyter.safe_text.html_text`. Each task keeps one colour in every picture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from ..gpu.chart import svg_chart, tick_step
from ..safe_text import html_text
from .comparison import Comparison, TaskResult

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974",
           "#64B5CD")
"""One colour per task (task N takes the Nth, round again after ten)."""

WIDTH = 360
HEIGHT = 280
LEFT = 56
TOP = 30
PLOT_WIDTH = 286
PLOT_HEIGHT = 190
LEGEND_TOP = TOP + PLOT_HEIGHT + 46
LEGEND_ROW = 15
LEGEND_ROWS = 12
LABEL_CHARS = 48
SPREAD = 7
AXIS_LIMIT = 1e300
"""The widest value an axis reaches; a task's larger numbers are drawn at its edge."""
AXIS_FLOOR = 1e-300
"""Values closer to zero than this are zero to an axis."""
"""The chart's size (narrow, as the side panel is; the legend under the plot makes it taller), its plot's place in
it, how many tasks its legend names, how long a label may be, and how far apart (pixels) tasks that share a value of
the parameter are drawn."""


@dataclass(frozen=True)
class SweepChart:
    """One picture of a sweep: ``metric`` by step (``parameter`` None) or its final value by ``parameter``."""

    metric: str
    parameter: str | None
    svg: str


def sweep_charts(comparison: Comparison) -> list[SweepChart]:
    """For each metric any task printed: its curves by step, then its final value against each parameter."""
    charts = []
    for metric in comparison.metric_names:
        charts.append(SweepChart(metric, None, curves_svg(comparison, metric)))
        charts += [SweepChart(metric, name, final_svg(comparison, metric, name)) for name in comparison.grid.names]
    return charts


def task_colour(index: int) -> str:
    """Task ``index``'s colour, the same in every picture of the sweep."""
    return PALETTE[index % len(PALETTE)]


def task_name(task: TaskResult) -> str:
    """``task 4: lr=3e-4 seed=1``, cut to fit a legend."""
    return shortened(f"task {task.index}: " + " ".join(f"{name}={value}" for name, value in task.point.items()))


def shortened(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis where cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def curves_svg(comparison: Comparison, metric: str) -> str:
    """``metric`` against its step: a line (and its points) per task that printed it."""
    drawn = [(task, points) for task in comparison.tasks if (points := task.metrics.series.get(metric))]
    title = f"{comparison.slug}: {metric} by step"
    if not drawn:
        return _empty(title, f"no task has printed {metric} with its steps yet")
    steps = [step for _, points in drawn for step, _ in points]
    values = [value for _, points in drawn for _, value in points]
    x, x_ticks = _scale(min(steps), max(steps), LEFT, LEFT + PLOT_WIDTH)
    y, y_ticks = _scale(min(values), max(values), TOP + PLOT_HEIGHT, TOP)
    shapes = _frame(title, "step", metric, x_ticks, y_ticks, x, y)
    for task, points in drawn:
        colour = html_text(task_colour(task.index))
        name = html_text(task_name(task))
        line = " ".join(f"{x(step):.1f},{y(value):.2f}" for step, value in points)
        shapes.append(f'<polyline data-task="{task.index:d}" points="{html_text(line)}" fill="none" stroke="{colour}" '
                      f'stroke-width="1.5"><title>{name}</title></polyline>')
        shapes += [f'<circle cx="{x(step):.1f}" cy="{y(value):.2f}" r="2.5" fill="{colour}">'
                   f'<title>{name}, step {step:g}: {html_text(metric)}={value:g}</title></circle>'
                   for step, value in points]
    return _with_legend(title, shapes, [task for task, _ in drawn])


def final_svg(comparison: Comparison, metric: str, parameter: str) -> str:
    """``metric``'s last value against ``parameter``: a point per task, at its value of the parameter."""
    values = next(values for name, values in comparison.grid.parameters if name == parameter)
    finals = [(task, final) for task in comparison.tasks if (final := task.last.get(metric)) is not None]
    title = f"{comparison.slug}: final {metric} by {parameter}"
    if not finals:
        return _empty(title, f"no task has printed {metric} yet")
    gap = PLOT_WIDTH / len(values)

    def x(value: float) -> float:
        return LEFT + gap * (value + 0.5)

    y, y_ticks = _scale(min(f for _, f in finals), max(f for _, f in finals), TOP + PLOT_HEIGHT, TOP)
    shapes = _frame(title, parameter, f"final {metric}", [], y_ticks, x, y)
    for place, value in enumerate(values):
        shapes.append(f'<text x="{x(place):.1f}" y="{TOP + PLOT_HEIGHT + 14}" text-anchor="middle" font-size="10">'
                      f'{html_text(shortened(value, 14))}</text>')
    sharing: dict[str, int] = {}
    for task, _ in finals:
        sharing[task.point[parameter]] = sharing.get(task.point[parameter], 0) + 1
    seen: dict[str, int] = {}
    for task, final in finals:
        value = task.point[parameter]
        rank = seen[value] = seen.get(value, -1) + 1
        where = x(values.index(value)) + SPREAD * (rank - (sharing[value] - 1) / 2)
        shapes.append(f'<circle data-task="{task.index:d}" cx="{where:.1f}" cy="{y(final):.2f}" r="4" '
                      f'fill="{html_text(task_colour(task.index))}"><title>{html_text(task_name(task))}: '
                      f'{html_text(metric)}={final:g}</title></circle>')
    return _with_legend(title, shapes, [task for task, _ in finals])


def _scale(low: float, high: float, start: float, end: float) -> tuple[Callable[[float], float], list[float]]:
    """A map from [low, high] (widened to round ticks) onto [start, end] pixels, and its ticks.

    A task prints what it likes (``loss=1.7e308``, ``5e-324``): the axis covers at most
    ±:data:`AXIS_LIMIT`, a value beyond it is drawn at the edge, and a span too narrow to tell
    apart from its values is drawn as one value, so no tick or pixel is ever infinite or NaN.
    """
    low, high = (min(max(value, -AXIS_LIMIT), AXIS_LIMIT) for value in (low, high))
    if high - low <= max(abs(low), abs(high), AXIS_FLOOR) * 1e-9:
        middle = low / 2 + high / 2
        half = abs(middle) * 0.1 if abs(middle) > AXIS_FLOOR else 1.0
        low, high = middle - half, middle + half
    step = tick_step(high - low)
    first, last = math.floor(low / step) * step, math.ceil(high / step) * step
    ticks = [first + step * n for n in range(round((last - first) / step) + 1)]

    def place(value: float) -> float:
        return start + (end - start) * (min(max(value, first), last) - first) / (last - first)

    return place, ticks


def _frame(title: str, x_label: str, y_label: str, x_ticks: Sequence[float], y_ticks: Sequence[float],
           x: Callable[[float], float], y: Callable[[float], float]) -> list[str]:
    """The title, the plot's box, both axes' names and ticks."""
    shapes = [f'<text x="{WIDTH / 2:.0f}" y="18" text-anchor="middle" font-size="13">'
              f'{html_text(shortened(title, 52))}</text>',
              f'<rect x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="none" stroke="currentColor"/>',
              f'<text transform="translate(14 {TOP + PLOT_HEIGHT / 2:.0f}) rotate(-90)" text-anchor="middle" '
              f'font-size="11">{html_text(shortened(y_label, 40))}</text>',
              f'<text x="{LEFT + PLOT_WIDTH / 2:.0f}" y="{TOP + PLOT_HEIGHT + 32}" text-anchor="middle" '
              f'font-size="11">{html_text(shortened(x_label, 40))}</text>']
    shapes += [f'<text x="{LEFT - 5}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick:.4g}</text>'
               for tick in y_ticks]
    shapes += [f'<text x="{x(tick):.1f}" y="{TOP + PLOT_HEIGHT + 14}" text-anchor="middle" font-size="10">'
               f'{tick:.4g}</text>' for tick in x_ticks]
    return shapes


def _with_legend(title: str, shapes: list[str], tasks: Sequence[TaskResult]) -> str:
    """The chart with each task's colour and point under the plot; past ``LEGEND_ROWS`` tasks, how many more."""
    rows = min(len(tasks), LEGEND_ROWS) + (len(tasks) > LEGEND_ROWS)
    legend = []
    for row, task in enumerate(tasks[:LEGEND_ROWS]):
        top = LEGEND_TOP + LEGEND_ROW * row
        legend.append(f'<rect x="{LEFT}" y="{top}" width="10" height="10" fill="{html_text(task_colour(task.index))}"/>'
                      f'<text x="{LEFT + 14}" y="{top + 9}" font-size="11">{html_text(task_name(task))}</text>')
    if len(tasks) > LEGEND_ROWS:
        legend.append(f'<text x="{LEFT}" y="{LEGEND_TOP + LEGEND_ROW * LEGEND_ROWS + 9}" font-size="11">'
                      f'and {len(tasks) - LEGEND_ROWS} more</text>')
    return svg_chart(WIDTH, LEGEND_TOP + LEGEND_ROW * rows + 4, title, shapes + legend)


def _empty(title: str, why: str) -> str:
    """A chart with nothing to draw yet: its title and why."""
    return svg_chart(WIDTH, HEIGHT, title, [
        f'<text x="{WIDTH / 2:.0f}" y="18" text-anchor="middle" font-size="13">{html_text(shortened(title, 52))}</text>',
        f'<text x="{WIDTH / 2:.0f}" y="{HEIGHT / 2:.0f}" text-anchor="middle" font-size="12">{html_text(why)}</text>'])
