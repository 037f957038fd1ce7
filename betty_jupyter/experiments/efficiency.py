"""An ended experiment's efficiency on its page: what its job used of its request, and the right-sized request
for the next run drawn from the runs of the same experiment so far (:mod:`~betty_jupyter.advisor`)."""

from __future__ import annotations

from typing import Any

from ..cluster.job_efficiency import JobEfficiency, summary_line
from ..advisor.rightsizing import propose
from ..safe_text import markdown_text
from .ledger import Experiment, Ledger


def efficiency_records(ledger: Ledger, experiments: list[Experiment],
                       figures: dict[str, JobEfficiency]) -> dict[str, dict[str, Any]]:
    """For each experiment whose job's figures are in ``figures`` (by job id): its figures and the right-sizing
    drawn from its series, by slug. No cluster is asked: a run of the series not in ``figures`` stands on the
    figures recorded for it when it ended (:func:`recorded_figures`), and a run recorded without any is left out.

    The job watcher passes what the tick's one ``sacct`` call said of the jobs that ended in it.
    """
    series = ledger.series(experiments)
    records: dict[str, dict[str, Any]] = {}
    for experiment in experiments:
        own = figures.get(experiment.job_id)
        if own is None:
            continue
        runs = [figure for run in series[experiment.slug]
                if (figure := figures.get(run.job_id) or recorded_figures(run)) is not None]
        sizing = propose(runs)
        records[experiment.slug] = {"line": summary_line(own), "job": own.as_dict(), "runs": list(sizing.runs),
                                    "right_sizing": sizing.line(), "changes": sizing.changes}
    return records


def recorded_figures(experiment: Experiment) -> JobEfficiency | None:
    """The figures recorded for ``experiment``'s job when it ended (None when none were)."""
    job = (experiment.efficiency or {}).get("job")
    return JobEfficiency.from_dict(job) if isinstance(job, dict) and job.get("job_id") == experiment.job_id else None


def page_section(record: dict[str, Any]) -> str:
    """The page's Efficiency section (between Betty's markers): the figures, then the right-sizing."""
    lines = ["## Efficiency", "", markdown_text(str(record.get("line", ""))), ""]
    sizing = markdown_text(str(record.get("right_sizing", "")))
    if record.get("changes"):
        lines.append(f"**Right-sizing for the next run:** {sizing}. Resubmit from the panel or notebook and "
                     "approve the card with this edit.")
    else:
        lines.append(f"Right-sizing: {sizing}.")
    return "\n".join(lines)
