"""Slurm's pending-reason codes in a researcher's words, and what would change each.

Codes are Slurm's own (``squeue``'s ``%r``); the limit families (``QOSMaxGRESPerUser``, ``AssocGrpCpuLimit``,
``QOSGrpNodeLimit`` …) are read by their parts: whose limit (your QOS, your account), of what kind (per person, per
job, for the whole group) and on what (GPUs, CPUs, memory …). A code Betty does not know is shown as Slurm wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    """One pending reason: Slurm's code, what it means, and what would change it ("" when waiting is all)."""

    code: str
    meaning: str
    change: str = ""
    known: bool = True


_PLAIN: dict[str, tuple[str, str]] = {
    "Priority": ("jobs with a higher priority are waiting for the same resources and go first",
                 "a smaller or shorter request can start earlier in a gap (backfill)"),
    "Resources": ("it is next in line, and the resources it asks for are all in use now",
                  "a smaller request, or a partition with idle resources, could start it sooner"),
    "Dependency": ("it waits for the jobs it depends on (--dependency) to reach the state it named", ""),
    "DependencyNeverSatisfied": ("a job it depends on ended in a way that never satisfies the dependency, "
                                 "so it will never start", "cancel it, and submit again without that dependency"),
    "JobHeldUser": ("it is held (submitted with --hold, or held with scontrol hold)",
                    "release it with scontrol release JOBID"),
    "JobHeldAdmin": ("an administrator holds it", "ask your cluster's support why it is held"),
    "BeginTime": ("its start time (--begin) has not come yet", ""),
    "Reservation": ("it asks for a reservation (--reservation) that has not started yet, or is full", ""),
    "ReservationDeleted": ("the reservation it asked for was deleted, so it will not start as is",
                           "submit it again without --reservation, or with another one"),
    "ReqNodeNotAvail": ("a node it needs is unavailable (down, drained, or reserved, e.g. for maintenance)",
                        "a shorter --time may fit before a maintenance reservation; another partition may have nodes"),
    "PartitionDown": ("its partition is down", "submit to another partition"),
    "PartitionInactive": ("its partition is inactive", "submit to another partition"),
    "PartitionNodeLimit": ("it asks for more nodes than its partition allows a job", "ask for fewer nodes"),
    "PartitionTimeLimit": ("its --time is longer than its partition allows", "ask for a shorter --time"),
    "PartitionConfig": ("it asks for something its partition does not offer", "check its request against sinfo"),
    "NodeDown": ("a node it needs is down", ""),
    "BadConstraints": ("its --constraint cannot be met by any node", "change or drop --constraint"),
    "Licenses": ("the licenses it asks for are in use", ""),
    "InvalidAccount": ("its account is not valid for you", "submit with an account you belong to (--account)"),
    "InvalidQOS": ("its QOS is not valid for you", "submit with a QOS you may use (--qos)"),
    "WaitingForScheduling": ("the scheduler has not looked at it yet", ""),
    "None": ("the scheduler has not given a reason yet", ""),
    "Prolog": ("its node is running the prolog before it starts", ""),
    "Cleaning": ("its node is cleaning up after a previous job", ""),
    "BurstBufferResources": ("the burst buffer space it asks for is in use", ""),
    "NonZeroExitCode": ("it was requeued after a non-zero exit", ""),
    "SystemFailure": ("it was held after a failure of the system", "ask your cluster's support"),
    "launch failed requeued held": ("its launch failed and it was held", "ask your cluster's support, then release it"),
}

_LIMIT = re.compile(r"^(?P<who>QOS|Assoc)(?P<kind>Grp|Max)(?P<what>[A-Za-z]+?)(?P<scope>PerUser|PerJob|PerAccount|"
                    r"PerNode|PerAcct)?(?:Limit)?$")
_WHAT = {
    "Cpu": "CPUs", "CPU": "CPUs", "GRES": "GPUs and other generic resources (GRES)", "Mem": "memory", "Node": "nodes",
    "Jobs": "running jobs", "Job": "running jobs", "SubmitJob": "submitted jobs", "SubmitJobs": "submitted jobs",
    "WallDuration": "time", "CPUMinutes": "CPU-minutes", "CpuMinutes": "CPU-minutes", "GRESMinutes": "GPU-minutes",
    "CPURunMinutes": "CPU-minutes of running jobs", "CpuRunMinutes": "CPU-minutes of running jobs",
    "GRESRunMinutes": "GPU-minutes of running jobs", "MemRunMinutes": "memory-minutes of running jobs",
    "Billing": "billing units", "Energy": "energy", "Unk": "resources",
}


def explain(code: str, qos: str = "", account: str = "", job: str = "JOBID") -> Reason:
    """``code`` (squeue's reason, e.g. ``QOSMaxGRESPerUser``) of job ``job`` in plain words; unknown codes keep
    Slurm's word."""
    word = code.split(",", 1)[0].strip() or "None"
    if word in _PLAIN:
        meaning, change = _PLAIN[word]
        return Reason(word, meaning, change.replace("JOBID", job))
    limit = _LIMIT.match(word)
    if limit and limit["what"] in _WHAT:
        return _limit_reason(word, limit, qos, account)
    if word in ("AssociationJobLimit", "AssociationResourceLimit", "AssociationTimeLimit"):
        return Reason(word, f"a limit of your account{_named(account)} holds it back", _WAIT_FOR_OWN)
    if word in ("QOSJobLimit", "QOSResourceLimit", "QOSTimeLimit"):
        return Reason(word, f"a limit of the QOS{_named(qos)} holds it back", _WAIT_FOR_OWN)
    return Reason(word, f"Slurm's reason is {word}", "", known=False)


_WAIT_FOR_OWN = "it starts when your running jobs free their share; a smaller request may fit under the limit now"


def _limit_reason(word: str, limit: re.Match[str], qos: str, account: str) -> Reason:
    what = _WHAT[limit["what"]]
    owner = f"the QOS{_named(qos)}" if limit["who"] == "QOS" else f"your account{_named(account)}"
    scope = limit["scope"] or ""
    if scope == "PerJob" or (limit["kind"] == "Max" and limit["what"] == "WallDuration"):
        return Reason(word, f"it asks for more {what} than {owner} allows one job, so it will not start as is",
                      f"ask for less {what} (cancel and submit again)")
    if scope == "PerUser":
        return Reason(word, f"{owner} lets one person use only so many {what} at once, and your running jobs "
                            "already use them", _WAIT_FOR_OWN)
    if limit["kind"] == "Grp" or scope in ("PerAccount", "PerAcct"):
        return Reason(word, f"everyone under {owner} together has reached its limit on {what}",
                      "it starts when the group's running jobs free their share")
    return Reason(word, f"{owner} limits {what}, and that limit holds it back", _WAIT_FOR_OWN)


def _named(name: str) -> str:
    return f" {name}" if name else ""
