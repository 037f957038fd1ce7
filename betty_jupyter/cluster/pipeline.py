"""Pipelines: several steps (preprocess → train → evaluate), each its own batch script, each queued after the steps it
needs, submitted together and recorded as one experiment.

Every step is submitted at approval; a step that needs others gets ``--dependency=afterok:<their jobs>`` and
``--kill-on-invalid-dep=yes``. An array step may instead run after an earlier array of the same size task by task
(``aftercorr``: its task 3 starts once that array's task 3 succeeded), and a step may ask ``singleton`` (it waits
until no other job of the person with its job name runs). When a step it needs fails (or is cancelled), Slurm
cancels it instead of leaving it pending for good with the reason ``DependencyNeverSatisfied``. A step still seen
pending with that reason (a site whose Slurm ignores the option) is one :func:`stranded` names, and Betty cancels
it when it reads the pipeline.

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


AFTEROK = "afterok"
AFTERCORR = "aftercorr"
SINGLETON = "singleton"
EDGE_WORDS = {AFTEROK: "", AFTERCORR: ": task by task, each once the same task succeeded"}
"""How the card says each kind of edge."""


@dataclass(frozen=True)
class Step:
    """One step of a pipeline: its name, its script's text, the earlier steps it runs after once they succeeded
    (``afterok``) or task by task (``aftercorr``: both arrays of one size), whether it waits for no other job of its
    name to run (``singleton``), how many tasks it is (an array's; 1 otherwise) and the files it leaves for the
    steps after it (``outputs``: checked on the cluster when it ends)."""

    name: str
    script: str
    after: tuple[str, ...] = ()
    aftercorr: tuple[str, ...] = ()
    singleton: bool = False
    tasks: int | None = None
    outputs: tuple[str, ...] = ()

    def edges(self) -> list[tuple[str, str]]:
        """(earlier step, kind) for each step this one runs after."""
        return [(name, AFTEROK) for name in self.after] + [(name, AFTERCORR) for name in self.aftercorr]


def needs(step: dict[str, Any]) -> list[str]:
    """The earlier steps a recorded step runs after, of either kind."""
    return [*(step.get("after") or ()), *(step.get("aftercorr") or ())]


def checked_steps(steps: Sequence[Step], least: int = 2) -> list[Step]:
    """The steps, each named once and needing only earlier steps; UsageError in one line otherwise. ``least``: 1
    for the steps that run a failed step of a pipeline again with those after it."""
    if not least <= len(steps) <= MAX_STEPS:
        raise UsageError(f"pipeline: give {least} to {MAX_STEPS} steps, not {len(steps)}")
    seen: list[str] = []
    for step in steps:
        if not STEP_NAME.match(step.name):
            raise UsageError(f"pipeline: step name {step.name[:60]!r}: use 1 to 40 letters, digits, '-' or '_'")
        if step.name in seen:
            raise UsageError(f"pipeline: two steps are named {step.name!r}")
        unknown = [name for name, _ in step.edges() if name not in seen]
        if unknown:
            raise UsageError(f"pipeline: step {step.name!r} runs after {', '.join(map(repr, unknown))}, "
                             "which is not an earlier step")
        both = set(step.after) & set(step.aftercorr)
        if both:
            raise UsageError(f"pipeline: step {step.name!r} runs after {sorted(both)[0]!r} both afterok and "
                             "aftercorr; name it once")
        _check_corr(step, {earlier.name: earlier for earlier in steps})
        seen.append(step.name)
    return list(steps)


def _check_corr(step: Step, by_name: dict[str, Step]) -> None:
    """aftercorr only between arrays of one size: task N of this step runs after task N of the earlier one (sizes
    not known yet, None, are checked once the scripts are read)."""
    for name in step.aftercorr:
        mine, theirs = step.tasks, by_name[name].tasks
        if mine is None or theirs is None:
            continue
        if mine < 2 or theirs < 2:
            plain = step.name if mine < 2 else name
            raise UsageError(f"pipeline: step {step.name!r} runs aftercorr {name!r}, but {plain!r} is not a job "
                             "array (aftercorr pairs the tasks of two arrays; use after)")
        if mine != theirs:
            raise UsageError(f"pipeline: step {step.name!r} ({mine} tasks) runs aftercorr {name!r} ({theirs} "
                             "tasks); aftercorr needs arrays of the same size")


HEADER = re.compile(r"^# ==== step (?P<name>\S+)(?: \((?P<clauses>[^)\n]*)\))? ====[ \t]*$", re.MULTILINE)
"""The line above each step's script, as the card shows it: ``# ==== step train (after prep) ====``; its clauses,
``; ``-separated: ``after A, B``, ``aftercorr A``, ``starts at once``, ``singleton``, ``outputs PATH, PATH``."""


def steps_from_text(text: str) -> list[dict[str, Any]]:
    """The steps of a text that is every step's script under its header line (:data:`HEADER`, the card's form):
    ``name``, ``script``, ``after`` (None when the header names none: the step before) and, when the header has
    them, ``aftercorr``, ``singleton`` and ``outputs``. UsageError when the text has no header line first or a
    clause Betty does not know."""
    found = list(HEADER.finditer(text))
    if not found or text[:found[0].start()].strip():
        raise UsageError("pipeline: start each step with a line '# ==== step NAME ====' (or '# ==== step NAME "
                         "(after A, B) ====') above its script")
    steps: list[dict[str, Any]] = []
    for number, header in enumerate(found):
        end = found[number + 1].start() if number + 1 < len(found) else len(text)
        step: dict[str, Any] = {"name": header["name"], "script": text[header.end():end].strip("\n") + "\n",
                                "after": None}
        for clause in (header["clauses"] or "").split(";"):
            _read_clause(step, clause.strip())
        if step["after"] is None and step.get("aftercorr"):
            step["after"] = []
        steps.append(step)
    return steps


def _read_clause(step: dict[str, Any], clause: str) -> None:
    word, _, rest = clause.partition(" ")
    names = [name.strip() for name in rest.split(",") if name.strip()]
    if not clause:
        return
    if clause == "starts at once":
        step["after"] = []
    elif clause == SINGLETON:
        step["singleton"] = True
    elif word in ("after", AFTERCORR, "outputs"):
        step["after" if word == "after" else word] = names
    else:
        raise UsageError(f"pipeline: step {step['name']!r}: {clause[:60]!r} is not one of after A, aftercorr A, "
                         "starts at once, singleton, outputs PATH")


def linear(names: Sequence[str], after: dict[str, tuple[str, ...]] | None = None) -> dict[str, tuple[str, ...]]:
    """Each step's earlier steps: the one before it unless ``after`` names them (``()``: it starts at once)."""
    given = after or {}
    return {name: given.get(name, (names[index - 1],) if index else ()) for index, name in enumerate(names)}


