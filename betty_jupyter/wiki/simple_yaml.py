"""Frontmatter of text, whole numbers, true/false, null and lists of them, written and read without PyYAML.

A page's frontmatter is rewritten each time its job changes state (a thousand pages when a thousand
jobs end at once). Most frontmatter is ``key: value`` lines of such values, so it is written here by a
small emitter and read back by a small reader, both exact:

- :func:`emit` writes each text plainly where YAML reads it back as that very text, else between single
  quotes when it is printable text of one line (as PyYAML writes it), else double-quoted with JSON's
  escapes (valid YAML), plus ``\\uXXXX`` for what YAML would not read raw.
  Anything else (floats, mappings, nested lists, keys that are not simple words) is left to PyYAML.
- :func:`read` reads only blocks whose every line is one of those forms, and gives what
  PyYAML's safe loader (without timestamps) gives for them; anything else is left to PyYAML.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable, Mapping

import yaml

_PLAIN = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_ ./:()+,=@'-]{0,198}")
"""Text written plainly (when YAML resolves it as text and it holds no ``: `` nor ends in ``:`` or a space)."""
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_SINGLE = re.compile(r"'(?:[^']|'')*'")
_BREAKS = re.compile("[\x85\u2028\u2029]")
"""Line breaks PyYAML writes raw between single quotes, where it reads them back as spaces."""
_ESCAPED = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
"""What JSON leaves raw in a string but YAML would refuse (not printable) or read as a line break."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB]")
"""A JSON escape of half a surrogate pair: JSON joins a pair into one character, YAML does not."""
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_STR = "tag:yaml.org,2002:str"


class _Resolver(yaml.resolver.Resolver):
    """PyYAML's resolver without timestamps, as Betty's loader and dumper use it."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
_RESOLVER = _Resolver()


@functools.lru_cache(maxsize=4096)
def _plain(text: str) -> bool:
    """Whether ``text`` written plainly reads back as that very text."""
    return (_PLAIN.fullmatch(text) is not None and ": " not in text and not text.endswith((":", " "))
            and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR)  # type: ignore[no-untyped-call]


def _scalar(value: Any) -> str | None:
    """``value`` as one YAML scalar, byte for byte as PyYAML writes it; None when it is not one :func:`emit` writes."""
    if isinstance(value, str):
        if _plain(value):
            return value
        if _PLAIN.fullmatch(value) and "'" not in value and ": " not in value and not value.endswith((":", " ")):
            return f"'{value}'"  # plain words YAML would read as another type ('123', 'yes', 'null')
        return None
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and _INTEGER.fullmatch(text := str(value)):
        return text
    return None


def emit(fields: Mapping[Any, Any], dump_text: Callable[[str, Any], str]) -> str | None:
    """The lines of ``fields`` (keys in the given order) as PyYAML writes them, or None when a key or a value is not
    simple: a key that is not a word, a value that is not text, a whole number, true/false, null or a list of them.

    A text :func:`_scalar` does not write (quotes, colons, other scripts), or a list holding one, is written by
    ``dump_text`` (PyYAML's lines for that one key and value); one holding a line break other than ``\\n`` (which
    PyYAML writes raw and reads back as a space) double-quoted with escapes."""
    if not fields:
        return None
    lines = []
    for key, value in fields.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key) or not _plain(key):
            return None
        if isinstance(value, list):
            if not value:
                lines.append(f"{key}: []\n")
                continue
            items = [_scalar(item) if not _has_breaks(item) else _escaped(item) for item in value]
            if None not in items:
                lines.append(f"{key}:\n" + "".join(f"- {item}\n" for item in items))
            elif all(_text(item) and not _has_breaks(item) for item in value):
                lines.append(dump_text(key, value))
            else:
                return None
            continue
        scalar = _scalar(value)
        if scalar is not None:
            lines.append(f"{key}: {scalar}\n")
        elif _text(value):
            lines.append(f"{key}: {_escaped(value)}\n" if _has_breaks(value) else dump_text(key, value))
        else:
            return None
    return "".join(lines)


def _text(value: Any) -> bool:
    """Text that can be written (a lone surrogate cannot be encoded)."""
    return isinstance(value, str) and not _SURROGATE.search(value)


def _has_breaks(value: Any) -> bool:
    return _text(value) and _BREAKS.search(value) is not None


def _escaped(text: str) -> str:
    """``text`` double-quoted with JSON's escapes (valid YAML), and ``\\uXXXX`` for what YAML would not read raw."""
    return _ESCAPED.sub(lambda found: f"\\u{ord(found.group()):04x}", json.dumps(text, ensure_ascii=False))


class _NotSimple(Exception):
    """A block or value :func:`read` leaves to PyYAML."""


def _value(text: str) -> Any:
    if text.startswith('"'):
        if not _QUOTED.fullmatch(text) or _SURROGATE_ESCAPE.search(text):
            raise _NotSimple
        try:
            return json.loads(text)
        except ValueError:
            raise _NotSimple from None
    if text.startswith("'"):
        if not _SINGLE.fullmatch(text):
            raise _NotSimple
        return text[1:-1].replace("''", "'")
    if text in ("null", "true", "false"):
        return {"null": None, "true": True, "false": False}[text]
    if _INTEGER.fullmatch(text):
        return int(text)
    if _plain(text):
        return text
    raise _NotSimple


def read(block: str) -> dict[str, Any] | None:
    """The fields of frontmatter ``block`` when every line of it is one :func:`emit` writes; else None.

    The caller has ruled out what PyYAML alone reads (tabs, byte-order marks, Unicode line breaks) and
    characters YAML refuses."""
    if not block or "\r" in block or not block.endswith("\n"):
        return None
    fields: dict[str, Any] = {}
    items: list[Any] | None = None  # the list the key above opened ("key:" alone on its line)
    key = ""
    try:
        for line in block[:-1].split("\n"):
            if line.startswith("- ") and items is not None:
                if not items:
                    fields[key] = items
                items.append(_value(line[2:]))
                continue
            key, colon, rest = line.partition(":")
            if not colon or not _KEY.fullmatch(key) or not _plain(key):
                return None
            items = None
            if rest == "":
                fields[key], items = None, []  # null, unless items follow
            elif rest.startswith(" "):
                fields[key] = [] if rest == " []" else _value(rest[1:])
            else:
                return None
    except _NotSimple:
        return None
    return fields
