"""The frontmatter cache: parsed frontmatter kept in the workspace's ``.betty/``, so listing a wiki
of thousands of pages parses only the pages that changed.

An entry is keyed by a hash of the frontmatter block's own text, so an edited page misses the
cache whatever its size and modification time say (an edit within the file system's clock
granularity included), and a page moved or copied elsewhere hits it. Only plain values
(text, numbers, true/false, lists, mappings with text keys; at most :data:`MAX_VALUES` of them)
are kept; a page with anything else is parsed every time, as is a page when the cache is
missing, unreadable (a link, a folder, over :data:`MAX_CACHE_BYTES`), corrupt, written by
another version, or when its entry is not a mapping: the cache is an optimisation, never a
source of truth. It is written whole and atomically, so concurrent writers leave one
complete file (the last one's).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import WikiError
from .files import write_atomically
from .page import LOADER, Page, find_frontmatter, parse_frontmatter

CACHE_FILE = "wiki-frontmatter.json"
"""The cache's file name in the workspace's ``.betty/`` folder."""

MAX_VALUES = 10_000
"""The most values (keys, items, scalars) a cached frontmatter holds; a larger one is parsed every time."""

MAX_CACHE_BYTES = 256 * 1024 * 1024
"""A cache file larger than this is not read (and is rewritten)."""

_VERSION = f"1 {LOADER} pyyaml-{yaml.__version__}"
_BROKEN = "broken"  # the value of an entry whose frontmatter does not parse: listed with none
_MAX_DEPTH = 32
_MAX_INT_BITS = 64
_MAX_ENTRIES = 100_000  # beyond this, a partial read (a search, a folder) keeps only what it read


class FrontmatterCache:
    """Parsed frontmatter by the hash of its text, loaded from ``path`` (None: keep nothing between runs)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries = _load(path) if path is not None else {}
        self._seen: dict[str, Any] = {}
        self._changed = False

    def page(self, name: str, text: str) -> Page:
        """Page ``name`` of stored ``text``, as :func:`.page.parse_page_leniently` reads it."""
        found = find_frontmatter(text)
        if found is None:
            return Page(name, {}, text, source=text)
        block, body_start = found
        key = hashlib.blake2b(block.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        entry = self._known(key)
        if entry is None:
            parsed = self._parse(name, block)
            entry = _checked(parsed)
            if entry is None:
                return Page(name, parsed, text[body_start:], source=text)
            self._seen[key], self._changed = entry, True
        if entry == _BROKEN:
            return Page(name, {}, text, source=text)
        return Page(name, entry, text[body_start:], source=text)

    def save(self, complete: bool) -> None:
        """Write the cache when it changed: ``complete`` when every page was read, so entries no page uses go."""
        if self.path is None:
            return
        if complete and len(self._seen) != len(self._entries):
            self._changed = True
        if not self._changed:
            return
        entries = self._seen if complete or len(self._entries) > _MAX_ENTRIES else {**self._entries, **self._seen}
        try:
            write_atomically(self.path, json.dumps({"version": _VERSION, "pages": entries}, separators=(",", ":")))
        except OSError:
            return  # a read-only .betty/: the next run parses again
        self._entries, self._changed = dict(entries), False

    def _known(self, key: str) -> Any:
        """The entry cached under ``key`` as an object no other page holds; None when there is none."""
        if key in self._seen:
            return _checked(self._seen[key])  # a second page with the same frontmatter gets its own copy
        entry = self._entries.get(key)
        if entry == _BROKEN or type(entry) is dict:  # fresh from the file: JSON values, held by no page yet
            self._seen[key] = entry
            return entry
        return None

    @staticmethod
    def _parse(name: str, block: str) -> Any:
        try:
            return parse_frontmatter(name, block)
        except WikiError:
            return _BROKEN


def _load(path: Path) -> dict[str, Any]:
    """The entries of the cache file at ``path``; empty when it is missing, unreadable or not one of ours."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES:
            return {}
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = json.loads(file.read())
    except (OSError, ValueError, RecursionError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("pages"), dict):
        return {}
    pages: dict[str, Any] = data["pages"]
    return pages


def _checked(entry: Any) -> Any:
    """A fresh copy of ``entry`` (parsed, or read from the cache file) when the cache may keep it, else None.

    A copy, so that a caller changing a page's frontmatter never changes the cache.
    """
    if entry == _BROKEN:
        return entry
    if type(entry) is not dict:
        return None
    try:
        return _plain_copy(entry, [MAX_VALUES], 0)
    except ValueError:
        return None


def _plain_copy(value: Any, budget: list[int], depth: int) -> Any:
    """A copy of ``value``; ValueError when it would not survive a JSON round trip unchanged or exceeds the budget."""
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        raise ValueError("too large to cache")
    kind = type(value)
    if kind is str or kind is bool or kind is float or value is None:
        return value
    if kind is int and value.bit_length() <= _MAX_INT_BITS:
        return value
    if kind is dict:
        return {_text_key(key): _plain_copy(item, budget, depth + 1) for key, item in value.items()}
    if kind is list:
        return [_plain_copy(item, budget, depth + 1) for item in value]
    raise ValueError(f"{kind.__name__} is not kept in the cache")


def _text_key(key: Any) -> str:
    if type(key) is not str:
        raise ValueError("only text keys are kept in the cache")
    return key