def dependency_options(after_jobs: Sequence[str], corr_jobs: Sequence[str] = (), singleton: bool = False) -> list[str]:
    """The sbatch options that queue a step behind the jobs of the steps it needs (none: it starts at once)."""
    parts = [f"{kind}:{':'.join(jobs)}" for kind, jobs in ((AFTEROK, after_jobs), (AFTERCORR, corr_jobs)) if jobs]
    if singleton:
        parts.append(SINGLETON)
    if not parts:
        return []
    return [f"--dependency={','.join(parts)}", *([KILL_INVALID] if after_jobs or corr_jobs else [])]


def header_clauses(step: Step) -> str:
    """What the header line says of a step's edges: ``after prep; singleton`` (``starts at once`` when none)."""
    clauses = ([f"after {', '.join(step.after)}"] if step.after else []) + \
        ([f"{AFTERCORR} {', '.join(step.aftercorr)}"] if step.aftercorr else [])
    clauses = clauses or ["starts at once"]
    if step.singleton:
        clauses.append(SINGLETON)
    if step.outputs:
        clauses.append(f"outputs {', '.join(step.outputs)}")
    return "; ".join(clauses)


def card(steps: Sequence[Step]) -> dict[str, Any]:
    """The pipeline as a card shows it: each step's edges, and what happens to later steps when one fails."""
    edges = []
    for step in steps:
        kinds = [f"{step.name} {'after' if kind == AFTEROK else 'aftercorr'} {' and '.join(names)} "
                 f"(--dependency={kind}{EDGE_WORDS[kind]})" for kind, names in
                 ((AFTEROK, step.after), (AFTERCORR, step.aftercorr)) if names]
        edges.append("; ".join(kinds) if kinds else f"{step.name} starts at once")
        if step.singleton:
            edges[-1] += " (--dependency=singleton: once no other job named like it runs)"
    shown = {
        "steps": " → ".join(step.name for step in steps) + f": {len(steps)} jobs, all submitted now; one approval "
                                                            "covers them all",
        "edges": "; ".join(edges),
        "when a step fails": "the steps after it never run: Slurm cancels them (--kill-on-invalid-dep=yes), and Betty "
                             "cancels any it still finds waiting on a failed step",
    }
    outputs = [f"{step.name} leaves {', '.join(step.outputs)}" for step in steps if step.outputs]
    if outputs:
        shown["outputs checked"] = ("; ".join(outputs) + ": checked on the cluster when the step ends; a missing one "
                                    "stops the steps after it")
    return shown


