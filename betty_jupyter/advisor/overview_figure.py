"""The overview as a matplotlib figure: per partition, CPUs and GPUs stacked by use, and the queue's depth.

Built with :class:`matplotlib.figure.Figure` directly, never through ``pyplot`` (nothing global touched, no window);
matplotlib is imported here only, when a notebook asks for the picture. Partition and GPU type names come from the
cluster: every label is drawn with mathtext off, so a ``$`` in a name stays a dollar sign.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..safe_text import terminal_line
from .overview import USE_STATES, OverviewData

USE_COLORS = {"allocated": "#C44E52", "idle": "#55A868", "down": "#8C8C8C"}
"""One colour per use of a CPU or GPU, the same in the notebook's figure and the panel's tab."""

QUEUE_COLORS = {"running": "#4C72B0", "pending": "#DD8452", "yours": "#8172B3"}
"""The queue's colours: jobs running, jobs pending, and the person's own share of them."""


def _label(text: str) -> str:
    """A name from the cluster as a tick label: one line, control characters written out."""
    return terminal_line(text)


def overview_figure(overview: OverviewData) -> Figure:
    """Three panels side by side: CPUs by use, GPUs by use (one bar per partition and GPU type), jobs per partition."""
    partitions = overview["partitions"]
    figure = Figure(figsize=(11.0, 3.8), layout="constrained")
    cpus_axes, gpus_axes, queue_axes = figure.subplots(1, 3)
    names = [_label(entry["partition"]) for entry in partitions]
    _stacked(cpus_axes, names, [[entry["cpus"][use] for entry in partitions] for use in USE_STATES], "CPUs")
    gpu_bars = [(f"{_label(entry['partition'])}\n{_label(kind)}", uses)
                for entry in partitions for kind, uses in entry["gpus"].items()]
    _stacked(gpus_axes, [name for name, _ in gpu_bars], [[uses[use] for _, uses in gpu_bars] for use in USE_STATES],
             "GPUs")
    if not gpu_bars:
        gpus_axes.text(0.5, 0.5, "no GPUs", ha="center", va="center", transform=gpus_axes.transAxes, parse_math=False)
    running = [entry["running"] for entry in partitions]
    pending = [entry["pending"] for entry in partitions]
    queue_axes.bar(names, running, color=QUEUE_COLORS["running"], label="running", gid="running")
    queue_axes.bar(names, pending, bottom=running, color=QUEUE_COLORS["pending"], label="pending", gid="pending")
    mine = [entry["mine"]["running"] + entry["mine"]["pending"] for entry in partitions]
    queue_axes.bar(names, mine, width=0.3, color=QUEUE_COLORS["yours"], label="yours", gid="yours")
    _finish(queue_axes, "Jobs (array tasks counted)")
    who = overview["user"]
    figure.suptitle(f"What the cluster is doing at {overview['read_at']}"
                    + (f" · yours: {_label(who)}" if who else ""), parse_math=False)
    return figure


def _stacked(axes: Axes, names: list[str], heights: list[list[int]], title: str) -> None:
    bottoms = [0] * len(names)
    for use, values in zip(USE_STATES, heights):
        axes.bar(names, values, bottom=bottoms, color=USE_COLORS[use], label=use, gid=use)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    _finish(axes, title)


def _finish(axes: Axes, title: str) -> None:
    axes.set_title(title, fontsize=11, pad=20)
    # above the bars, not on them: the figure has no background of its own in a notebook
    axes.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False, borderaxespad=0.2)
    for label in axes.get_xticklabels():
        label.set_parse_math(False)
        label.set_fontsize(8)
    axes.set_ylim(0, max(axes.get_ylim()[1], 1))  # counts: from 0, and 0 to 1 when every count is 0
    axes.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
