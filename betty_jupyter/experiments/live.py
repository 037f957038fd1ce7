"""Calls an experiment notebook makes: the job's state, its log, its numbers — on the configured cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..cluster.shared import shared_cluster
from ..cluster.sync import Blocking, run_sync
from ..config import load_config
from .metrics_table import parse_metrics

if TYPE_CHECKING:
    import pandas as pd

    from ..cluster.jobs import Job

T = TypeVar("T")


def _with_cluster(cluster: str | None, work: Callable[[Any], T]) -> T:
    """``work`` with the Slurm client of the kernel's shared cluster (its link stays for the next call)."""
    return work(Blocking(shared_cluster(load_config().profile(cluster)).slurm))


def status(job_id: str, cluster: str | None = None) -> "Job":
    """Print and return the job's state now."""
    job: Job = _with_cluster(cluster, lambda slurm: slurm.job(job_id))
    details = [f"exit code {job.exit_code}"] if job.exit_code and job.state.finished else []
    if job.elapsed is not None:
        details.append(f"elapsed {job.elapsed}")
    if job.reason and not job.state.finished:
        details.append(f"reason {job.reason}")
    print(f"job {job.job_id} ({job.name}) on {cluster or 'the default cluster'}: {job.state.value}"
          + (f" — {', '.join(details)}" if details else ""))
    return job


def log_tail(job_id: str, cluster: str | None = None, lines: int = 40, stream: str = "out") -> str:
    """The last ``lines`` lines of the job's output (``stream='err'`` for stderr)."""
    text: str = _with_cluster(cluster, lambda slurm: slurm.tail(job_id, stream, lines))
    return text


def metrics(job_id: str, cluster: str | None = None, lines: int = 100_000) -> "pd.DataFrame":
    """Every ``NAME=NUMBER`` word the job printed (the one grammar of :mod:`.task_metrics`), as a DataFrame."""
    return parse_metrics(log_tail(job_id, cluster=cluster, lines=lines))


def compare(sweep: str, cluster: str | None = None, project: str = "../..") -> dict[str, Any]:
    """A recorded sweep's comparison now (``sweep``: its slug or job array id, in the project at ``project``, the
    root seen from an experiment notebook), as the ``sweep_compare`` tool gives it; show it with
    :class:`~betty_jupyter.notebook.sweep.SweepView`."""
    # lazy: the ledger and the comparison; a notebook of a single job never needs them
    from ..errors import ExperimentError
    from .comparison import read_comparison
    from .ledger import Ledger
    from .workspace import Workspace

    workspace = Workspace.at(project)
    tracked = Ledger(workspace.ledger_path).get(sweep) if workspace.ledger_path.exists() else None
    if tracked is None or not tracked.experiment.sweep:
        raise ExperimentError(f"no sweep {sweep!r} is recorded in {workspace.root}")
    experiment = tracked.experiment
    comparison = _with_cluster(cluster or experiment.cluster,
                               lambda slurm: run_sync(read_comparison(slurm.target, experiment)))
    data: dict[str, Any] = comparison.to_json()
    return data


def segments(chain: str, cluster: str | None = None, project: str = "../..") -> list[dict[str, Any]]:
    """Print and return a recorded continuation chain's segments now (``chain``: its slug or any segment's job id,
    in the project at ``project``): each one's job, when it ended and why."""
    # lazy: the ledger and the chain's reading; a notebook of a single job never needs them
    from ..errors import ExperimentError
    from .chain import read_chain
    from .ledger import Ledger
    from .workspace import Workspace

    workspace = Workspace.at(project)
    recorded = Ledger(workspace.ledger_path).all() if workspace.ledger_path.exists() else []
    experiment = next((t.experiment for t in reversed(recorded) if t.experiment.chain and (
        chain == t.experiment.slug or chain in [str(i) for i in t.experiment.chain.get("jobs") or []])), None)
    if experiment is None or not experiment.chain:
        raise ExperimentError(f"no continuation chain {chain!r} is recorded in {workspace.root}")
    jobs = [str(ident) for ident in experiment.chain.get("jobs") or [experiment.job_id]]
    snapshot = _with_cluster(cluster or experiment.cluster, lambda slurm: slurm.snapshot(jobs))
    read, _ = read_chain(experiment, snapshot.jobs)
    found: list[dict[str, Any]] = list((read.chain or {}).get("segments") or [])
    for number, segment in enumerate(found, start=1):
        label = f"step {segment['step']}" if segment.get("step") else f"segment {number}"
        print(f"{label}: job {segment['job_id']} {segment['state']}"
              + (f", ended {segment['ended']}" if segment.get("ended") else "") + f" — {segment['why']}")
    ended = (read.chain or {}).get("ended")
    kind = "pipeline" if (read.chain or {}).get("kind") == "pipeline" else "chain"
    print(f"the {kind} ended: {ended}" if ended else f"the {kind} goes on")
    return found
