"""The picture of ``betty efficiency --plot`` and ``%betty efficiency``: CPU, memory and time used, as a share of
what each job asked for.

Built with :class:`matplotlib.figure.Figure` directly (never ``pyplot``: nothing global, no window); matplotlib
is imported when this module is, and only the faces that draw import it. Jobs are labelled by their id alone: a
job name is anyone's text, and matplotlib reads ``$…$`` in a label as mathematics.
"""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from ..cluster.job_efficiency import JobEfficiency

MOST_JOBS = 40
"""The picture shows the most recent jobs up to this many (the table shows all)."""
_FIGURES = (("cpu_efficiency", "CPU", "#1565c0"), ("memory_efficiency", "memory (peak)", "#2e7d32"),
            ("time_efficiency", "time", "#ef6c00"))


def efficiency_figure(jobs: Sequence[JobEfficiency]) -> Figure:
    """One row of bars per job: CPU efficiency, peak memory and elapsed time, each as % of the request."""
    shown = list(jobs)[-MOST_JOBS:]
    figure = Figure(figsize=(7.5, 1.2 + 0.32 * max(len(shown), 1)), layout="constrained")
    axes = figure.subplots()
    labels = [f"job {job.job_id}" for job in shown]
    height = 0.8 / len(_FIGURES)
    for index, (attribute, label, color) in enumerate(_FIGURES):
        values = [_percent(getattr(job, attribute)) for job in shown]
        positions = [row + (index - 1) * height for row in range(len(shown))]
        axes.barh(positions, values, height=height, color=color, label=label, gid=attribute)
    axes.set_yticks(range(len(shown)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.axvline(100, color="#808080", linewidth=1, linestyle="--")
    axes.set_xlabel("% of what the job asked for")
    axes.set_title("Used vs requested" if shown else "No finished jobs in this window")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def _percent(ratio: float | None) -> float:
    return 0.0 if ratio is None else ratio * 100
