"""A continuation chain's timeline as its page, notebook and ``cluster_status`` show it (``experiments/chain.py``
keeps the record)."""

from __future__ import annotations

from ..safe_text import table_cell
from .ledger import Experiment


def timeline_rows(experiment: Experiment) -> list[tuple[str, str, str, str]]:
    """(segment, job, ended, why) for each segment, for the page, the notebook and ``betty jobs``."""
    rows = []
    for number, segment in enumerate((experiment.chain or {}).get("segments") or [], start=1):
        rows.append((str(number), str(segment.get("job_id")), str(segment.get("ended") or "—"),
                     str(segment.get("why") or "")))
    return rows


def page_section(experiment: Experiment) -> str:
    """The chain's timeline as a Markdown table, under the page's Status."""
    chain = experiment.chain or {}
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
    current = next((n for n, s in enumerate(segments, 1) if s.get("why") in ("running", "waiting")), None)
    parts = [f"segment {current} of up to {cap} (job {segments[current - 1]['job_id']})"] if current else []
    ended = (experiment.chain or {}).get("ended")
    if ended:
        parts.append(f"chain ended: {ended}")
    parts += [f"{s['job_id']} {s['why']}" for s in segments if s.get("why") not in ("running", "waiting")]
    return " · " + " · ".join(parts)
