"""The job babysitter: a built-in automation, paused until a person resumes it, run by Betty's code, not a model.

When the watcher sees a job Betty recorded end FAILED, OUT_OF_MEMORY or TIMEOUT, the job
trigger queues a run and the runner hands it to :func:`babysit`, which

1. reads the job's accounting, the end of its log, the cluster's partitions, the
   experiment's script and GPU estimate and the earlier runs of the same job (what they
   asked for and used: a memory request rests on them when the failed run left no peak,
   never on a blind multiple), and lets
   :func:`~betty_jupyter.experiments.diagnosis.diagnose` name the cause and write the
   corrected script (or none);
2. records the diagnosis in the experiment's ledger record, from which the page's Betty
   region is rendered (``## Diagnosis``), so every later rewrite of that region keeps it;
3. proposes the correction, when there is one: a ``cluster_submit`` call with ``replaces``
   — tier 2, so an ordinary approval card showing the diff, labelled ``job babysitter: job
   <id>`` — in a task of its own, so the run ends at once and the next failed job is not held
   up. Whatever happens to the card, the outcome goes back into the record and the page.
   For a sweep the proposal is its failed tasks, by index, with the same script (one
   ``sweep_retry`` card, ``--array=3,7``); the change Betty would make is a suggestion. For a
   pipeline, the job is its first failed step: the diagnosis is that step's, and the proposal
   one ``cluster_pipeline`` card that runs that step again, corrected, with the steps after it
   (the steps that succeeded are not run again).

A job that waits again after an interruption (preempted and requeued: its trigger's ``REQUEUED``) fires it
too; once its record counts :data:`~.preempted.PREEMPTIONS` interruptions, :mod:`.preempted` proposes moving it
to another partition.

Once per failed job, across restarts and servers: a diagnosis is recorded only where the
record has none, and a proposal moves from ``ready`` to ``proposed`` in one ledger
transaction before its card opens. A card lost with a server that died is not shown again;
the page keeps the corrected script's diff.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import BettyError
from ...experiments.chain_page import is_pipeline
from ...experiments.ledger import Experiment, Ledger
from ...experiments.pipeline import failed_step, retry_steps
from ...experiments.refresh import LOG_LINES_ON_FAILURE, failure_log, write_page
from ...wiki import WikiStore
from .. import events as ev
from ..session import SessionSpec
from ..vocabulary import Decision, Mode
from .definitions import AutomationLimits, AutomationSpec, Trigger
from .host import open_run_session
from .preempted import propose_move

if TYPE_CHECKING:
    from ...cluster.jobs import Job
    from ...cluster.slurm import SlurmClient
    from ..loop import AgentSession
    from ..models import ToolOutcome
    from .definitions import Automation, Run
    from .host import RunHost

log = logging.getLogger(__name__)
BABYSITTER_ID = "job-babysitter"
PERSON = "job babysitter"
LOG_LINES = 80
"""How much of the log the diagnosis reads (the page shows the last 20, as the watcher does)."""
BABYSITTER = AutomationSpec(
    name="Job babysitter",
    persona="betty",
    prompt=("Betty's own code runs this automation, not a model: when a job Betty recorded ends FAILED, "
            "OUT_OF_MEMORY or TIMEOUT, it reads the job's log and accounting, writes a diagnosis into the "
            "experiment's page and proposes a corrected resubmission for a person to approve; when Slurm preempted "
            "and requeued a job 3 times, it proposes moving it to the partition where it would start soonest."),
    trigger=Trigger(kind="job", states=["FAILED", "OUT_OF_MEMORY", "TIMEOUT", "REQUEUED"]),
    tools=["cluster_submit", "sweep_retry", "cluster_pipeline", "cluster_move"],
    limits=AutomationLimits(seconds=86_400),
    mode=Mode.AUTO,
)
"""Installed paused (off until a person resumes it); ``limits.seconds`` is how long its cards wait."""


async def babysit(runner: "RunHost", automation: "Automation", run: "Run") -> tuple[str, str | None, str]:
    """One run: diagnose the job that fired it, record and show the diagnosis, propose its correction once."""
    fired = run.payload if run.trigger == "job" and isinstance(run.payload, dict) else {}
    ledger = Ledger(runner.assistant.workspace.ledger_path)
    slug = fired.get("experiment")
    tracked = ledger.get(str(slug)) if slug else None
    if tracked is None or tracked.experiment.job_id != str(fired.get("id")):
        return "done", None, "nothing to do: the babysitter looks after jobs Betty recorded, when they fail"
    if fired.get("state") in ("PENDING", "REQUEUED"):  # waiting again: preempted and requeued
        try:
            return "done", None, await propose_move(runner, automation, run, ledger, tracked.experiment)
        except BettyError as error:
            return "failed", "babysitter", f"job {tracked.experiment.job_id}: {error}"
    try:
        return "done", None, await _Visit(runner, automation, run, ledger).look_after(tracked.experiment)
    except BettyError as error:
        return "failed", "babysitter", f"job {tracked.experiment.job_id}: {error}"


class _Visit:
    """The babysitter's look at one failed job, in a session of the run's own."""

    def __init__(self, runner: "RunHost", automation: "Automation", run: "Run", ledger: Ledger) -> None:
        self.runner, self.automation, self.run, self.ledger = runner, automation, run, ledger
        self.workspace = runner.assistant.workspace

    async def look_after(self, experiment: Experiment) -> str:
        """Diagnose (unless done before), show, and start the proposal (unless made before); the run's result."""
        step = failed_step(experiment) if is_pipeline(experiment) else None
        if is_pipeline(experiment) and step is None:
            return f"{experiment.slug}: no step of the pipeline failed; nothing to do"
        failed = str(step["job_id"]) if step else experiment.job_id
        session = await self._open(experiment, failed)
        handed_over = False
        try:
            slurm = session.context.slurm
            job = await slurm.job(failed)
            tail = await _log(slurm, job)
            if not experiment.diagnosis:
                experiment = await self._diagnose(slurm, experiment, job, tail, step)
            self._show(experiment, job, tail)
            proposed = self.ledger.change_diagnosis(experiment.slug, self._claim)
            if proposed is None:
                return _result(experiment, "")
            self._show(proposed, job, tail)
            task = asyncio.get_running_loop().create_task(self._propose(session, proposed, job, tail))
            self.runner.keep(self.automation.id, task)
            handed_over = True
            return _result(proposed, "proposed a resubmission; it waits for a person's approval")
        finally:
            if not handed_over:
                await session.context.close()

    async def _open(self, experiment: Experiment, job_id: str) -> "AgentSession":
        spec = SessionSpec(cluster=experiment.cluster, mode="auto", task=f"{PERSON}: job {job_id}")
        return await open_run_session(self.runner, self.run, spec, self.automation.limits.seconds)

    async def _diagnose(self, slurm: "SlurmClient", experiment: Experiment, job: "Job", tail: str | None,
                        step: dict[str, Any] | None = None) -> Experiment:
        """The diagnosis of the job (of a pipeline's failed ``step``: its own script), recorded once."""
        # lazy: the diagnosis and the Slurm commands behind it; the server's start builds the runner without them
        from ...experiments.diagnosis import diagnose, partition_limits

        script = step["script"] if step else experiment.script
        requested, earlier = await self._memory_history(slurm, experiment) if step is None else (None, [])
        found = diagnose(job, tail, script, partition_limits(await slurm.partitions()),
                         experiment.gpu_estimate, requested_memory_bytes=requested, earlier=earlier)
        record = found.as_record(script)
        record["resubmission"] = None if found.unchanged else {"state": "ready", "task": f"{PERSON}: job {job.job_id}"}
        if step is not None:
            record["step"] = {"name": step["name"], "job_id": str(step["job_id"])}
        if experiment.sweep:
            record = await _sweep_record(slurm, experiment, record)
        recorded = self.ledger.change_diagnosis(experiment.slug, lambda now: record if now is None else None)
        if recorded is None:  # another server diagnosed it meanwhile
            return self._reread(experiment)
        WikiStore(self.workspace.wiki).log(f"job babysitter: job {job.job_id} ({experiment.slug}) — "
                                           f"{record['title'].lower()}" + ("" if found.unchanged else
                                                                           "; a resubmission is proposed"))
        return recorded

    async def _memory_history(self, slurm: "SlurmClient", experiment: Experiment) -> tuple[int | None, list[Any]]:
        """The memory the failed job had (a per-CPU request multiplied out) and the earlier runs of the same job
        (the same ``--job-name`` on the same cluster), from one efficiency read of accounting."""
        from ...experiments.diagnosis import EarlierRun  # lazy: with the diagnosis

        runs = self.ledger.series([experiment]).get(experiment.slug, [])
        ids = list(dict.fromkeys([experiment.job_id, *(run.job_id for run in runs)]))
        found = {job.job_id: job for job in await slurm.efficiency(ids)}
        this = found.get(experiment.job_id)
        earlier = [EarlierRun(job.job_id, job.state, job.memory_requested_bytes, job.memory_peak_bytes)
                   for ident in ids[1:] if (job := found.get(ident)) is not None]
        return (this.memory_requested_bytes if this else None), earlier

    def _claim(self, now: dict[str, Any] | None) -> dict[str, Any] | None:
        """The diagnosis with its proposal taken by this run, or None when it is not ``ready`` (made before)."""
        step = (now or {}).get("resubmission") or {}
        if now is None or step.get("state") != "ready":
            return None
        return {**now, "resubmission": {**step, "state": "proposed", "run": self.run.id, "at": _now()}}

    async def _propose(self, session: "AgentSession", experiment: Experiment, job: "Job", tail: str | None) -> None:
        """The card, then what became of it, in the record and on the page."""
        answers: list[ev.ApprovalResolved] = []

        def remember(event: "ev.AnyEvent") -> None:
            if isinstance(event, ev.ApprovalResolvedEvent):
                answers.append(event.payload)

        session.stream.subscribe(remember)
        try:
            tool, args = _proposal(experiment)
            outcome = await session.run_tool(tool, args, PERSON, call_id=f"babysitter_{experiment.job_id}")
            step = _outcome(outcome, answers)
        except asyncio.CancelledError:
            self._settle(experiment, job, tail, {"state": "not submitted",
                                                 "reason": "the card was withdrawn (Betty stopped, or the "
                                                           "babysitter was killed)"})
            raise
        except Exception as error:  # a broken proposal must still be recorded, and never take the runner down
            log.exception("Betty's job babysitter could not propose a resubmission of job %s", experiment.job_id)
            step = {"state": "not submitted", "reason": f"Betty failed: {type(error).__name__}: {error}"}
        finally:
            await session.context.close()
        self._settle(experiment, job, tail, step)

    def _settle(self, experiment: Experiment, job: "Job", tail: str | None, step: dict[str, Any]) -> None:
        def settled(now: dict[str, Any] | None) -> dict[str, Any] | None:
            if now is None:
                return None
            return {**now, "resubmission": {**(now.get("resubmission") or {}), **step, "at": _now()}}

        changed = self.ledger.change_diagnosis(experiment.slug, settled)
        if changed is not None:
            self._show(changed, job, tail)

    def _show(self, experiment: Experiment, job: "Job", tail: str | None) -> None:
        """Rewrite the page's Betty region with the diagnosis; a page that was never written is left to repair."""
        shown = "\n".join((tail or "").splitlines()[-LOG_LINES_ON_FAILURE:]) or None
        try:
            write_page(self.workspace, experiment, job, shown)
        except BettyError:
            log.exception("Betty's job babysitter could not write the page of %s", experiment.slug)

    def _reread(self, experiment: Experiment) -> Experiment:
        tracked = self.ledger.get(experiment.slug)
        return tracked.experiment if tracked is not None else experiment


