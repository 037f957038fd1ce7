"""Pipelines: several steps (preprocess → train → evaluate), each its own batch script, each queued after the steps it
needs, submitted together and recorded as one experiment.

Every step is submitted at approval; a step that needs others gets ``--dependency=afterok:<their jobs>`` and
``--kill-on-invalid-dep=yes``: when a step it needs fails (or is cancelled), Slurm cancels it instead of leaving it
pending for good with the reason ``DependencyNeverSatisfied``. A step still seen pending with that reason (a site
whose Slurm ignores the option) is one :func:`stranded` names, and Betty cancels it when it reads the pipeline.

Everything here is pure: the steps as checked, the card's figures, and each step's outcome read from Slurm's states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import UsageError

if TYPE_CHECKING:
    from .jobs import Job

MAX_STEPS = 20
STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
NEVER_SATISFIED = "DependencyNeverSatisfied"
"""The reason Slurm gives a pending job whose dependency can no longer be met."""
KILL_INVALID = "--kill-on-invalid-dep=yes"
_NOT_OK = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "DEADLINE",
                     "BOOT_FAIL"})


@dataclass(frozen=True)
class Step:
    """One step of a pipeline: its name, its script's text, and the earlier steps it runs after (``afterok``)."""

    name: str
    script: str
    after: tuple[str, ...] = ()


def checked_steps(steps: Sequence[Step]) -> list[Step]:
    """The steps, each named once and needing only earlier steps; UsageError in one line otherwise."""
    if not 2 <= len(steps) <= MAX_STEPS:
        raise UsageError(f"pipeline: give 2 to {MAX_STEPS} steps, not {len(steps)}")
    seen: list[str] = []
    for step in steps:
        if not STEP_NAME.match(step.name):
            raise UsageError(f"pipeline: step name {step.name[:60]!r}: use 1 to 40 letters, digits, '-' or '_'")
        if step.name in seen:
            raise UsageError(f"pipeline: two steps are named {step.name!r}")
        unknown = [name for name in step.after if name not in seen]
        if unknown:
            raise UsageError(f"pipeline: step {step.name!r} runs after {', '.join(map(repr, unknown))}, "
                             "which is not an earlier step")
        seen.append(step.name)
    return list(steps)


HEADER = re.compile(r"^# ==== step (?P<name>\S+)(?: \((?:after (?P<after>[^)]*)|(?P<first>starts at once))\))? ====[ \t]*$",
                    re.MULTILINE)
"""The line above each step's script, as the card shows it: ``# ==== step train (after prep) ====``."""


def steps_from_text(text: str) -> list[dict[str, Any]]:
    """The steps of a text that is every step's script under its header line (:data:`HEADER`, the card's form):
    ``name``, ``script`` and ``after`` (None when the header names none: the step before). UsageError when the text
    has no header line first."""
    found = list(HEADER.finditer(text))
    if not found or text[:found[0].start()].strip():
        raise UsageError("pipeline: start each step with a line '# ==== step NAME ====' (or '# ==== step NAME "
                         "(after A, B) ====') above its script")
    steps: list[dict[str, Any]] = []
    for number, header in enumerate(found):
        end = found[number + 1].start() if number + 1 < len(found) else len(text)
        after: list[str] | None = [] if header["first"] else None
        if header["after"] is not None:
            after = [name.strip() for name in header["after"].split(",") if name.strip()]
        steps.append({"name": header["name"], "script": text[header.end():end].strip("\n") + "\n", "after": after})
    return steps


def linear(names: Sequence[str], after: dict[str, tuple[str, ...]] | None = None) -> dict[str, tuple[str, ...]]:
    """Each step's earlier steps: the one before it unless ``after`` names them (``()``: it starts at once)."""
    given = after or {}
    return {name: given.get(name, (names[index - 1],) if index else ()) for index, name in enumerate(names)}


def dependency_options(after_jobs: Sequence[str]) -> list[str]:
    """The sbatch options that queue a step behind the jobs of the steps it needs (none: it starts at once)."""
    if not after_jobs:
        return []
    return [f"--dependency=afterok:{':'.join(after_jobs)}", KILL_INVALID]


def card(steps: Sequence[Step]) -> dict[str, Any]:
    """The pipeline as a card shows it: each step's edges, and what happens to later steps when one fails."""
    edges = [f"{step.name} after {' and '.join(step.after)} (--dependency=afterok)" if step.after
             else f"{step.name} starts at once" for step in steps]
    return {
        "steps": " → ".join(step.name for step in steps) + f": {len(steps)} jobs, all submitted now; one approval "
                                                            "covers them all",
        "edges": "; ".join(edges),
        "when a step fails": "the steps after it never run: Slurm cancels them (--kill-on-invalid-dep=yes), and Betty "
                             "cancels any it still finds waiting on a failed step",
    }


def step_outcomes(steps: Sequence[dict[str, Any]], jobs: dict[str, "Job"]) -> tuple[list[dict[str, Any]], str | None]:
    """Each step's record (``step``, ``job_id``, ``state``, ``ended``, ``why``) and how the pipeline ended (None: not
    yet). ``why``: ``waiting``, ``running``, ``done``, ``failed``, ``cancelled``, ``not run: <step> failed``."""
    records: list[dict[str, Any]] = []
    why_of: dict[str, str] = {}
    for step in steps:
        ident = str(step.get("job_id"))
        job = jobs.get(ident)
        state = job.state.value if job is not None else "UNKNOWN"
        failed_before = next((name for name in step.get("after") or () if why_of.get(name, "") not in
                              ("done", "running", "waiting")), None)
        if job is None or not job.state.finished:
            why = "running" if state == "RUNNING" else "waiting"
        elif state == "COMPLETED":
            why = "done"
        elif failed_before is not None and state == "CANCELLED":
            why = f"not run: {failed_before} {'failed' if why_of[failed_before] == 'failed' else 'did not finish'}"
        elif state == "CANCELLED":
            why = "cancelled"
        else:
            why = "failed"
        why_of[str(step.get("name"))] = why
        records.append({"step": step.get("name"), "job_id": ident, "state": state,
                        "ended": job.ended.strftime("%Y-%m-%d %H:%M:%S") if job and job.ended else None, "why": why})
    whys = [record["why"] for record in records]
    if any(why in ("running", "waiting") for why in whys):
        return records, None
    return records, "done" if all(why == "done" for why in whys) else "failed"


def stranded(steps: Sequence[dict[str, Any]], jobs: dict[str, "Job"]) -> list[str]:
    """The jobs of steps still pending on a step that ended without success: they would never run."""
    ended_badly = {str(step.get("name")) for step in steps
                   if (job := jobs.get(str(step.get("job_id")))) is not None and job.state.value in _NOT_OK}
    found = []
    for step in steps:
        job = jobs.get(str(step.get("job_id")))
        if job is None or job.state.value != "PENDING":
            continue
        if (job.reason or "").startswith(NEVER_SATISFIED) or ended_badly & set(step.get("after") or ()):
            found.append(str(step.get("job_id")))
    return found


def deciding_step(records: Iterable[dict[str, Any]]) -> str | None:
    """The job that speaks for the pipeline now: a running step's, else a waiting one's, else the first that did not
    succeed, else the last."""
    listed = list(records)
    for wanted in (("running",), ("waiting",), ("failed", "cancelled")):
        for record in listed:
            if record["why"] in wanted:
                return str(record["job_id"])
    return str(listed[-1]["job_id"]) if listed else None
