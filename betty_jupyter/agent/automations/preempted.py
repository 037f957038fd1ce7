"""The job babysitter's look at a job Slurm keeps preempting: one card proposing another partition.

A job Betty submitted with ``--requeue`` (a chain's segment, or a one-segment chain) that Slurm
preempted and put back in the queue :data:`PREEMPTIONS` times (its record's ``interruptions``)
waits again under the same job id. The babysitter then asks the advisor where the job would
start soonest (``sbatch --test-only`` on every other partition, :mod:`~betty_jupyter.advisor.placement`)
and proposes moving the waiting job there: one ``cluster_move`` card (``scontrol update
Partition=…``), which keeps the job id, the chain's dependencies and the record. Nothing moves
without a person's approval; Slurm moves only a job that has not started, so a card approved
after the job started again says so in one line.

Once per experiment, across restarts and servers: the record's ``preemption`` moves from absent to
``proposed`` in one ledger transaction before the card opens; what became of the card goes back
into it, and into the wiki's log.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import BettyError
from ...experiments.chain import interruption_count, waiting_segment
from ...experiments.ledger import Experiment, Ledger
from ...wiki import WikiStore
from .. import events as ev
from ..session import SessionSpec
from ..vocabulary import Decision
from .host import open_run_session

if TYPE_CHECKING:
    from ...advisor.estimates import Advice
    from ..loop import AgentSession
    from .definitions import Automation, Run
    from .host import RunHost

log = logging.getLogger(__name__)
PREEMPTIONS = 3
"""How often a job is preempted and requeued before the babysitter proposes moving it."""
PERSON = "job babysitter"


async def propose_move(runner: "RunHost", automation: "Automation", run: "Run", ledger: Ledger,
                       experiment: Experiment) -> str:
    """The run's result: a move proposed (its card waits in a task of its own), or why nothing was proposed."""
    count = interruption_count(experiment)
    if count < PREEMPTIONS:
        return f"{experiment.slug}: interrupted {count}× so far; the babysitter proposes a move after {PREEMPTIONS}"
    job_id = waiting_segment(experiment)
    if job_id is None:
        return f"{experiment.slug}: interrupted {count}×, but no job of it waits now; nothing to move"
    if experiment.preemption is not None:
        return f"{experiment.slug}: a move was proposed before ({experiment.preemption.get('state')})"
    spec = SessionSpec(cluster=experiment.cluster, mode="auto", task=f"{PERSON}: job {job_id} keeps being preempted")
    session = await open_run_session(runner, run, spec, automation.limits.seconds)
    handed_over = False
    try:
        job = await session.context.slurm.job(job_id)
        advice = await _advice(session, experiment, job.partition)
        best = advice.best if advice is not None else None
        record: dict[str, Any] = {"count": count, "job_id": job_id, "from": job.partition,
                                  "estimate": advice.summary() if advice is not None else "no start estimate",
                                  "at": _now()}
        if best is None:
            record.update(state="not proposed", reason="no other partition can start it")
        else:
            record.update(state="proposed", to=best.candidate.partition, task=spec.task, run=run.id)
        claimed = ledger.change_preemption(experiment.slug, lambda now: record if now is None else None)
        if claimed is None:
            return f"{experiment.slug}: a move was proposed before"
        line = (f"job babysitter: job {job_id} ({experiment.slug}) was preempted {count}× on {job.partition}; "
                + (f"proposes moving it to {best.candidate.partition} ({record['estimate']})" if best is not None
                   else "no other partition can start it, nothing proposed"))
        WikiStore(runner.assistant.workspace.wiki).log(line)
        if best is None:
            return line
        task = asyncio.get_running_loop().create_task(
            _propose(session, ledger, experiment.slug, job_id, best.candidate.partition))
        runner.keep(automation.id, task)
        handed_over = True
        return line + "; it waits for a person's approval"
    finally:
        if not handed_over:
            await session.context.close()


async def _advice(session: "AgentSession", experiment: Experiment, partition: str) -> "Advice | None":
    """Where the job's script would start, on every partition but ``partition``; None when it cannot be asked."""
    # lazy: the advisor and the script parser; a run for a failed job needs neither
    from ...advisor.placement import PlacementAdvisor
    from ...cluster.sbatch import SbatchScript

    try:
        script = SbatchScript.parse(experiment.script)
        advisor = PlacementAdvisor(session.context.slurm.transport)
        candidates = [c for c in await advisor.candidates(script) if c.partition != partition]
        return await advisor.advise(script, candidates) if candidates else None
    except BettyError:
        log.exception("Betty's job babysitter could not ask where job %s would start", experiment.job_id)
        return None


async def _propose(session: "AgentSession", ledger: Ledger, slug: str, job_id: str, partition: str) -> None:
    """The ``cluster_move`` card, then what became of it, in the record."""
    answers: list[ev.ApprovalResolved] = []

    def remember(event: "ev.AnyEvent") -> None:
        if isinstance(event, ev.ApprovalResolvedEvent):
            answers.append(event.payload)

    session.stream.subscribe(remember)
    outcome: dict[str, Any]
    try:
        done = await session.run_tool("cluster_move", {"job_id": job_id, "partition": partition}, PERSON,
                                      call_id=f"babysitter_move_{job_id}")
        answer = answers[-1] if answers else None
        if done.ok:
            outcome = {"state": "moved", "approver": answer.approver if answer else None}
        elif answer is not None and answer.decision == Decision.DENIED:
            outcome = {"state": "not moved", "reason": "denied" + (f" by {answer.approver}" if answer.approver else "")}
        else:
            outcome = {"state": "not moved", "reason": (done.summary or "not run").splitlines()[0]}
    except asyncio.CancelledError:
        _settle(ledger, slug, {"state": "not moved", "reason": "the card was withdrawn"})
        raise
    except Exception as error:  # a broken proposal must still be recorded, and never take the runner down
        log.exception("Betty's job babysitter could not propose moving job %s", job_id)
        outcome = {"state": "not moved", "reason": f"Betty failed: {type(error).__name__}: {error}"}
    finally:
        await session.context.close()
    _settle(ledger, slug, outcome)


def _settle(ledger: Ledger, slug: str, outcome: dict[str, Any]) -> None:
    ledger.change_preemption(slug, lambda now: None if now is None else {**now, **outcome, "at": _now()})


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")
