"""Fields of what fired a run, mapped into its prompt: ``{{ payload.path.to.field }}`` and nothing else.

A placeholder is a dotted path into the run's context (``payload``, ``job``, ``run``,
``automation``); a number picks an item of a list (``payload.commits.0.id``). Nothing is
evaluated: no expressions, filters or calls. A field the delivery lacks renders empty and is
named in a note, so the model knows it is missing rather than empty. Text and numbers render
as they are, lists and objects as compact JSON, each cut at :data:`MAX_FIELD` characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.S)
PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$")
MAX_FIELD = 4000
_MISSING = object()


@dataclass(frozen=True)
class Rendered:
    """A rendered template and the fields it named that were missing."""

    text: str
    missing: list[str] = field(default_factory=list)

    def with_note(self) -> str:
        """The text, followed by a note naming the missing fields (if any)."""
        if not self.missing:
            return self.text
        return f"{self.text}\n\n(Note: {', '.join(self.missing)} {'was' if len(self.missing) == 1 else 'were'} " \
               "not in what fired this run, so left empty.)"


def paths(template: str) -> list[str]:
    """The placeholders of ``template``, stripped, in order."""
    return [match.group(1).strip() for match in PLACEHOLDER.finditer(template)]


def check(template: str, roots: Iterable[str]) -> None:
    """ValueError (one line) when a placeholder is not a plain dotted path starting at one of ``roots``."""
    allowed = tuple(roots)
    for path in paths(template):
        if not PATH.match(path):
            raise ValueError(f"{{{{ {path[:60]} }}}} is not a field path: write e.g. {{{{ payload.repository.name }}}} "
                             "(names and list indexes joined by dots; nothing is evaluated)")
        if path.split(".", 1)[0] not in allowed:
            raise ValueError(f"{{{{ {path} }}}}: this trigger's fields start with {', '.join(allowed)}")
    if "{{" in PLACEHOLDER.sub("", template):
        raise ValueError("a '{{' is never closed with '}}'")


def render(template: str, context: Mapping[str, Any]) -> Rendered:
    """``template`` with each placeholder replaced by its field of ``context`` (missing ones empty, and named)."""
    missing: list[str] = []

    def field_text(match: re.Match[str]) -> str:
        path = match.group(1).strip()
        value = lookup(context, path) if PATH.match(path) else _MISSING
        if value is _MISSING or value is None:
            missing.append(path)
            return ""
        return _text(value)

    return Rendered(PLACEHOLDER.sub(field_text, template), list(dict.fromkeys(missing)))


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (dots into objects, numbers into lists); a sentinel when it is not there."""
    value: Any = context
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (str, int, float)):
        text = str(value)
    else:
        text = json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD] + f"… ({len(text) - MAX_FIELD} more characters)"
