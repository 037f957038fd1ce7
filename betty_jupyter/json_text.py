"""JSON from outside Betty, parsed with its nesting bounded (standard library only).

``json.loads`` recurses once per level: a body of 100,000 ``[`` raises ``RecursionError``,
which no ``except ValueError`` catches, and a value nested a few hundred levels deep parses
but breaks whatever walks it next (a validator, an encoder). :func:`parse_json` refuses both
with :class:`TooDeep`, a ``ValueError`` saying so in one line, so every caller that turns a
``ValueError`` into a 400 or a one-line refusal handles deep nesting too.
"""

from __future__ import annotations

import json
from typing import Any

MAX_NESTING = 64
"""How many levels of objects and lists a value from outside may nest."""


class TooDeep(ValueError):
    """A JSON value nested deeper than Betty reads."""


def parse_json(text: str | bytes | bytearray, max_depth: int = MAX_NESTING, strict: bool = True) -> Any:
    """``json.loads(text)``; :class:`TooDeep` (a ``ValueError``) when it nests more than ``max_depth`` levels.

    ``strict=False`` also takes control characters (a raw line break) inside strings, as ``json.loads`` does.
    """
    try:
        value = json.loads(text, strict=strict)
    except RecursionError:
        value = _UNREADABLE
    if value is _UNREADABLE or nested_deeper(value, max_depth):
        raise TooDeep(f"the JSON nests more than {max_depth} levels of objects and lists")
    return value


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether ``value``'s objects and lists nest more than ``limit`` levels (looked at without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return False


_UNREADABLE = object()
