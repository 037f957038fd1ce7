"""A card in the person's words: the few lines they decide on, and every detail as a label and readable text.

A tool's preview says exactly what would run (its ``text``, which the card's digest binds) and holds its
details as values (a job id, a grid, a list of paths). Every face shows a card the same way: the lines
from :func:`summary_lines` first, then, one click away, the exact text and the details from
:func:`detail_facts`. Neither is part of the digest; both are made here, once, for the panel and the
notebook alike.
"""

from __future__ import annotations

from typing import Any, Mapping

MAX_SUMMARY_LINES = 3

_LABELS = {
    "argv": "arguments", "at_once": "at most at once", "gpu_memory": "GPU memory", "job_id": "job",
    "paths_checked": "paths checked", "points": "tasks", "grid": "parameters", "page": "wiki page",
    "runs in": "environment", "sha256": "notebook digest", "script_path": "script path",
}
"""Labels that are not just the detail's name with spaces for underscores."""

_NOT_SHOWN = frozenset({"argv", "gpu_estimate", "calls", "partitions"})
"""Details a face shows otherwise: the command line itself, the estimate's own breakdown, a plan's steps, the
cluster's partitions (the edit form's choices)."""


def label(name: str) -> str:
    """A detail's name as a person reads it: ``script path``, not ``script_path``."""
    return _LABELS.get(name, name.replace("_", " "))


def summary_lines(kind: str, title: str, text: str, details: Mapping[str, Any]) -> list[str]:
    """What a person decides on, in at most three lines: what runs and where (with its resources), what it
    replaces or costs, and what it sends; the exact text and details stay one click away."""
    lines = [title]
    if details.get("refused") is True:
        lines.append("Betty will not run this: " + _first_line(text))
    elif kind == "command" and "\n" not in text.strip() and len(text) <= 200:
        lines.append("runs: " + text.strip())
    if details.get("replaces") not in (None, "", {}):
        lines.append("replaces " + _replaced(details["replaces"]))
    if isinstance(details.get("grid"), list) and details["grid"]:
        lines.append("parameters: " + "; ".join(_parameter(item) for item in details["grid"]))
    if isinstance(details.get("gpu_memory"), str) and details["gpu_memory"]:
        memory = details["gpu_memory"]
        lines.append(memory if memory.lower().startswith("gpu memory") else "GPU memory: " + memory)
    if isinstance(details.get("crosses the wire"), str) and details["crosses the wire"]:
        sent = "; ".join(details["crosses the wire"].split("\n"))
        lines.append("sends " + (sent if len(sent) <= 160 else sent[:159] + "…"))
    elif "environment" in details and "cluster" in details:
        sent = "the script and the notebook" if "sha256" in details else "the script"
        lines.append(f"sends {sent} to {details['cluster']} (environment and paths below)")
    if "steps" in details and "granted" in details:
        lines.append(f"{details['steps']} steps; {details['granted']} of them need no answer")
    return lines[:MAX_SUMMARY_LINES]


_MAIL_EVENTS = {
    "BEGIN": "starts", "END": "ends", "FAIL": "fails", "REQUEUE": "is requeued", "INVALID_DEPEND": "can never start "
    "(a dependency failed)", "STAGE_OUT": "finishes staging out", "TIME_LIMIT": "reaches its time limit",
    "TIME_LIMIT_90": "reaches 90% of its time limit", "TIME_LIMIT_80": "reaches 80% of its time limit",
    "TIME_LIMIT_50": "reaches 50% of its time limit", "ALL": "starts, ends, fails or is requeued",
}
"""Slurm's ``--mail-type`` events, each as what happens to the job."""


def mail_words(mail_type: str | None, mail_user: str | None) -> str:
    """A script's ``--mail-type``/``--mail-user`` in words: ``Slurm mails ada@uni.edu when the job starts or
    ends``; empty when it asks for no mail."""
    if not mail_type:
        return ""
    types = [item.strip().upper() for item in mail_type.split(",") if item.strip()]
    if not types or types == ["NONE"]:
        return "Slurm sends no mail"
    events = [_MAIL_EVENTS.get(item, item.lower()[:40]) for item in types if item not in ("NONE", "ARRAY_TASKS")]
    who = mail_user.strip()[:120] if mail_user and mail_user.strip() else "you (the address Slurm has for your login)"
    each = " (for each array task)" if "ARRAY_TASKS" in types else ""
    when = ", ".join(events[:-1]) + (" or " if len(events) > 1 else "") + events[-1] if events else "something happens"
    return f"Slurm mails {who} when the job {when}{each}"


def detail_facts(details: Mapping[str, Any]) -> list[tuple[str, str, list[list[str]] | None]]:
    """Each detail as (label, text, table): values in words (yes/no, one item a line, ``name: value``),
    a markdown table as its rows (the header first); what says nothing (empty, ``refused: no``) is left out."""
    facts = []
    for name, value in details.items():
        if name in _NOT_SHOWN or value in (None, "", [], {}) or (name == "refused" and value is False):
            continue
        table = _table(value) if isinstance(value, str) else None
        facts.append((label(name), "" if table else _words(name, value), table))
    return facts


def _words(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name == "replaces":
        return _replaced(value)
    if name == "grid" and isinstance(value, list):
        return "\n".join(_parameter(item) for item in value)
    if isinstance(value, list):
        return "\n".join(_item(item) for item in value)
    if isinstance(value, Mapping):
        return "\n".join(f"{label(str(key))}: {_item(item)}" for key, item in value.items() if item not in (None, ""))
    return str(value)


def _item(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{label(str(key))} {item}" for key, item in value.items() if item not in (None, ""))
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return _words("", value)


def _replaced(value: Any) -> str:
    """``job 42 (experiment train-2)`` from a resubmission's ``replaces`` (a mapping, or a job id alone)."""
    if not isinstance(value, Mapping):
        return f"job {value}"
    job = f"job {value.get('job_id')}" if value.get("job_id") else "a job"
    named = value.get("experiment") or value.get("slug")
    return f"{job} ({named})" if named else job


def _parameter(item: Any) -> str:
    """``lr: 0.1, 0.3`` from a grid's ``lr=0.1,0.3``."""
    name, equals, values = str(item).partition("=")
    return f"{name} = {', '.join(values.split(','))}" if equals else str(item)


def _table(text: str) -> list[list[str]] | None:
    """A markdown table's rows (header first, the rule left out), or None when ``text`` is not one."""
    lines = text.strip().split("\n")
    if len(lines) < 2 or not all(line.startswith("|") and line.endswith("|") for line in lines):
        return None
    if set(lines[1].replace("|", "").replace(":", "").strip()) - {"-", " "}:
        return None
    return [_cells(line) for line in (lines[0], *lines[2:])]


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, their backslash escapes undone (``\\|`` is a pipe inside a cell)."""
    cells, cell, escaped = [], "", False
    for char in line.strip()[1:]:
        if escaped:
            cell, escaped = cell + char, False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return cells


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]
