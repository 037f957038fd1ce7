"""The cells that ran on a node kernel (``%betty kernel``), noted in its allocation's experiment record.

Each cell the notebook hands to the node's kernel is noted in the ledger (:func:`note_cell`): when it
ran, for how long, whether it raised, its first line (bounded) and a digest of its whole text. The
record keeps the counts and the latest :data:`KEPT_CELLS` cells, so a kernel used all day stays small.
The experiment's page shows them with the allocation's cost, GPU-hours at its size times its elapsed
time (:func:`page_section`); its efficiency is added by the watcher once the job ends.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..safe_text import markdown_text, table_cell
from .ledger import Experiment, Ledger

if TYPE_CHECKING:
    from ..cluster.jobs import Job

KEPT_CELLS = 50
"""How many of the latest cells the record keeps; the counts cover every cell."""
SHOWN_CELLS = 20
"""How many of the latest cells the page lists."""
_LINE_CHARS = 120


def started_record() -> dict[str, Any]:
    """The record of a node kernel no cell has run on yet."""
    return {"count": 0, "failed": 0, "seconds": 0.0, "first": None, "last": None, "cells": []}


def cell_entry(code: str, at: datetime, seconds: float, ok: bool) -> dict[str, Any]:
    """One cell as noted: when, how long, whether it finished without raising, its first line and its digest."""
    line = next((text.strip() for text in code.splitlines() if text.strip()), "")
    if len(line) > _LINE_CHARS:
        line = line[:_LINE_CHARS - 1] + "…"
    return {"at": at.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(max(seconds, 0.0), 3), "ok": ok,
            "line": line, "digest": hashlib.sha256(code.encode("utf-8", "replace")).hexdigest()[:12]}


def noted(record: dict[str, Any] | None, entry: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``entry`` added: the counts go up, only the latest :data:`KEPT_CELLS` cells are kept."""
    before = record if isinstance(record, dict) else started_record()
    cells = [cell for cell in before.get("cells") or [] if isinstance(cell, dict)][-(KEPT_CELLS - 1):]
    return {"count": int(before.get("count") or 0) + 1, "failed": int(before.get("failed") or 0) + (not entry["ok"]),
            "seconds": round(float(before.get("seconds") or 0.0) + entry["seconds"], 3),
            "first": before.get("first") or entry["at"], "last": entry["at"], "cells": [*cells, entry]}


def note_cell(ledger: Ledger, slug: str, code: str, at: datetime, seconds: float, ok: bool) -> Experiment | None:
    """Note one cell that ran on the node kernel of experiment ``slug`` (None when the ledger has no such one)."""
    entry = cell_entry(code, at, seconds, ok)
    return ledger.change_node_cells(slug, lambda record: noted(record, entry))


def gpu_hours(job: "Job") -> float | None:
    """The allocation's cost so far: its GPUs times its elapsed time, in hours (None before it started)."""
    if job.elapsed is None:
        return None
    return job.gpus * job.elapsed.total_seconds() / 3600


def cost_words(job: "Job | None") -> str:
    """``0.50 GPU-hours (2 GPUs × 0:15:00)``; "" while nothing is known."""
    hours = gpu_hours(job) if job is not None else None
    if job is None or hours is None or job.elapsed is None:
        return ""
    elapsed = str(job.elapsed).split(".")[0]
    size = f"{job.gpus} GPU{'s' if job.gpus != 1 else ''}"
    return f"{hours:.2f} GPU-hours ({size} × {elapsed})"


def page_section(experiment: Experiment, job: "Job | None") -> str:
    """The page's section on the node kernel: how many cells ran and when, the cost, the latest cells."""
    record = experiment.node_cells or started_record()
    count, failed = int(record.get("count") or 0), int(record.get("failed") or 0)
    lines = ["## Cells on the node kernel", ""]
    if count:
        raised = f", {failed} raised" if failed else ""
        lines.append(markdown_text(f"{count} cell{'s' if count != 1 else ''} ran on this allocation{raised}, "
                                   f"from {_when(record.get('first'))} to {_when(record.get('last'))}."))
    else:
        lines.append("No cell has run on this allocation yet.")
    cost = cost_words(job)
    if cost:
        lines += ["", f"Cost: {markdown_text(cost)}."]
    cells = [cell for cell in record.get("cells") or [] if isinstance(cell, dict)][-SHOWN_CELLS:]
    if cells:
        lines += ["", "| ran at | seconds | outcome | first line | digest |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(table_cell(value) for value in (
            _when(cell.get("at")), cell.get("seconds", ""), "ok" if cell.get("ok") else "raised",
            cell.get("line", ""), cell.get("digest", ""))) + " |" for cell in cells]
        if count > len(cells):
            lines += ["", f"The latest {len(cells)} of {count} cells."]
    return "\n".join(lines)


def _when(value: object) -> str:
    return str(value or "—").replace("T", " ")
