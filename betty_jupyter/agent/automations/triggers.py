"""What fires a run, besides a person and a webhook: a watched job changing state, and a schedule coming due.

Both queue runs with a delivery id (``job:<cluster>:<id>:<state>``, with ``:<n>`` for a job interrupted ``n``
times, ``schedule:<due time>``),
so the same change or the same slot is one run, whichever server or restart saw it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .cron import next_unix

if TYPE_CHECKING:
    from ...experiments.watcher import JobUpdate
    from .definitions import Automation, Run
    from .store import AutomationStore

FIRING = ("idle", "active")
"""Statuses in which triggers fire; a paused or suspended automation's schedule and job triggers are skipped."""


def job_payload(update: "JobUpdate") -> dict[str, Any]:
    """The ``job`` fields a job-triggered run's prompt may name."""
    # lazy: the chain's reading; the server's start loads this module without it
    from ...experiments.chain import interruption_count

    job, experiment = update.job, update.experiment
    return {"id": experiment.job_id, "cluster": experiment.cluster, "state": update.state,
            "previous": update.previous, "name": job.name, "exit_code": job.exit_code, "reason": job.reason,
            "experiment": experiment.slug, "page": f"wiki/{experiment.page}", "notebook": experiment.notebook,
            "interruptions": interruption_count(experiment)}


def fits(automation: "Automation", update: "JobUpdate", interrupted: bool = False) -> bool:
    """Whether ``update`` fires ``automation``'s job trigger. ``REQUEUED`` among its states also fires on a job that
    waits again (``PENDING``) after an interruption (``interrupted``: its record counts one or more)."""
    trigger = automation.trigger
    states = {update.state} | ({"REQUEUED"} if interrupted and update.state == "PENDING" else set())
    return (trigger.kind == "job" and automation.status in FIRING
            and (not trigger.states or bool(states & set(trigger.states)))
            and (trigger.cluster is None or trigger.cluster == update.experiment.cluster))


def job_changed(store: "AutomationStore", update: "JobUpdate") -> list["Run"]:
    """Queue a run of every automation whose job trigger ``update`` fires; the new runs."""
    payload = job_payload(update)
    interrupted = bool(payload["interruptions"])
    delivery = f"job:{payload['cluster']}:{payload['id']}:{payload['state']}" + (
        f":{payload['interruptions']}" if payload["interruptions"] else "")  # each requeue is a change of its own
    queued = []
    for automation in store.all():
        if fits(automation, update, interrupted):
            run, new = store.enqueue(automation.id, "job", payload, delivery)
            if new:
                queued.append(run)
    return queued


def fire_schedules(store: "AutomationStore", now: float | None = None) -> tuple[list["Run"], float | None]:
    """Queue the schedules that came due; (the new runs, when the next one is due).

    A schedule missed while no server ran fires once when one starts (not once per missed
    slot); a paused or suspended one does not fire, and starts counting afresh once resumed.
    """
    now = time.time() if now is None else now
    queued: list[Run] = []
    upcoming: list[float] = []
    for automation in store.all():
        if automation.trigger.kind != "schedule" or not automation.trigger.cron:
            continue
        if automation.status not in FIRING:
            if automation.next_due is not None:
                store.set_next_due(automation.id, None)
            continue
        due = automation.next_due
        if due is not None and due <= now:
            stamp = datetime.fromtimestamp(due).astimezone().isoformat(timespec="minutes")
            run, new = store.enqueue(automation.id, "schedule", {"due": stamp}, f"schedule:{int(due)}")
            queued += [run] if new else []
        if due is None or due <= now:
            due = next_unix(automation.trigger.cron, now)
            store.set_next_due(automation.id, due)
        upcoming.append(due)
    return queued, min(upcoming, default=None)
