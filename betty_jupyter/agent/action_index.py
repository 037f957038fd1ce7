"""The action log's index: where each record of a day file starts, and the few fields a listing filters on.

::

    <workspace>/.betty/actions/.index/2024-05-01.json    the index of 2024-05-01.jsonl

The JSON lines stay the log and its export format; the index is a cache beside them that any
reader may rebuild. It holds, for every whole line of its day file: the byte offset, ``ts``,
the session, the tool, the decision and ``ok``, and the unreadable lines with why. So a
listing by day, session or tool reads only the lines it shows, and a table knows its column
widths before its first row (the summary, its last column, needs none).

An index is used only while it still describes its file: the same file (inode) at least as
long as the part indexed, with the same first bytes and the same last indexed line, and
untouched since unless it grew. Then only what was appended since is read; a file replaced,
truncated or rewritten is indexed again from its start. The line a writer is still appending
(no newline yet) is never stored in the index: each read parses it anew.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from ..wiki.files import write_atomically

INDEX_DIR = ".index"
VERSION = 1
_HEAD = 4096


class IndexedLine(NamedTuple):
    """One readable record of a day file, as the index knows it."""

    path: Path
    offset: int
    ts: float
    session_id: str
    tool: str
    decision: str
    ok: bool | None


@dataclass
class DayIndex:
    """The index of one day file: its lines' columns, and where it stands in the file."""

    end: int = 0
    """Bytes of the file indexed: always just after a newline (or 0)."""
    lines: int = 0
    """Lines indexed (blank and unreadable ones counted), so the next line's number is ``lines + 1``."""
    inode: int = 0
    mtime_ns: int = 0
    head_size: int = 0
    head: str = ""
    last_start: int = 0
    last: str = ""
    """Digests of the file's first ``head_size`` bytes and of its last indexed line (from ``last_start``):
    the file still being the one indexed."""
    strings: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    tools: list[int] = field(default_factory=list)
    decisions: list[int] = field(default_factory=list)
    oks: list[bool | None] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """Unreadable lines: (line number, why)."""
    _ids: dict[str, int] = field(default_factory=dict, repr=False)

    def intern(self, text: str) -> int:
        """The number of ``text`` in :attr:`strings` (added when new)."""
        number = self._ids.get(text)
        if number is None:
            number = self._ids[text] = len(self.strings)
            self.strings.append(text)
        return number

    def to_json(self) -> str:
        fields = {name: getattr(self, name) for name in ("end", "lines", "inode", "mtime_ns", "head_size", "head",
                                                         "last_start", "last", "strings",
                                                         "offsets", "ts", "sessions", "tools", "decisions", "oks",
                                                         "skipped")}
        return json.dumps({"version": VERSION, **fields}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "DayIndex | None":
        """The index in ``text``, or None when it is not one this version wrote (it is then rebuilt)."""
        try:
            data = json.loads(text)
            if data.pop("version") != VERSION:
                return None
            index = cls(**{**data, "skipped": [(number, why) for number, why in data["skipped"]]})
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if not index._well_formed():
            return None
        index._ids = {text: number for number, text in enumerate(index.strings)}
        return index

    def _well_formed(self) -> bool:
        """Whether every column is as this module writes it (an index edited by hand is made again)."""
        columns = (self.offsets, self.ts, self.sessions, self.tools, self.decisions, self.oks)
        numbers = range(len(self.strings))
        return (all(type(value) is int for value in (self.end, self.lines, self.inode, self.mtime_ns,
                                                     self.head_size, self.last_start))
                and len({len(column) for column in columns}) == 1
                and all(type(text) is str for text in self.strings)
                and all(type(offset) is int and 0 <= offset < self.end for offset in self.offsets)
                and all(type(ts) in (int, float) for ts in self.ts)
                and all(type(n) is int and n in numbers for column in columns[2:5] for n in column)
                and all(ok is None or ok is True or ok is False for ok in self.oks))

    def selected(self, path: Path, session_id: str | None, tool: str | None) -> list[IndexedLine]:
        """The indexed lines of ``path`` of one session and one tool, when given, in file order."""
        strings = self.strings
        want_session = self._ids.get(session_id, -1) if session_id is not None else None
        want_tool = self._ids.get(tool, -1) if tool is not None else None
        return [IndexedLine(path, offset, ts, strings[session], strings[tool_number], strings[decision], ok)
                for offset, ts, session, tool_number, decision, ok
                in zip(self.offsets, self.ts, self.sessions, self.tools, self.decisions, self.oks)
                if (want_session is None or session == want_session)
                and (want_tool is None or tool_number == want_tool)]


def index_path(day_file: Path) -> Path:
    """Where the index of ``day_file`` is kept."""
    return day_file.parent / INDEX_DIR / (day_file.stem + ".json")


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def load_index(day_file: Path, record_type: Any) -> tuple[DayIndex, bytes]:
    """The index of ``day_file`` brought up to date (and saved when it changed), and the line still being written.

    ``record_type`` is the pydantic model each line must validate as (the action record).
    Raises OSError when the day file cannot be read; an index that cannot be read or saved is
    only rebuilt or left as it was.
    """
    where = index_path(day_file)
    with open(day_file, "rb") as file:
        status = os.fstat(file.fileno())
        index = _stored(where)
        if index is not None and not _still_describes(index, file, status):
            index = None
        if index is None:
            index = DayIndex()
        if index.end == status.st_size and index.mtime_ns == status.st_mtime_ns:
            return index, b""
        before = index.end
        file.seek(index.end)
        rest = file.read()
        cut = rest.rfind(b"\n") + 1
        _add_lines(index, rest[:cut], record_type)
        if index.head_size == 0 and index.end:
            file.seek(0)
            index.head_size = min(_HEAD, index.end)
            index.head = _digest(file.read(index.head_size))
    if (index.end, index.mtime_ns, index.inode) != (before, status.st_mtime_ns, status.st_ino):
        index.inode, index.mtime_ns = status.st_ino, status.st_mtime_ns
        try:
            write_atomically(where, index.to_json())
        except OSError:
            pass  # a read-only workspace: the index is made again in memory each time; the log still reads
    return index, rest[cut:]


def _stored(where: Path) -> DayIndex | None:
    try:
        return DayIndex.from_json(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _still_describes(index: DayIndex, file: Any, status: os.stat_result) -> bool:
    """Whether ``file`` is still the file ``index`` was made from, grown at most by appended lines."""
    if index.inode != status.st_ino or status.st_size < index.end:
        return False
    if index.end == status.st_size:
        return index.mtime_ns == status.st_mtime_ns  # touched yet no longer: rewritten, not appended to
    if index.end == 0:
        return True
    file.seek(0)
    if _digest(file.read(index.head_size)) != index.head:
        return False
    file.seek(index.last_start)
    return _digest(file.read(index.end - index.last_start)) == index.last


def _add_lines(index: DayIndex, data: bytes, record_type: Any) -> None:
    """Index the whole lines in ``data`` (which ends with a newline), read from the file at ``index.end``."""
    if not data:
        return
    offset = index.end
    for raw in data.split(b"\n")[:-1]:
        index.lines += 1
        line_start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        record, why = parse_line(raw, record_type)
        if record is None:
            index.skipped.append((index.lines, why))
            continue
        index.offsets.append(line_start)
        index.ts.append(record.ts)
        index.sessions.append(index.intern(record.session_id))
        index.tools.append(index.intern(record.tool))
        index.decisions.append(index.intern(str(record.decision.value)))
        index.oks.append(record.ok)
    index.last_start, index.end = line_start, offset
    index.last = _digest(data[line_start - (offset - len(data)):])


def parse_line(raw: bytes, record_type: Any) -> tuple[Any, str]:
    """``(record, "")`` for the line ``raw``, or ``(None, why)``: ``"not JSON"`` or ``"not an action record"``."""
    try:
        return record_type.model_validate_json(raw), ""
    except ValidationError as exc:
        why = "not JSON" if any(e["type"] == "json_invalid" for e in exc.errors()) else "not an action record"
        return None, why
