"""A continuation chain's timeline as its page, notebook and ``cluster_status`` show it (``experiments/chain.py``
keeps the record)."""

from __future__ import annotations

from typing import Any

from ..safe_text import table_cell
from .ledger import Experiment


def timeline_rows(experiment: Experiment) -> list[tuple[str, str, str, str]]:
    """(segment, job, ended, why) for each segment, for the page, the notebook and ``betty jobs``; a pipeline's
    segments are its steps, named."""
    rows = []
    for number, segment in enumerate((experiment.chain or {}).get("segments") or [], start=1):
        rows.append((str(segment.get("step") or number), str(segment.get("job_id")),
                     str(segment.get("ended") or "—"), str(segment.get("why") or "") + interrupted(segment)))
    return rows


def interrupted(segment: dict[str, Any]) -> str:
    """`` · interrupted 2× (preempted and requeued; runs from 10:01:02, 10:05:00)`` for a segment Slurm stopped and
    started again."""
    runs = [str(run) for run in segment.get("interruptions") or []]
    if not runs:
        return ""
    return f" · interrupted {len(runs)}× (preempted and requeued; runs from {', '.join(runs)})"


PIPELINE = "pipeline"
"""The ``kind`` of a record's ``chain`` that is a pipeline of steps, not segments of one script."""


def is_pipeline(experiment: Experiment) -> bool:
    """Whether the record's chain is a pipeline of steps (``experiments/pipeline.py``)."""
    return (experiment.chain or {}).get("kind") == PIPELINE


def page_section(experiment: Experiment) -> str:
    """The chain's timeline as a Markdown table, under the page's Status (a pipeline's: its steps and edges)."""
    chain = experiment.chain or {}
    if is_pipeline(experiment):
        return _steps_section(experiment)
    ended = chain.get("ended")
    head = (f"One piece of work in up to {chain.get('cap')} segments, each told to checkpoint "
            f"{chain.get('signal_seconds')} s before its limit" + (f"; the chain ended: **{ended}**." if ended
                                                                    else "; still going."))
    rows = "\n".join("| " + " | ".join(table_cell(cell) for cell in row) + " |" for row in timeline_rows(experiment))
    return f"### Segments\n\n{head}\n\n| segment | job | ended | why |\n|---|---|---|---|\n{rows}"


def status_words(experiment: Experiment) -> str:
    """`` · segment 2 of up to 5 (job 43) · 41 time limit → continued`` for the notebook's status line."""
    segments = (experiment.chain or {}).get("segments") or []
    if not segments:
        return ""
    cap = (experiment.chain or {}).get("cap")
    ended = (experiment.chain or {}).get("ended")
    if is_pipeline(experiment):
        parts = [f"step {s.get('step')} (job {s.get('job_id')}) {s.get('why')}" for s in segments]
        return " · " + " · ".join(parts + ([f"pipeline ended: {ended}"] if ended else []))
    current = next((n for n, s in enumerate(segments, 1) if s.get("why") in ("running", "waiting")), None)
    parts = [f"segment {current} of up to {cap} (job {segments[current - 1]['job_id']})"] if current else []
    if ended:
        parts.append(f"chain ended: {ended}")
    parts += [f"{s['job_id']} {s['why']}{interrupted(s)}" for s in segments
              if s.get("why") not in ("running", "waiting") or s.get("interruptions")]
    return " · " + " · ".join(parts)


def edges_text(step: dict[str, Any]) -> str:
    """A recorded step's edges as its page's ``after`` column says them: ``prep, split (aftercorr), singleton``."""
    words = [*map(str, step.get("after") or ()), *(f"{name} (aftercorr)" for name in step.get("aftercorr") or ())]
    if step.get("singleton"):
        words.append("singleton")
    return ", ".join(words) or "—"


def _steps_section(experiment: Experiment) -> str:
    chain = experiment.chain or {}
    after = {str(s.get("name")): edges_text(s) for s in chain.get("steps") or []}
    ended = chain.get("ended")
    head = (f"A pipeline of {len(after)} steps, each queued after the steps it needs (afterok, or aftercorr: task by "
            "task); a step whose earlier "
            "step fails is cancelled" + (f". The pipeline ended: **{ended}**." if ended else "; still going."))
    rows = "\n".join("| " + " | ".join(table_cell(cell) for cell in (step, after.get(step, "—"), job, when, why))
                     + " |" for step, job, when, why in timeline_rows(experiment))
    return f"### Steps\n\n{head}\n\n| step | after | job | ended | why |\n|---|---|---|---|---|\n{rows}"
