"""Reads whose fields Betty splits, with a delimiter no one else's text can hold.

``squeue``, ``sacct`` and ``sinfo`` print fields that anyone on the cluster writes: job names,
comments, working directories. With a fixed separator, a job named ``a\\x1fb`` (and a line
break) would shift the fields of its own row and make the next row, someone else's, fail to
split: a stranger could hide the person's job from every listing. So every read's formats are
written with :data:`~.parsing.SEPARATOR`, and :func:`run_read` runs them with a fresh
delimiter in its place: the separator around a random word, new for each command, that no
one can know before the command runs. The output comes back split by ``SEPARATOR`` again,
exactly: a ``SEPARATOR`` inside a field is shown as :data:`SHOWN_SEPARATOR`.

A ``squeue --format`` whose fields anyone can write are inside it (a job's name, its comment)
needs the delimiter only around those: the fields Slurm itself writes (ids, states, times,
counts, names an admin chose) hold no separator, so they keep the one-byte separator between
them and a 20,000-row queue comes back little bigger (:func:`around_free_text`). Everything
else (``sacct`` takes one delimiter for all its fields) has it between every field.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from typing import Sequence

from .parsing import SEPARATOR
from ..transport.interface import CommandResult, Transport

SHOWN_SEPARATOR = "\u241f"
"""How a unit separator inside someone's text (a job name) reads once Betty has split the row: ␟."""

_DELIMITER = re.compile(f"{SEPARATOR}[0-9a-f]{{12}}{SEPARATOR}")


def fresh_delimiter() -> str:
    """The separator around 48 random bits: the delimiter of one command."""
    return f"{SEPARATOR}{secrets.token_hex(6)}{SEPARATOR}"


def with_delimiter(argv: Sequence[str], delimiter: str) -> list[str]:
    """``argv`` with every :data:`SEPARATOR` (in a ``--format``, a ``--delimiter``) written as ``delimiter``."""
    return [word.replace(SEPARATOR, delimiter) for word in argv]


def delimiter_in(argv: Sequence[str]) -> str | None:
    """The delimiter a command was given (what Slurm will print between fields), None when it has none."""
    return next((found.group() for word in argv if (found := _DELIMITER.search(word))), None)


def as_written(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with its delimiter written as :data:`SEPARATOR` again: the command as Betty's code wrote it (a
    ``squeue --format`` without the delimiter :func:`around_free_text` put at its end)."""
    words = list(argv)
    at = _squeue_format_at(words)
    if at is not None:
        words[at] = re.sub(f"{_DELIMITER.pattern}$", "", words[at])
    return tuple(_DELIMITER.sub(SEPARATOR, word) for word in words)


def _squeue_format_at(words: Sequence[str]) -> int | None:
    """Where a ``squeue`` command's ``--format`` value is (None for any other command)."""
    if not words or words[0] != "squeue" or "--format" not in words[:-1]:
        return None
    return list(words).index("--format") + 1


def plain(output: str, delimiter: str) -> str:
    """``output`` of a command run with ``delimiter`` between every field, its fields split by :data:`SEPARATOR`
    again; a ``SEPARATOR`` that was someone's text reads as :data:`SHOWN_SEPARATOR`, so every row splits exactly."""
    if output.count(SEPARATOR) == 2 * output.count(delimiter):  # nobody's text holds one: the common case
        return output.replace(delimiter, SEPARATOR)
    return SEPARATOR.join(part.replace(SEPARATOR, SHOWN_SEPARATOR) for part in output.split(delimiter))


SLURM_WRITTEN = frozenset({
    "%i", "%A", "%F", "%K", "%u", "%U", "%a", "%P", "%T", "%t", "%r", "%M", "%l", "%L", "%D", "%C", "%m", "%b",
    "%N", "%V", "%S", "%e", "%Q", "%q", "%p", "%Y",
})
"""``squeue --format`` codes of fields Slurm or the site's admin writes (ids, the user and account, partition, state,
reason, times, counts, resources, nodes): no one else's text is in them. Any other code counts as anyone's text."""


@dataclass(frozen=True)
class Layout:
    """Where a ``squeue --format`` has fields anyone can write: each wrapped in the delimiter, the rest joined by
    :data:`SEPARATOR`. ``free`` is how many such fields a row has; ``last_free`` whether one ends the row."""

    free: int
    last_free: bool


def around_free_text(fields: str, delimiter: str) -> tuple[str, Layout] | None:
    """A ``squeue --format`` value (codes split by :data:`SEPARATOR`) with ``delimiter`` only around the fields
    anyone can write, and its layout; None when that cannot be read back exactly (such a field first in the row, or
    two side by side): then the delimiter goes between every field."""
    codes = fields.split(SEPARATOR)
    free = [code not in SLURM_WRITTEN for code in codes]
    if free[0] or any(a and b for a, b in zip(free, free[1:])):
        return None
    parts = [codes[0]]
    for before, code, is_free in zip(free, codes[1:], free[1:]):
        parts.append((delimiter if before or is_free else SEPARATOR) + code)
    if free[-1]:
        parts.append(delimiter)  # the row's end closes its last field
    return "".join(parts), Layout(sum(free), free[-1])


def plain_around(output: str, delimiter: str, layout: Layout) -> str:
    """``output`` of a command whose format :func:`around_free_text` made, its fields split by :data:`SEPARATOR`
    again: between two delimiters is someone's text (a ``SEPARATOR`` in it shown as :data:`SHOWN_SEPARATOR`),
    outside them only Slurm's."""
    if layout.free == 0:
        return output
    parts = output.split(delimiter)
    pieces = [parts[0]]
    for index in range(1, len(parts)):
        if index % 2:  # someone's text
            pieces += [SEPARATOR, parts[index].replace(SEPARATOR, SHOWN_SEPARATOR)]
        else:
            ordinal = index // 2 - 1  # the free field just closed, counted from the first row's first
            ends_row = layout.last_free and ordinal % layout.free == layout.free - 1
            pieces += ["" if ends_row else SEPARATOR, parts[index]]
    return "".join(pieces)


async def run_read(transport: Transport, argv: Sequence[str], timeout: float, *,
                   idempotent: bool = True) -> CommandResult:
    """Run ``argv`` on ``transport``; where its fields are split by :data:`SEPARATOR`, with a fresh delimiter in
    its place (around anyone's text only, in a ``squeue --format``) and the output split by ``SEPARATOR`` again.
    The result names ``argv`` as given."""
    if not any(SEPARATOR in word for word in argv):
        return await transport.run(argv, timeout, idempotent=idempotent)
    delimiter = fresh_delimiter()
    words = list(argv)
    at = _squeue_format_at(words)
    if at is not None:
        around = around_free_text(words[at], delimiter)
        if around is not None and sum(SEPARATOR in word for word in words) == 1:
            words[at] = around[0]
            result = await transport.run(words, timeout, idempotent=idempotent)
            return replace(result, argv=tuple(argv), stdout=plain_around(result.stdout, delimiter, around[1]))
    result = await transport.run(with_delimiter(argv, delimiter), timeout, idempotent=idempotent)
    return replace(result, argv=tuple(argv), stdout=plain(result.stdout, delimiter))