async def _sweep_record(slurm: "SlurmClient", experiment: Experiment, record: dict[str, Any]) -> dict[str, Any]:
    """A sweep's diagnosis: its failed tasks are run again by index with the same script (one ``sweep_retry``
    card); the correction Betty would make to the script is a suggestion for the person, never applied."""
    # lazy: the sweep's comparison; a single job's diagnosis never needs it
    from ...experiments.comparison import FAILED_TASK_STATES, task_states
    from ...experiments.sweep_page import array_ids

    states = task_states(experiment, await slurm.snapshot(array_ids(experiment)))
    failed = sorted(index for index, state in states.items() if state in FAILED_TASK_STATES)
    changes = [f"for the next sweep: {change}" for change in record.get("changes") or []]
    return {**record, "changes": [], "diff": "", "corrected_script": None,
            "suggestions": [*changes, *(record.get("suggestions") or [])],
            "resubmission": {"state": "ready", "task": f"{PERSON}: job {experiment.job_id}", "tasks": failed}
            if failed else None}


def _proposal(experiment: Experiment) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of the card: the corrected script, or a sweep's failed tasks by index."""
    step = (experiment.diagnosis or {}).get("resubmission") or {}
    if experiment.sweep:
        return "sweep_retry", {"experiment": experiment.slug, "tasks": list(step.get("tasks") or [])}
    if is_pipeline(experiment):
        return "cluster_pipeline", _pipeline_resubmission(experiment)
    return "cluster_submit", _resubmission(experiment)


