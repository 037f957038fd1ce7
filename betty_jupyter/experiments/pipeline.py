"""A pipeline as one experiment: its steps submitted once, each after the steps it needs, and recorded together.

The record is a chain's (``experiments/chain.py``) with ``kind`` ``pipeline``: the steps' jobs in order (so the
watcher, the ledger's ``segments`` table and ``cluster_status`` follow every step), and ``steps``: each step's name,
the steps it runs after, its job and its script's path on the cluster.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence

from ..cluster.pipeline import Step, checked_steps, dependents, dependency_options, header_clauses, outputs_due, \
    steps_from_text, stranded
from ..errors import BettyError, ExperimentError
from .chain_page import PIPELINE
from .ledger import Experiment, Ledger
from .record import check_recordable, new_slug, record_submission, resources_asked
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.jobs import Job
    from ..cluster.sbatch import SbatchScript
    from ..cluster.slurm import SlurmClient


def pipeline_text(steps: Sequence[Step]) -> str:
    """Every step's script, one after the other under a line naming the step and what it runs after: the card's and
    the record's script."""
    parts = []
    for step in steps:
        parts.append(f"# ==== step {step.name} ({header_clauses(step)}) ====\n{step.script.rstrip()}\n")
    return "\n".join(parts)


async def submit_pipeline(slurm: "SlurmClient", workspace: Workspace, cluster: str,
                          steps: Sequence[tuple[Step, "SbatchScript"]], *, goal: str = "",
                          name: str | None = None, replaces: dict[str, str] | None = None) -> Experiment:
    """Submit every step once, each with ``afterok`` on the jobs of the steps it needs, and record them as one
    experiment (``replaces``: the pipeline and failed step's job these steps run again). When a later step cannot be
    submitted, the ones already queued are cancelled, so none waits on a pipeline that is not whole, and the error
    says so."""
    plain = checked_steps([step for step, _ in steps], least=1 if replaces else 2)
    text = pipeline_text(plain)
    check_recordable(text, goal, name)
    ledger = Ledger(workspace.ledger_path)
    first = steps[0][1]
    slug = new_slug(workspace, ledger, name or first.get("job-name") or plain[0].name)
    jobs: dict[str, str] = {}
    for step, script in steps:
        try:
            options = dependency_options([jobs[n] for n in step.after], [jobs[n] for n in step.aftercorr],
                                         step.singleton)
            jobs[step.name] = await slurm.submit(script, options, script_name=f"{slug}-{step.name}.sbatch")
        except BettyError as failed:
            if jobs:
                await _cancel(slurm, list(jobs.values()))
                raise ExperimentError(f"pipeline {slug}: step {step.name} could not be submitted ({failed}); the "
                                      f"steps already queued ({', '.join(jobs.values())}) were cancelled") from failed
            raise
    recorded = [recorded_step(step, jobs[step.name], f"{slurm.work_dir}/scripts/{slug}-{step.name}.sbatch")
                for step in plain]
    experiment = Experiment(
        slug=slug, job_id=jobs[plain[0].name], cluster=cluster,
        submitted=datetime.now().strftime("%Y-%m-%dT%H:%M:%S"), goal=goal, script=text,
        script_path=str(recorded[0]["script_path"]), partition=first.get("partition"), resources=resources_asked(first),
        replaces=replaces,
        chain={"kind": PIPELINE, "cap": len(plain), "steps": recorded, "jobs": list(jobs.values()),
               "segments": [{"step": step.name, "job_id": jobs[step.name], "state": "PENDING", "ended": None,
                             "why": "waiting"} for step in plain], "ended": None},
    )
    record_submission(workspace, experiment, ledger)
    return experiment


def recorded_step(step: Step, job_id: str, script_path: str) -> dict[str, Any]:
    """A step as the record keeps it: name, edges of each kind, job and script path (and, when asked, ``singleton``
    and ``outputs``)."""
    record: dict[str, Any] = {"name": step.name, "after": list(step.after), "job_id": job_id,
                              "script_path": script_path}
    if step.aftercorr:
        record["aftercorr"] = list(step.aftercorr)
    if step.singleton:
        record["singleton"] = True
    if step.outputs:
        record["outputs"] = list(step.outputs)
    return record


async def cancel_stranded(slurm: "SlurmClient", experiment: Experiment, jobs: dict[str, "Job"]) -> list[str]:
    """Cancel the steps of a pipeline that wait on a step that did not succeed (they would never run); their ids."""
    found = stranded((experiment.chain or {}).get("steps") or [], jobs)
    if found:
        await _cancel(slurm, found)
    return found


