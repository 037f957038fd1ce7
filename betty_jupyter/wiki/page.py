"""A wiki page: YAML frontmatter between ``---`` lines, then markdown.

Text is kept exactly as stored: a page read and written back without changes is the same
bytes, line endings and YAML comments included. The frontmatter is rendered anew only when
its values change: ``key: value`` lines of text, numbers, true/false and lists by :mod:`.simple_yaml`
(as PyYAML writes them, without it), anything else by PyYAML; read back the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

from ..errors import WikiError
from . import simple_yaml
from .regions import find_region

MAX_FRONTMATTER_CHARS = 64 * 1024
_FRONTMATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE
# Where LibYAML and PyYAML part ways (tabs, byte-order marks, Unicode line breaks; tags, anchors,
# aliases, block scalars, directives, complex keys at the start of a token): PyYAML reads those.
# Text LibYAML's emitter writes as PyYAML's does: one or more printable characters of Unicode's basic plane
# (no control characters, no NEL, line or paragraph separators, byte-order mark; they are escaped or quoted
# differently, as are characters beyond the basic plane and the empty key).
_PLAIN_TEXT = re.compile(r"[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]+")
_PYYAML_ONLY = re.compile(r"[\t\ufeff\x85\u2028\u2029]|(?:^|[\s\[\]{},:-])[!&*|>%@`?]", re.M)


class _Loader(yaml.SafeLoader):
    """Safe YAML where dates stay text: ``submitted: 2026-11-22T10:31`` reads back as written."""


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # SafeLoader without LibYAML
    """:class:`_Loader` on LibYAML's parser where PyYAML was built with it (the same values, ~10× faster)."""


class _Dumper(yaml.SafeDumper):
    """Safe YAML that writes date-like text plainly, matching :class:`_Loader`."""


class _FastDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # SafeDumper without LibYAML
    """:class:`_Dumper` on LibYAML's emitter: the same bytes for the values :func:`_plain` admits, ~5× faster."""


LOADER = "libyaml" if hasattr(yaml, "CSafeLoader") else "python"
"""Which parser reads frontmatter first: ``libyaml`` when PyYAML has it, else ``python``."""

for _cls in (_Loader, _FastLoader, _Dumper, _FastDumper):
    _cls.yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


@dataclass(frozen=True)
class Page:
    """One page: its name (relative to the wiki's root), frontmatter and markdown body."""

    name: str
    frontmatter: dict[str, Any]
    body: str
    source: str | None = field(default=None, repr=False, compare=False)
    """The whole file as stored, when the page was read or written; None for a page built in code."""

    @property
    def text(self) -> str:
        """The whole file as stored (or as it would be stored)."""
        if self.source is not None:
            return self.source
        return render_frontmatter(self.frontmatter) + self.body

    @property
    def head(self) -> str:
        """The frontmatter block as stored, ``---`` lines included ('' when the page has none)."""
        return self.text[: len(self.text) - len(self.body)]

    @property
    def auto(self) -> str | None:
        """What lies between the auto markers (Betty's region), or None when the page has none."""
        region = find_region(self.body, self.name)
        return None if region is None else self.body[region.start:region.end]


def parse_page(name: str, text: str) -> Page:
    """Split stored text into a :class:`Page`; malformed frontmatter is a WikiError naming the line."""
    found = find_frontmatter(text)
    if found is None:
        return Page(name, {}, text, source=text)
    block, body_start = found
    return Page(name, parse_frontmatter(name, block), text[body_start:], source=text)


def find_frontmatter(text: str) -> tuple[str, int] | None:
    """The frontmatter block of ``text`` (between its ``---`` lines) and where the body starts; None when it has none."""
    match = _FRONTMATTER.match(text)
    return None if match is None else (match.group(1), match.end())