def _pipeline_resubmission(experiment: Experiment) -> dict[str, Any]:
    """The ``cluster_pipeline`` arguments that run the failed step again, corrected, and the steps after it."""
    record = experiment.diagnosis or {}
    failed = record["step"]
    changes = "; ".join(record.get("changes") or [])
    base = re.sub(r"^\d{4}-\d{2}-\d{2}-", "", experiment.slug).removesuffix("-retry")
    return {"steps": retry_steps(experiment, failed["name"], record["corrected_script"]), "name": f"{base}-retry",
            "goal": f"Resubmission of {experiment.slug} from step {failed['name']}: "
                    f"{str(record.get('title', '')).lower()}" + (f" — {changes}" if changes else ""),
            "replaces": failed["job_id"]}


def _resubmission(experiment: Experiment) -> dict[str, Any]:
    """The ``cluster_submit`` arguments of the corrected script."""
    record = experiment.diagnosis or {}
    changes = "; ".join(record.get("changes") or [])
    base = re.sub(r"^\d{4}-\d{2}-\d{2}-", "", experiment.slug).removesuffix("-retry")
    args: dict[str, Any] = {"script": record["corrected_script"], "name": f"{base}-retry",
                            "goal": f"Resubmission of {experiment.slug}: {str(record.get('title', '')).lower()}"
                                    + (f" — {changes}" if changes else ""),
                            "replaces": experiment.job_id}
    if experiment.gpu_estimate:
        args["gpu_estimate"] = experiment.gpu_estimate
    return args


