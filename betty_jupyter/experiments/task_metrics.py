"""The numbers a job printed: ``NAME=NUMBER`` words in its output, read strictly — the one grammar.

Both readers of a job's numbers use it: a sweep's comparison (:func:`read_metrics`, each metric's
series) and the experiment notebook's table (:func:`metric_rows`, through
:func:`~betty_jupyter.experiments.metrics_table.parse_metrics`), so one log gives the same numbers in both.

A job's log is other people's text. A word counts as a metric only when it is exactly
``NAME=NUMBER`` (a ``,`` or ``;`` after it allowed): the name an identifier (letters, digits
and ``_``, not starting with a digit, at most 64 characters), the number a finite decimal
(``0.42``, ``-1e-3``). Anything else on the line is ignored: ``<b>loss</b>=1``,
``loss=0.4<img>``, ``loss = 0.4``, ``loss: 0.4``, ``loss=nan``, ``loss=1e999`` (infinite once read),
digits other than ASCII ``0``–``9``, a word wrapped in terminal colour codes.

The steps: on a line that also holds ``step=N`` (a whole number), every metric of the line is
at step N; otherwise the nth value a metric shows is its step n (1, 2, 3 …). ``step`` itself is
not a metric, nor is a name of the sweep's grid (it is the task's point), and Betty's own line
that opens each task's log (``betty sweep: task 4: lr=3e-4 seed=1``) is skipped. At most
:data:`MAX_METRICS` names are kept (the first seen).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Collection, Iterator

MAX_METRICS = 20
"""The most metrics kept per task (the first ones seen): a log printing thousands of names stays readable."""
MAX_POINTS = 10_000
"""The most values kept per metric in a sweep's series (the last one is always kept)."""
MAX_WORD = 400
"""The longest word read as a metric (a 64-character name and any finite number fit); longer words are ignored."""
STEP = "step"

_METRIC = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,63})=([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)[,;]?")
_BETTY_LINE = "betty sweep: task "


@dataclass(frozen=True)
class TaskMetrics:
    """Each metric's series, ``(step, value)`` in the order printed, by name in the order first seen."""

    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def last(self) -> dict[str, float]:
        """Each metric's last value."""
        return {name: points[-1][1] for name, points in self.series.items() if points}


def read_metrics(text: str, parameters: Collection[str] = ()) -> TaskMetrics:
    """The metrics in ``text`` (a task's stdout), ``parameters`` (the grid's names) left out."""
    series: dict[str, list[tuple[float, float]]] = {}
    seen: dict[str, int] = {}
    for found in metric_rows(text, parameters):
        step = found.pop(STEP, None)
        explicit = step is not None and step.is_integer()
        for name, value in found.items():
            seen[name] = seen.get(name, 0) + 1
            points = series.setdefault(name, [])
            points.append((step if explicit and step is not None else float(seen[name]), value))
            if len(points) > MAX_POINTS:
                del points[0]
    return TaskMetrics(series)


def metric_rows(text: str, parameters: Collection[str] = ()) -> Iterator[dict[str, float]]:
    """Each line's metrics (``step`` among them when the line has one), for every line that has any.

    ``parameters`` (a sweep's grid names) are left out, Betty's own first line of a sweep task is
    skipped, and only the first :data:`MAX_METRICS` metric names are kept.
    """
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith(_BETTY_LINE):
            continue
        found = line_metrics(line)
        step = found.pop(STEP, None)
        kept = {}
        for name, value in found.items():
            if name in parameters or (name not in names and len(names) >= MAX_METRICS):
                continue
            names.add(name)
            kept[name] = value
        if kept:
            yield kept if step is None else {STEP: step, **kept}


def line_metrics(line: str) -> dict[str, float]:
    """The ``NAME=NUMBER`` words of one line (the last of a name that appears twice)."""
    found = {}
    for word in line.split():
        match = _METRIC.fullmatch(word) if len(word) <= MAX_WORD else None
        if match is not None and math.isfinite(value := float(match.group(2))):
            found[match.group(1)] = value
    return found
