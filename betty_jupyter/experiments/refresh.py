"""Bringing one experiment's page up to date with its job: shared by the watcher and the agent's tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BettyError
from ..wiki import WikiStore
from . import content
from .ledger import Experiment
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.jobs import Job
    from ..cluster.slurm import SlurmClient

LOG_LINES_ON_FAILURE = 20


async def failure_log(slurm: "SlurmClient", job: "Job", lines: int = LOG_LINES_ON_FAILURE) -> str | None:
    """The end of a failed job's stderr (or stdout when stderr is empty), when it can be read."""
    for stream in ("err", "out"):
        try:
            text = await slurm.tail(job.shown_task or job.job_id, stream, lines)  # an array: its failed task's
        except BettyError:
            continue
        if text.strip():
            return text
    return None


def write_page(workspace: Workspace, experiment: Experiment, job: "Job", log: str | None = None,
               store: WikiStore | None = None) -> None:
    """Rewrite the page's Status and Runtime (only between Betty's markers) and its ``status`` field
    (``store``: the workspace's wiki, when the caller writes many pages)."""
    state = job.state.value
    (store or WikiStore(workspace.wiki)).update_auto(experiment.page, content.auto_region(experiment, job, state, log),
                                                     {"status": state})


async def refresh_page(slurm: "SlurmClient", workspace: Workspace, experiment: Experiment, job: "Job") -> None:
    """Fetch the failure log when the job failed, then :func:`write_page`."""
    log = await failure_log(slurm, job) if job.state.value in content.FAILED_STATES else None
    write_page(workspace, experiment, job, log)
