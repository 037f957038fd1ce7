"""The frontmatter schema (documented for people in the seed wiki's ``SCHEMA.md``).

``name``, ``description`` and ``type`` are required; a few optional fields have a known
shape; any other field is allowed and kept as written.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..errors import WikiError
from .page import render_frontmatter

PAGE_TYPES = ("experiment", "cluster", "howto", "persona", "note")

REQUIRED_FIELDS = {
    "name": "a short title, one line",
    "description": "one line saying what the page is for",
    "type": "one of " + ", ".join(PAGE_TYPES),
}

_TEXT_FIELDS = ("cluster", "submitted", "script", "notebook")
_JOB_ID = re.compile(r"\d+(_\d+)?")


def lint(frontmatter: Mapping[Any, Any]) -> list[str]:
    """Every problem with ``frontmatter``, each a short phrase; an empty list when it is valid."""
    return _linted(frontmatter)[0]


def check_frontmatter(name: str, frontmatter: Mapping[Any, Any]) -> str:
    """Raise one WikiError listing every problem with ``frontmatter`` of page ``name``; else its ``---`` block."""
    if not isinstance(frontmatter, Mapping):
        raise WikiError(f"{name}: frontmatter must be a mapping of fields, not {type(frontmatter).__name__}")
    problems, block = _linted(frontmatter)
    if problems:
        raise WikiError(f"{name}: {'; '.join(problems)}")
    return block


def _linted(frontmatter: Mapping[Any, Any]) -> tuple[list[str], str]:
    """The problems with ``frontmatter`` and, when there are none, its rendered ``---`` block (rendered once)."""
    problems = [f"the key {key!r} is not text" for key in frontmatter if not isinstance(key, str)]
    for field, hint in REQUIRED_FIELDS.items():
        problems += _required_problems(field, frontmatter.get(field), hint)
    kind = frontmatter.get("type")
    if isinstance(kind, str) and kind.strip() and kind not in PAGE_TYPES:
        problems.append(f"'type' is {kind!r}, not one of {', '.join(PAGE_TYPES)} (see SCHEMA.md)")
    problems += _optional_problems(frontmatter)
    if problems:
        return problems, ""
    try:
        return [], render_frontmatter(frontmatter)
    except WikiError as error:
        return [str(error)], ""


def _required_problems(field: str, value: Any, hint: str) -> list[str]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return [f"'{field}' is missing ({hint})"]
    if not isinstance(value, str):
        return [f"'{field}' must be text, not {_kind(value)}"]
    if value.splitlines() != [value] or any(ord(char) < 32 for char in value):
        return [f"'{field}' must be one line"]
    return []


def _optional_problems(frontmatter: Mapping[Any, Any]) -> list[str]:
    problems = [f"'{field}' must be text, not {_kind(frontmatter[field])}"
                for field in _TEXT_FIELDS if frontmatter.get(field) is not None
                and not isinstance(frontmatter[field], str)]
    job_id = frontmatter.get("job_id")
    if job_id is not None and (isinstance(job_id, bool) or not _JOB_ID.fullmatch(str(job_id))):
        problems.append(f"'job_id' is {job_id!r}, not a Slurm job id such as '123456' or '123456_7'")
    tags = frontmatter.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
        problems.append("'tags' must be a list of words, e.g. [lora, llama]")
    return problems


def _kind(value: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__)
