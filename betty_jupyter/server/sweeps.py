"""Recorded sweeps for the side panel: the list, and one sweep's comparison with its pictures.

The comparison is ``sweep_compare``'s, called as the person's own read in the cluster's desk
session (same policy, same action log); its table is :func:`~betty_jupyter.experiments.comparison.comparison_rows`'s,
the one ``betty sweeps show`` prints, and its pictures :mod:`betty_jupyter.experiments.sweep_charts`' SVG.
Resubmitting failed tasks and cancelling are ``sweep_retry`` and ``sweep_cancel`` started in the person's chat
(``POST sessions/{id}/tools/{tool}``): their cards wait there for approval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tornado import web

from .base import refused
from .knowledge import ExperimentsHandler, experiment_json

if TYPE_CHECKING:
    from ..agent.models import ToolOutcome
    from ..experiments.ledger import Tracked
    from .models import Sweep, SweepComparison


def sweep_json(tracked: "Tracked") -> "Sweep":
    """One recorded sweep: its experiment, its grid's words, its size and how often it was resubmitted."""
    # lazy: the grid's parser; the server's extension loads without it
    from ..experiments.sweep import recorded_grid

    sweep = tracked.experiment.sweep or {}
    grid = [str(word) for word in sweep.get("grid") or []]
    return {"experiment": experiment_json(tracked), "grid": grid, "tasks": len(recorded_grid(sweep)),
            "at_once": sweep.get("at_once"), "retries": len(sweep.get("retries") or [])}


def comparison_json(tracked: "Tracked", outcome: "ToolOutcome") -> "SweepComparison":
    """``sweep_compare``'s outcome as the panel shows it: the table's text, each task's state, the pictures."""
    # lazy: the comparison and its pictures; the server's extension loads without them
    from ..experiments.comparison import Comparison, comparison_rows
    from ..experiments.sweep_charts import sweep_charts
    from ..experiments.sweep_page import importance_line, search_rows

    e = tracked.experiment
    answer: SweepComparison = {"ok": outcome.ok, "summary": outcome.summary.split("\n", 1)[0], "slug": e.slug,
                               "job_id": e.job_id, "cluster": e.cluster, "header": [], "rows": [], "states": [],
                               "failed": [], "charts": [], "search_header": [], "search_rows": [], "search_note": ""}
    if not outcome.ok or not isinstance(outcome.data, dict):
        return answer
    comparison = Comparison.from_json(outcome.data)
    header, rows = comparison_rows(comparison)
    answer["header"], answer["rows"] = header, rows
    answer["states"], answer["failed"] = [task.state for task in comparison.tasks], comparison.failed()
    answer["charts"] = [{"metric": c.metric, "parameter": c.parameter, "svg": c.svg} for c in sweep_charts(comparison)]
    if comparison.search:
        answer["search_header"], answer["search_rows"] = search_rows(comparison.search,
                                                                     comparison.search.get("stopped") or {})
        answer["search_note"] = importance_line(comparison.search)
    return answer


class SweepListHandler(ExperimentsHandler):
    """``GET sweeps``: every recorded sweep, oldest first."""

    @web.authenticated
    def get(self) -> None:
        """``{sweeps: [Sweep]}``."""
        self.answer({"sweeps": [sweep_json(t) for t in self.ledger().all() if t.experiment.sweep]})


class SweepHandler(ExperimentsHandler):
    """``GET sweeps/{slug}``: one sweep's comparison (``sweep_compare``), its table and its pictures."""

    @web.authenticated
    async def get(self, slug: str) -> None:
        """The SweepComparison; 404 when no sweep of that slug or job array id is recorded."""
        tracked = self.ledger().get(slug)
        if tracked is None or not tracked.experiment.sweep:
            raise refused(404, f"no sweep {slug[:80]!r} is recorded in {self.services.workspace.root}")
        session = await self.services.desk(self.cluster_name(tracked.experiment.cluster))
        outcome = await self.assistant.call(session.session_id, "sweep_compare",
                                            {"experiment": tracked.experiment.slug}, self.person)
        self.answer(comparison_json(tracked, outcome))


handlers = [
    (r"/betty/api/sweeps", SweepListHandler),
    (r"/betty/api/sweeps/(?P<slug>[^/]+)", SweepHandler),
]
"""The sweep routes."""