def parse_frontmatter(name: str, block: str) -> dict[str, Any]:
    """The fields of frontmatter ``block`` of page ``name``; WikiError naming the line when they do not parse.

    LibYAML reads plain blocks (``key: value`` lines, lists, quoted text) when PyYAML has it;
    a block it refuses, one holding characters PyYAML's reader refuses, and one using YAML's
    rarer syntax (tags, anchors, block scalars, tabs: where the two parsers differ) are read by
    PyYAML's own parser, so the values and the messages are those of :class:`_Loader` either way.
    """
    if len(block) > MAX_FRONTMATTER_CHARS:
        raise WikiError(f"{name}: the frontmatter is longer than {MAX_FRONTMATTER_CHARS} characters; "
                        "move the long part into the page's body")
    try:
        data = _load(block)
    except yaml.YAMLError as exc:
        raise WikiError(f"{name}: the frontmatter is not valid YAML ({_yaml_problem(exc)}); fix it in an editor") from exc
    except _UNREADABLE_VALUE as exc:
        # PyYAML's constructors raise plain errors for a tagged value they cannot build (`!!timestamp soon`,
        # `!!int abc`, `!!bool maybe`) and for nesting too deep to build at all.
        raise WikiError(f"{name}: the frontmatter holds a value YAML cannot build ({type(exc).__name__}: "
                        f"{str(exc)[:80]}); fix it in an editor") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WikiError(f"{name}: the frontmatter must be 'key: value' lines, not a {type(data).__name__}")
    return data


_UNREADABLE_VALUE = (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)
"""What PyYAML's constructors raise, besides YAMLError, for a value they cannot build."""


def _load(block: str) -> Any:
    if _PYYAML_ONLY.search(block) or _NON_PRINTABLE.search(block):
        return yaml.load(block, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    simple = simple_yaml.read(block)
    if simple is not None:
        return simple  # what Betty writes (`key: value` lines): what PyYAML would read, without it
    if LOADER == "libyaml":
        try:
            return yaml.load(block, Loader=_FastLoader)  # noqa: S506 - a CSafeLoader subclass
        except yaml.YAMLError:
            pass  # PyYAML's reader says what is wrong, in its own words
    return yaml.load(block, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def parse_page_leniently(name: str, text: str) -> Page:
    """As :func:`parse_page`, but a page whose frontmatter does not parse keeps its whole text as body."""
    try:
        return parse_page(name, text)
    except WikiError:
        return Page(name, {}, text, source=text)


def render_frontmatter(frontmatter: Mapping[str, Any]) -> str:
    """The ``---`` block for ``frontmatter``, keys in the given order."""
    fields = dict(frontmatter)
    dumped = simple_yaml.emit(fields, _dump_text)
    return f"---\n{_dump(fields) if dumped is None else dumped}---\n"


def _dump(fields: dict[str, Any]) -> str:
    """``fields`` as PyYAML writes them (LibYAML's emitter where it writes the same bytes)."""
    dumper = _FastDumper if _plain(fields) else _Dumper
    try:
        return yaml.dump(fields, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                         width=1000)
    except yaml.YAMLError as exc:
        raise WikiError(f"frontmatter values must be text, numbers, true/false, lists or mappings ({exc})") from exc


def _dump_text(key: str, value: Any) -> str:
    """The lines PyYAML writes for ``key: value`` in a mapping (each key's lines are the same, alone or not)."""
    return _dump({key: value})


def _plain(value: Any) -> bool:
    """Whether LibYAML's emitter writes ``value`` byte for byte as PyYAML's does (text, numbers, true/false,
    null, and lists and mappings of them, with every text matching ``_PLAIN_TEXT``)."""
    if isinstance(value, str):
        return _PLAIN_TEXT.fullmatch(value) is not None
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(key) and _plain(item) for key, item in value.items())
    return False


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    # Line numbers of the file, not of the block: the block starts on the file's second line.
    return f"line {mark.line + 2}: {problem}" if mark is not None else str(problem)


def written_page(name: str, before: Page, frontmatter: Mapping[str, Any], body: str, text: str) -> Page:
    """``parse_page(name, text)`` for ``text`` that :func:`compose` made of ``before``, ``frontmatter`` and ``body``,
    without reading back a block rendered from values LibYAML writes and reads back as they were (:func:`_plain`)."""
    fields = dict(frontmatter)
    head = len(text) - len(body)
    if fields == before.frontmatter and text[:head] == before.head:
        return Page(name, before.frontmatter, body, source=text)
    if _plain(fields) and head <= MAX_FRONTMATTER_CHARS and text.startswith("---\n"):
        return Page(name, fields, body, source=text)
    return parse_page(name, text)


def compose(page: Page, frontmatter: Mapping[str, Any], body: str, rendered: str | None = None) -> str:
    """The text of ``page`` with new frontmatter and body; the stored block is kept when the values did not change.

    ``rendered`` is ``frontmatter``'s block when the caller has rendered it already."""
    if dict(frontmatter) == page.frontmatter:
        return page.head + body
    return (render_frontmatter(frontmatter) if rendered is None else rendered) + body