def _outcome(outcome: "ToolOutcome", answers: list["ev.ApprovalResolved"]) -> dict[str, Any]:
    """What became of the proposal, as the record keeps it."""
    answer = answers[-1] if answers else None
    approver = answer.approver if answer else None
    if outcome.ok and isinstance(outcome.data, Experiment):
        return {"state": "submitted", "job_id": outcome.data.job_id, "slug": outcome.data.slug, "approver": approver}
    if outcome.ok and isinstance(outcome.data, dict):  # a sweep's failed tasks, resubmitted by index
        return {"state": "submitted", "job_id": outcome.data.get("job_id"), "approver": approver}
    if answer is not None and answer.decision == Decision.DENIED:
        return {"state": "not submitted", "reason": "denied" + (f" by {approver}" if approver else "")}
    return {"state": "not submitted", "reason": outcome.summary.splitlines()[0] if outcome.summary else "not run"}


async def _log(slurm: "SlurmClient", job: "Job") -> str | None:
    return await failure_log(slurm, job, LOG_LINES)


def _result(experiment: Experiment, done: str) -> str:
    record = experiment.diagnosis or {}
    line = f"job {experiment.job_id} ({experiment.slug}): {str(record.get('title', '')).lower()} — " \
           f"{record.get('summary', '')}"
    if done:
        return f"{line}; {done}"
    step = record.get("resubmission") or {}
    return line + (f"; resubmission {step['state']}" if step.get("state") else "; no safe correction, nothing proposed")


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")
