"""Pictures of a sweep's comparison: each metric against its step, a line per task, and each metric's final value
against each parameter.

Built with :class:`matplotlib.figure.Figure` directly, never through ``pyplot`` (as
:mod:`betty_jupyter.gpu.plots`): nothing global is touched and no window opens. Labels are
drawn as plain text: a ``$`` in a parameter's value never starts math.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .comparison import Comparison


def metric_curves(comparison: Comparison, metric: str) -> Figure:
    """``metric`` against its step, a line per task that printed it."""
    figure = Figure(figsize=(7.0, 4.0), layout="constrained")
    axes = figure.subplots()
    for task in comparison.tasks:
        points = task.metrics.series.get(metric)
        if points:
            axes.plot([step for step, _ in points], [value for _, value in points], marker=".",
                      label=plain(task_label(task.index, task.point)), gid=f"task-{task.index}")
    axes.set_xlabel("step")
    axes.set_ylabel(plain(metric))
    axes.set_title(plain(f"{comparison.slug}: {metric} by step"))
    if axes.get_lines():
        axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def final_by_parameter(comparison: Comparison, metric: str) -> Figure:
    """``metric``'s last value against each parameter of the grid (a panel each; a point per task)."""
    names = comparison.grid.names
    figure = Figure(figsize=(max(4.0, 3.5 * len(names)), 3.5), layout="constrained")
    panels = figure.subplots(1, len(names), squeeze=False)[0]
    for axes, name in zip(panels, names):
        values = [value for parameter, values in comparison.grid.parameters if parameter == name for value in values]
        for task in comparison.tasks:
            final = task.last.get(metric)
            if final is not None:
                axes.plot([values.index(task.point[name])], [final], "o", color="C0", gid=f"task-{task.index}")
        axes.set_xticks(range(len(values)), [plain(value) for value in values], rotation=30, fontsize=8)
        axes.set_xlabel(plain(name))
        axes.set_ylabel(plain(f"final {metric}"))
    figure.suptitle(plain(f"{comparison.slug}: final {metric} by parameter"))
    return figure


def task_label(index: int, point: dict[str, str]) -> str:
    """``task 4: lr=3e-4 seed=1``."""
    return f"task {index}: " + " ".join(f"{name}={value}" for name, value in point.items())


def plain(text: str) -> str:
    """``text`` as matplotlib draws it literally (its ``$`` escaped, so no math), on one line."""
    return " ".join(text.splitlines()).replace("$", r"\$")
