"""Numbers a job printed (``step=10 loss=0.42``) as a table, for the experiment notebook.

Only finite numbers count: ``loss=1e999`` (infinite once read) is no value, as in a sweep's metrics.
"""

from __future__ import annotations

import math
import re

import pandas as pd

_PAIR = re.compile(r"(?<![\w.])([A-Za-z_][\w./-]*)\s*[=:]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])")


def parse_metrics(text: str) -> "pd.DataFrame":
    """One row per line that holds ``name=value`` (or ``name: value``) numbers, one column per name."""
    rows = []
    for line in text.splitlines():
        found = {name: number for name, value in _PAIR.findall(line) if math.isfinite(number := float(value))}
        if found:
            rows.append(found)
    return pd.DataFrame(rows)