async def check_outputs(slurm: "SlurmClient", experiment: Experiment, jobs: dict[str, "Job"]) -> Experiment:
    """Look on the cluster for the outputs of each step that just ended well; where one is missing, cancel the
    steps after it (they would read nothing) and record why on the step (``missing``: one line naming the path).
    The experiment as recorded after the look (unchanged when no step was due)."""
    # lazy: the cluster-side look; a pipeline that names no outputs never needs it
    from ..cluster.step_outputs import first_missing

    chain = experiment.chain or {}
    steps = [dict(step) for step in chain.get("steps") or []]
    due = {str(step.get("name")) for step in outputs_due(steps, jobs)}
    if not due:
        return experiment
    for step in steps:
        if str(step.get("name")) not in due:
            continue
        try:
            step["missing"] = await first_missing(slurm, jobs[str(step.get("job_id"))], step["outputs"])
        except BettyError:
            continue  # the cluster did not say: looked for again on the next pass
        if step["missing"]:
            later = [str(s.get("job_id")) for s in dependents(steps, str(step.get("name")))
                     if (job := jobs.get(str(s.get("job_id")))) is None or not job.state.finished]
            await _cancel(slurm, later)
            step["stopped"] = later
    return replace(experiment, chain={**chain, "steps": steps})


async def _cancel(slurm: "SlurmClient", job_ids: list[str]) -> None:
    for ident in job_ids:
        try:
            await slurm.cancel(ident)
        except BettyError:
            pass  # already ended: nothing waits on it


def step_table(experiment: Experiment) -> list[dict[str, Any]]:
    """Each step as recorded: name, what it runs after, job, state and why (for ``segments()`` and the status)."""
    steps = {str(s.get("job_id")): s for s in (experiment.chain or {}).get("steps") or []}
    return [{**record, "after": list(steps.get(str(record.get("job_id")), {}).get("after") or []),
             "aftercorr": list(steps.get(str(record.get("job_id")), {}).get("aftercorr") or [])}
            for record in (experiment.chain or {}).get("segments") or []]


def failed_step(experiment: Experiment) -> dict[str, Any] | None:
    """The first step of a pipeline that failed (its record, with ``script``: its own batch script as the card showed
    it), None when no step failed or its script cannot be found in the record."""
    chain = experiment.chain or {}
    failed = next((s for s in chain.get("segments") or [] if s.get("why") == "failed"), None)
    step = next((s for s in chain.get("steps") or [] if failed and s.get("name") == failed.get("step")), None)
    if step is None:
        return None
    scripts = {read["name"]: read["script"] for read in steps_from_text(experiment.script)}
    return {**step, "script": scripts[step["name"]]} if step["name"] in scripts else None


def retry_steps(experiment: Experiment, name: str, script: str) -> list[dict[str, Any]]:
    """The ``cluster_pipeline`` steps that run step ``name`` again with ``script`` and every step after it with its
    own script: the steps that succeeded are not run again, and the edges to them are left out."""
    recorded = (experiment.chain or {}).get("steps") or []
    scripts = {read["name"]: read["script"] for read in steps_from_text(experiment.script)}
    chosen = [step for step in recorded if step.get("name") == name] + dependents(recorded, name)
    names = {str(step.get("name")) for step in chosen}
    steps = []
    for step in chosen:
        again: dict[str, Any] = {
            "name": step["name"], "script": script if step["name"] == name else scripts[step["name"]],
            "after": [n for n in step.get("after") or () if n in names],
            "aftercorr": [n for n in step.get("aftercorr") or () if n in names]}
        steps.append({**again, **{key: step[key] for key in ("singleton", "outputs") if step.get(key)}})
    return steps


def graph(experiment: Experiment) -> dict[str, Any]:
    """The pipeline as the side panel draws it: each step with its state as last read, why, and its edges of each
    kind (``GET experiments/{slug}/pipeline``)."""
    chain = experiment.chain or {}
    read = {str(segment.get("job_id")): segment for segment in chain.get("segments") or []}
    steps = []
    for step in chain.get("steps") or []:
        segment = read.get(str(step.get("job_id")), {})
        edges = [{"step": str(name), "kind": "afterok"} for name in step.get("after") or ()] + \
            [{"step": str(name), "kind": "aftercorr"} for name in step.get("aftercorr") or ()]
        steps.append({"name": str(step.get("name")), "job_id": str(step.get("job_id")),
                      "state": str(segment.get("state") or "PENDING"), "why": str(segment.get("why") or "waiting"),
                      "ended": segment.get("ended"), "edges": edges, "singleton": bool(step.get("singleton")),
                      "outputs": [str(path) for path in step.get("outputs") or ()]})
    return {"slug": experiment.slug, "ended": chain.get("ended"), "steps": steps}
