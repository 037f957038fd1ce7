"""The numbers one task of a sweep printed: ``name=value`` words in its output, read strictly.

A task's log is other people's text. A word counts as a metric only when it is exactly
``NAME=NUMBER`` (a ``,`` or ``;`` after it allowed): the name an identifier (letters, digits
and ``_``, not starting with a digit, at most 64 characters), the number a finite decimal
(``0.42``, ``-1e-3``). Anything else on the line is ignored: ``<b>loss</b>=1``,
``loss=0.4<img>``, ``loss = 0.4``, ``loss=nan``.

The steps: on a line that also holds ``step=N`` (a whole number), every metric of the line is
at step N; otherwise the nth value a metric shows is its step n (1, 2, 3 …). ``step`` itself is
not a metric, nor is a name of the sweep's grid (it is the task's point), and Betty's own line
that opens each task's log (``betty sweep: task 4: lr=3e-4 seed=1``) is skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Collection

MAX_METRICS = 20
"""The most metrics kept per task (the first ones seen): a log printing thousands of names stays readable."""
MAX_POINTS = 10_000
"""The most values kept per metric (the last one is always kept)."""
STEP = "step"

_METRIC = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,63})=([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)[,;]?")
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
    for line in text.splitlines():
        if line.startswith(_BETTY_LINE):
            continue
        found = line_metrics(line)
        step = found.pop(STEP, None)
        explicit = step is not None and step.is_integer()
        for name, value in found.items():
            if name in parameters or (name not in series and len(series) >= MAX_METRICS):
                continue
            seen[name] = seen.get(name, 0) + 1
            points = series.setdefault(name, [])
            points.append((step if explicit and step is not None else float(seen[name]), value))
            if len(points) > MAX_POINTS:
                del points[0]
    return TaskMetrics(series)


def line_metrics(line: str) -> dict[str, float]:
    """The ``NAME=NUMBER`` words of one line (the last of a name that appears twice)."""
    found = {}
    for word in line.split():
        match = _METRIC.fullmatch(word)
        if match is not None and math.isfinite(value := float(match.group(2))):
            found[match.group(1)] = value
    return found
