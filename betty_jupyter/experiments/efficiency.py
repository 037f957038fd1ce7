"""An ended experiment's efficiency on its page: what its job used of its request, and the right-sized request
for the next run drawn from the runs of the same experiment so far (:mod:`~betty_jupyter.cluster.advisor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cluster.advisor.efficiency import summary_line
from ..cluster.advisor.rightsizing import propose
from ..safe_text import markdown_text
from .ledger import Experiment, Ledger

if TYPE_CHECKING:
    from ..cluster.slurm import SlurmClient


async def efficiency_records(slurm: "SlurmClient", ledger: Ledger,
                             experiments: list[Experiment]) -> dict[str, dict[str, Any]]:
    """For each experiment whose job accounting has finished: its figures and right-sizing, by slug.

    ONE ``sacct`` call for the jobs and every run of their series together.
    """
    series = ledger.series(experiments)
    ids = list(dict.fromkeys(run.job_id for runs in series.values() for run in runs))
    figures = {job.job_id: job for job in await slurm.efficiency(ids)} if ids else {}
    records: dict[str, dict[str, Any]] = {}
    for experiment in experiments:
        own = figures.get(experiment.job_id)
        if own is None:
            continue
        sizing = propose([figures[run.job_id] for run in series[experiment.slug] if run.job_id in figures])
        records[experiment.slug] = {"line": summary_line(own), "job": own.as_dict(), "runs": list(sizing.runs),
                                    "right_sizing": sizing.line(), "changes": sizing.changes}
    return records


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
