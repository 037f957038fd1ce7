"""``%betty sweep SLUG``'s answer: a sweep's comparison as an escaped HTML table, with its plots, and as text."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Mapping

from IPython.display import HTML, display

from ..experiments.comparison import Comparison, comparison_rows
from ..experiments.sweep_page import importance_line, search_rows
from ..safe_text import html_text, terminal_line
from .charts import chart_image
from .widgets.html import state_badge_html

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class SweepView:
    """``sweep_compare``'s data shown in a notebook: the table of every task, then for each metric its curves by step
    and its final value by parameter. ``comparison`` keeps it all."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.comparison = Comparison.from_json(data)

    def _repr_html_(self) -> str:
        """The table; every value from a log or from Slurm escaped, each state a coloured label."""
        header, rows = comparison_rows(self.comparison)
        state = header.index("state")
        head = "".join(f"<th>{html_text(cell)}</th>" for cell in header)
        body = "".join("<tr>" + "".join(f"<td>{state_badge_html(cell) if i == state else html_text(cell)}</td>"
                                        for i, cell in enumerate(row)) + "</tr>" for row in rows)
        failed = self.comparison.failed()
        note = (f"<p>Failed: tasks {html_text(', '.join(map(str, failed)))}. Resubmit them by index with "
                f"<code>betty sweeps retry {html_text(self.comparison.slug)}</code> (one card).</p>") if failed else ""
        return (f"<div class='betty-sweep'><p><b>sweep {html_text(self.comparison.slug)}</b></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}{self._search_html()}</div>")

    def _search_html(self) -> str:
        """A search's trials: each task's objective, the best so far, stopped and failed tasks and why."""
        search = self.comparison.search
        if not search:
            return ""
        header, rows = search_rows(search, search.get("stopped") or {})
        head = "".join(f"<th>{html_text(cell)}</th>" for cell in header)
        body = "".join("<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in row) + "</tr>" for row in rows)
        importance = importance_line(search)
        return (f"<p><b>Search</b></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                + (f"<p>{html_text(importance)}</p>" if importance else ""))

    def figures(self) -> list["Figure"]:
        """For each metric: its curves by step, then its final value by parameter."""
        return [draw() for draw in self.drawings()]

    def drawings(self) -> list[Callable[[], "Figure"]]:
        """What draws :meth:`figures`, one figure each, drawn when called."""
        # lazy: matplotlib; the table alone never needs it
        from ..experiments.sweep_plots import final_by_parameter, metric_curves

        comparison = self.comparison
        return [partial(draw, comparison, metric) for metric in comparison.metric_names
                for draw in (metric_curves, final_by_parameter)]

    def _ipython_display_(self) -> None:
        display(HTML(self._repr_html_()))
        for draw in self.drawings():
            display(chart_image(draw))

    def __repr__(self) -> str:
        header, rows = comparison_rows(self.comparison)
        return "\n".join(" | ".join(terminal_line(cell) for cell in row) for row in [header, *rows])