def step_outcomes(steps: Sequence[dict[str, Any]], jobs: dict[str, "Job"]) -> tuple[list[dict[str, Any]], str | None]:
    """Each step's record (``step``, ``job_id``, ``state``, ``ended``, ``why``) and how the pipeline ended (None: not
    yet). ``why``: ``waiting``, ``running``, ``done``, ``failed``, ``cancelled``, ``not run: <step> failed``."""
    records: list[dict[str, Any]] = []
    why_of: dict[str, str] = {}
    for step in steps:
        ident = str(step.get("job_id"))
        job = jobs.get(ident)
        state = job.state.value if job is not None else "UNKNOWN"
        failed_before = next((name for name in needs(step) if why_of.get(name, "") not in
                              ("done", "running", "waiting")), None)
        if job is None or not job.state.finished:
            why = "running" if state == "RUNNING" else "waiting"
        elif state == "COMPLETED":
            why = f"done, but {step['missing']}" if step.get("missing") else "done"
        elif failed_before is not None and state == "CANCELLED":
            why = f"not run: {_short_of(failed_before, why_of[failed_before])}"
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


def _short_of(name: str, why: str) -> str:
    if why == "failed":
        return f"{name} failed"
    return f"{name}'s {why.removeprefix('done, but ')}" if why.startswith("done, but ") else f"{name} did not finish"


def dependents(steps: Sequence[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The recorded steps that run after step ``name``, directly or through others, in order."""
    behind = {name}
    found = []
    for step in steps:
        if behind & set(needs(step)):
            behind.add(str(step.get("name")))
            found.append(step)
    return found


def outputs_due(steps: Sequence[dict[str, Any]], jobs: dict[str, "Job"]) -> list[dict[str, Any]]:
    """The recorded steps that name outputs, ended well, and whose outputs were not looked for yet."""
    return [step for step in steps if step.get("outputs") and "missing" not in step
            and (job := jobs.get(str(step.get("job_id")))) is not None and job.state.value == "COMPLETED"]


def stranded(steps: Sequence[dict[str, Any]], jobs: dict[str, "Job"]) -> list[str]:
    """The jobs of steps still pending on a step that ended without success: they would never run."""
    ended_badly = {str(step.get("name")) for step in steps
                   if step.get("missing")
                   or (job := jobs.get(str(step.get("job_id")))) is not None and job.state.value in _NOT_OK}
    found = []
    for step in steps:
        job = jobs.get(str(step.get("job_id")))
        if job is None or job.state.value != "PENDING":
            continue
        if (job.reason or "").startswith(NEVER_SATISFIED) or ended_badly & set(needs(step)):
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
