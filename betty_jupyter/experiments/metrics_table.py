"""Numbers a job printed (``step=10 loss=0.42``) as a table, for the experiment notebook.

The words are read by the one grammar of :mod:`~betty_jupyter.experiments.task_metrics`
(``NAME=NUMBER``, finite numbers only), the same a sweep's comparison reads, so a log gives the
same numbers in both.
"""

from __future__ import annotations

import pandas as pd

from .task_metrics import metric_rows


def parse_metrics(text: str) -> "pd.DataFrame":
    """One row per line that holds ``NAME=NUMBER`` words, one column per name (``step`` among them)."""
    return pd.DataFrame(list(metric_rows(text)))
