"""A continuation chain as one experiment: submitting its segments, and its timeline on the page and notebook.

A pipeline (``experiments/pipeline.py``) is recorded the same way, its steps' jobs as the chain's ``jobs``, with
``kind`` :data:`PIPELINE` and its ``steps`` (name, the steps it runs after, job id); it is read here too.

The record's ``chain`` holds the plan (``cap``, ``signal_seconds``), the chain's folder on the cluster, every
segment's job id (``jobs``, in order) and what became of each (``segments``, as the watcher last read them:
:func:`~betty_jupyter.cluster.continuation.segment_outcomes`) and how the chain ended (``ended``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..cluster.continuation import ChainPlan, chain_script, deciding_job, dependency, segment_outcomes
from ..cluster.pipeline import deciding_step, step_outcomes
from ..errors import BettyError, ExperimentError
from ..gpu.measured import with_sampler
from .chain_page import PIPELINE
from .ledger import Experiment, Ledger
from .record import check_recordable, new_slug, record_submission, resources_asked
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.jobs import Job
    from ..cluster.sbatch import SbatchScript
    from ..cluster.slurm import SlurmClient, Snapshot


def chain_dir(work_dir: str, slug: str) -> str:
    """The chain's folder on the cluster: its markers (``done``, ``failed``) and its segments' job ids."""
    return f"{work_dir}/chains/{slug}"


def segment_script(slurm: "SlurmClient", text: str, plan: ChainPlan, slug: str, measured: bool = False) -> str:
    """The script each segment of ``slug``'s chain runs (the person's, with the signal and Betty's helper); with
    ``measured``, the GPU peak sampler too (``gpu/measured.py``), so that each segment measures its own peak."""
    script = chain_script(text, plan, slug, chain_dir(slurm.work_dir, slug))
    return with_sampler(script) if measured else script


async def submit_chain(slurm: "SlurmClient", workspace: Workspace, cluster: str, script: "SbatchScript",
                       plan: ChainPlan, *, goal: str = "", name: str | None = None,
                       gpu_estimate: dict[str, Any] | None = None, measure_gpu_peak: bool = False) -> Experiment:
    """Submit every segment of the chain once, each after the one before, and record them as one experiment.

    ``script`` is the person's script as checked; each segment runs :func:`segment_script` of it (measuring its GPU
    peak with ``measure_gpu_peak``). When a later segment cannot be submitted, the ones already queued are recorded
    (the chain is shorter) and the error says so.
    """
    # lazy: the batch-script parser; the server's start loads this module without it
    from ..cluster.sbatch import SbatchScript

    check_recordable(script.text, goal, name)
    plan.check(script.time_minutes())
    ledger = Ledger(workspace.ledger_path)
    slug = new_slug(workspace, ledger, name or script.get("job-name") or "job")
    segment = SbatchScript.parse(segment_script(slurm, script.text, plan, slug, measure_gpu_peak))
    folder = chain_dir(slurm.work_dir, slug)
    jobs: list[str] = []
    error: BettyError | None = None
    for _ in range(plan.cap):
        try:
            jobs.append(await slurm.submit(segment, [dependency(jobs[-1])] if jobs else [],
                                           script_name=f"{slug}.sbatch"))
        except BettyError as failed:
            if not jobs:
                raise
            error = failed
            break
    try:
        await slurm.transport.put(("\n".join(jobs) + "\n").encode(), f"{folder}/jobs")
    except BettyError:
        pass  # the segments after a finished one then start and exit at once instead of being cancelled
    experiment = Experiment(
        slug=slug, job_id=jobs[0], cluster=cluster, submitted=datetime.now().strftime("%Y-%m-%dT%H:%M:%S"),
        goal=goal, script=segment.text, script_path=f"{slurm.work_dir}/scripts/{slug}.sbatch",
        partition=script.get("partition"), resources=resources_asked(script), gpu_estimate=gpu_estimate,
        gpu_peak={"sampled": True} if measure_gpu_peak else None,
        chain={"cap": plan.cap, "signal_seconds": plan.signal_seconds, "requeue": plan.requeue, "dir": folder,
               "jobs": jobs,
               "segments": [{"job_id": ident, "state": "PENDING", "ended": None, "why": "waiting"}
                            for ident in jobs], "ended": None},
    )
    record_submission(workspace, experiment, ledger)
    if error is not None:
        raise ExperimentError(f"submitted {len(jobs)} of {plan.cap} segments ({', '.join(jobs)}), recorded as "
                              f"{slug}; the next could not be submitted: {error}")
    return experiment


def read_chain(experiment: Experiment, jobs: dict[str, "Job"]) -> tuple[Experiment, "Job | None"]:
    """The experiment with its segments as ``jobs`` (a snapshot's) show them, and the job that speaks for it."""
    chain = experiment.chain or {}
    ids = [str(ident) for ident in chain.get("jobs") or [experiment.job_id]]
    if chain.get("kind") == PIPELINE:
        segments, ended = step_outcomes(chain.get("steps") or [], jobs)
        deciding = deciding_step(segments) or ids[-1]
    else:
        segments, ended = segment_outcomes(ids, jobs, chain.get("segments") or (), bool(chain.get("requeue")))
        deciding = deciding_job(ids, jobs, segments)
    updated = replace(experiment, chain={**chain, "segments": segments, "ended": ended})
    job = jobs.get(deciding)
    if job is not None and ended is None and job.state.finished:
        job = None  # a segment ended but the chain goes on: the next one's record is not read yet
    return updated, job


def followed(experiment: Experiment, snapshot: "Snapshot") -> tuple[Experiment, "Job | None"]:
    """:func:`read_chain` from a watcher's snapshot."""
    return read_chain(experiment, snapshot.jobs)


def moved(before: Experiment, after: Experiment) -> bool:
    """Whether any segment's state or outcome differs between two readings of a chain."""
    def key(experiment: Experiment) -> list[tuple[str, str, str]]:
        return [(str(s.get("job_id")), str(s.get("state")), str(s.get("why")))
                for s in (experiment.chain or {}).get("segments") or []] + \
            [(str(s.get("name")), "outputs", str(s.get("missing"))) for s in (experiment.chain or {}).get("steps") or []
             if "missing" in s]
    return key(before) != key(after)


def continuation_script(slurm: "SlurmClient", experiment: Experiment, plan: ChainPlan) -> str:
    """The script a continuation of ``experiment`` runs: a chain's own segment script, or the recorded script with
    the signal and Betty's helper (UsageError when it runs nothing through ``betty_run``)."""
    if experiment.chain:
        return experiment.script
    return segment_script(slurm, experiment.script, plan, experiment.slug)


async def extend_chain(slurm: "SlurmClient", workspace: Workspace, experiment: Experiment,
                       plan: ChainPlan) -> Experiment:
    """Queue ``plan.cap`` continuation segments behind the experiment's last job, and record the experiment as a
    chain of all of them (the job that runs now first)."""
    # lazy: the batch-script parser; the server's start loads this module without it
    from ..cluster.sbatch import SbatchScript

    chain = dict(experiment.chain or {"cap": 1, "signal_seconds": plan.signal_seconds,
                                      "dir": chain_dir(slurm.work_dir, experiment.slug), "jobs": [experiment.job_id],
                                      "segments": [], "ended": None})
    script = SbatchScript.parse(continuation_script(slurm, experiment, plan))
    jobs = [str(ident) for ident in chain.get("jobs") or [experiment.job_id]]
    added: list[str] = []
    error: BettyError | None = None
    for _ in range(plan.cap):
        try:
            added.append(await slurm.submit(script, [dependency((added or jobs)[-1])],
                                            script_name=f"{experiment.slug}-continued.sbatch"))
        except BettyError as failed:
            if not added:
                raise
            error = failed
            break
    jobs += added
    try:
        await slurm.transport.put(("\n".join(jobs) + "\n").encode(), f"{chain['dir']}/jobs")
    except BettyError:
        pass  # the segments after a finished one then start and exit at once instead of being cancelled
    chain.update(cap=len(jobs), jobs=jobs, ended=None,
                 segments=[*(chain.get("segments") or [])[:len(jobs) - len(added)],
                           *({"job_id": ident, "state": "PENDING", "ended": None, "why": "waiting"} for ident in added)])
    changed = Ledger(workspace.ledger_path).extend_chain(experiment.slug, chain)
    if changed is None:
        raise ExperimentError(f"queued {', '.join(added)} behind job {jobs[0]}, but {experiment.slug} is no longer "
                              "in the ledger")
    if error is not None:
        raise ExperimentError(f"queued {len(added)} of {plan.cap} continuations ({', '.join(added)}); the next could "
                              f"not be submitted: {error}")
    return changed


def interruption_count(experiment: Experiment) -> int:
    """How often Slurm interrupted the experiment's jobs (preempted and requeued), as its segments record it."""
    segments = (experiment.chain or {}).get("segments") or []
    return sum(len(segment.get("interruptions") or []) for segment in segments)


def waiting_segment(experiment: Experiment) -> str | None:
    """The job of the chain's segment that waits to run again after an interruption (None: none waits)."""
    for segment in (experiment.chain or {}).get("segments") or []:
        if segment.get("why") == "waiting" and segment.get("interruptions"):
            return str(segment.get("job_id"))
    return None
