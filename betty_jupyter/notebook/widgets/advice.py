"""``%betty advise``: the start estimates of a drafted script as a small table, best first.

Every cell is Slurm's or the script's text and goes through :func:`~betty_jupyter.safe_text.html_text`.
"""

from __future__ import annotations

from typing import Any, Mapping

import ipywidgets as widgets

from ...advisor.estimates import TABLE_COLUMNS, estimate_row
from ...safe_text import html_text


def advice_html(advice: Mapping[str, Any]) -> str:
    """The summary line and the ranked table of ``cluster_advise``'s data (:meth:`Advice.as_dict`)."""
    rows = [estimate_row(number, estimate) for number, estimate in enumerate(advice.get("estimates", []), 1)]
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html_text(name)}</th>" for name in TABLE_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:2px 8px'>{html_text(row.get(name, ''))}</td>" for name in TABLE_COLUMNS)
        + "</tr>" for row in rows)
    calls = advice.get("scheduler_calls", 0)
    return (f"<div class='betty-advice'><b>{html_text(advice.get('summary', ''))}</b>"
            f"<table class='betty-advice-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<i>{html_text(f'{calls} question(s) to the scheduler; answers are kept for a minute')}</i></div>")


class AdviceView(widgets.HTML):
    """The advice, shown once (it is a snapshot: ask again for fresh estimates)."""

    def __init__(self, advice: Mapping[str, Any]) -> None:
        super().__init__(advice_html(advice))
        self.add_class("betty-advice-view")


class ShownAdvice(dict):  # type: ignore[type-arg]
    """``cluster_advise``'s data (a plain dict to read from), shown as :class:`AdviceView` when it is a cell's result."""

    def _ipython_display_(self) -> None:
        # lazy: IPython's display; only a notebook shows the advice
        from IPython.display import display

        display(AdviceView(self))
