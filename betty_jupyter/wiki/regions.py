"""Betty's region of a page (between the auto markers) and sections of index.md, as text edits.

A marker counts only on a line of its own (spaces around it allowed), so a page may mention
the marker text in a sentence or in inline code without opening a region. Every edit here
returns new text in which everything outside the edited span is the old text, byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import WikiError

AUTO_START = "<!-- betty:auto-start -->"
AUTO_END = "<!-- betty:auto-end -->"
# Any text carrying this could open or close a region when written into a page.
MARKER_STEM = "<!-- betty:auto-"


def _marker_line(marker: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*{re.escape(marker)}[ \t]*(?:\r?\n|\Z)", re.M)


_START_LINE = _marker_line(AUTO_START)
_END_LINE = _marker_line(AUTO_END)
_HEADING = re.compile(r"^#{1,2}[ \t]", re.M)


@dataclass(frozen=True)
class Region:
    """Where Betty's text lies in a body: from just after the start marker's line to the end marker's line."""

    start: int
    end: int


def find_region(body: str, where: str) -> Region | None:
    """The one auto region of ``body``, None when it has no markers; WikiError when they are malformed."""
    starts = list(_START_LINE.finditer(body))
    ends = list(_END_LINE.finditer(body))
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1:
        raise WikiError(f"{where}: expected one '{AUTO_START}' line and one '{AUTO_END}' line, found "
                        f"{len(starts)} and {len(ends)}; keep exactly one pair, each marker on a line of its own")
    if ends[0].start() < starts[0].end():
        raise WikiError(f"{where}: '{AUTO_END}' comes before '{AUTO_START}'; put Betty's region between them")
    return Region(starts[0].end(), ends[0].start())


def outside(body: str, region: Region) -> tuple[str, str]:
    """The person's text: everything before Betty's region and everything after it."""
    return body[:region.start], body[region.end:]


def replace_region(body: str, region: Region, content: str) -> str:
    """``body`` with Betty's region holding ``content`` (ending in one newline) and nothing else changed."""
    inside = content.rstrip("\r\n")
    return body[:region.start] + (inside + "\n" if inside else "") + body[region.end:]


def check_no_markers(text: str, what: str) -> None:
    """Refuse text that carries marker text: written into a page, it could move Betty's region."""
    if MARKER_STEM in text:
        raise WikiError(f"{what} contains '{MARKER_STEM}…' marker text, which only Betty's page layout may hold")


def without_markers(text: str) -> str:
    """``text`` (a log, a diff) with marker text broken up, so it can be quoted inside Betty's region."""
    return text.replace(MARKER_STEM, "<!-- betty: auto-")


def check_one_line(text: object, what: str) -> str:
    """Return ``text`` when it is a non-empty single line without control characters."""
    if not isinstance(text, str) or not text.strip():
        raise WikiError(f"{what} must be a non-empty line of text")
    if text.splitlines() != [text] or any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise WikiError(f"{what} must be one line, without line breaks or control characters")
    return text


def insert_in_section(text: str, section: str, line: str) -> str:
    """``text`` with ``line`` added at the end of its ``## section`` (the section is added at the end if missing)."""
    heading = re.compile(rf"^##[ \t]+{re.escape(section)}[ \t]*\r?$", re.M).search(text)
    if heading is None:
        separator = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{separator}\n## {section}\n\n{line}\n"
    following = _HEADING.search(text, heading.end())
    end = following.start() if following else len(text)
    filled = text[heading.end():end].rstrip(" \t\r\n")
    at = heading.end() + len(filled)
    last_line = filled.rsplit("\n", 1)[-1].lstrip()
    gap = "\n" if filled and last_line.startswith(("- ", "* ")) else "\n\n"
    tail = "" if at < len(text) else "\n"
    return text[:at] + gap + line + tail + text[at:]
