"""How far a job got, read from the progress it printed: ``epoch 3/10``, ``step 1200/5000``, ``45%``.

A log is anyone's text, so only fixed shapes are read — a counter word with ``n/total`` (or
``n of total``), a tqdm bar (``45%|███``), or a percentage next to ``progress``/``done``/
``complete`` — and what is reported is rebuilt from the numbers read, never quoted.
The last progress the log shows counts (a tqdm bar redrawn with carriage returns is many lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# One run of spaces each side of a separator, so a line of a million spaces is read in linear time.
_COUNTED = re.compile(r"\b(?P<word>epoch|step|iteration|iter|batch)\s*(?:[:=#]\s*)?(?P<done>\d{1,9})\s*(?:/|\bof\b)\s*"
                      r"(?P<total>\d{1,9})\b", re.I)
_PERCENT = re.compile(r"(?<![\d.])(?P<percent>\d{1,3}(?:\.\d{1,3})?)\s?%(?:\||\s*(?:done|complete)\b)|"
                      r"\b(?:progress|done|complete[d]?)\b[^\d\n]{0,3}(?P<after>\d{1,3}(?:\.\d{1,3})?)\s?%", re.I)


@dataclass(frozen=True)
class Progress:
    """The share of its work a job had done when it last said so, and how it said it (rebuilt, not quoted)."""

    done: float
    """Between 0 and 1."""
    shown: str
    """``epoch 3/10`` or ``45%``."""


def last_progress(lines: Sequence[str]) -> Progress | None:
    """The last progress ``lines`` (a log's end, in order) report, or None when they report none Betty reads."""
    for line in reversed([part for line in lines for part in line.split("\r")]):
        found = _progress(line)
        if found is not None:
            return found
    return None


def _progress(line: str) -> Progress | None:
    counted = list(_COUNTED.finditer(line))
    if counted:
        done, total = int(counted[-1].group("done")), int(counted[-1].group("total"))
        if 0 <= done <= total and total > 0:
            return Progress(done / total, f"{counted[-1].group('word').lower()} {done}/{total}")
    percents = list(_PERCENT.finditer(line))
    if percents:
        value = float(percents[-1].group("percent") or percents[-1].group("after"))
        if 0 <= value <= 100:
            return Progress(value / 100, f"{value:g}%")
    return None
