"""``%betty overview`` in a notebook: the figure and a small table, while ``_`` keeps the plain data."""

from __future__ import annotations

from typing import Any

from IPython.display import display

from ..advisor.overview import OVERVIEW_COLUMNS, OverviewData, overview_rows, overview_table, share_line, \
    waits_line
from ..safe_text import html_text
from .charts import chart_image


def overview_html(overview: OverviewData) -> str:
    """The overview's table and the person's share as HTML; every cell goes through the one escaper."""
    head = "".join(f"<th>{html_text(column)}</th>" for column in OVERVIEW_COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in row) + "</tr>"
                   for row in overview_rows(overview))
    return (f'<table class="betty-overview"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
            f"<p>{html_text(share_line(overview))}<br>expected waits: {html_text(waits_line(overview))}</p>")


class ShownOverview(dict):  # type: ignore[type-arg]
    """The overview's data (a plain dict to compute with) that shows as the figure and the table."""

    def _ipython_display_(self) -> None:
        # lazy: matplotlib is heavy; only a shown overview draws it
        from ..advisor.overview_figure import overview_figure

        overview: Any = self
        display(chart_image(lambda: overview_figure(overview), dpi=100))
        display({"text/html": overview_html(overview), "text/plain": overview_table(overview)}, raw=True)
