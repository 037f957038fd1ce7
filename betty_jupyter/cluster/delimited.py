"""Reads whose fields Betty splits, with a delimiter no one else's text can hold.

``squeue``, ``sacct`` and ``sinfo`` print fields that anyone on the cluster writes: job names,
comments, working directories. With a fixed separator, a job named ``a\\x1fb`` (and a line
break) would shift the fields of its own row and make the next row, someone else's, fail to
split: a stranger could hide the person's job from every listing. So every read's formats are
written with :data:`~.parsing.SEPARATOR`, and :func:`run_read` runs them with a fresh
delimiter in its place: the separator around a random word, new for each command, that no
one can know before the command runs. The output comes back split by ``SEPARATOR`` again,
exactly: a ``SEPARATOR`` inside a field is shown as :data:`SHOWN_SEPARATOR`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import replace
from typing import Sequence

from .parsing import SEPARATOR
from .transport import CommandResult, Transport

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
    """``argv`` with its delimiter written as :data:`SEPARATOR` again: the command as Betty's code wrote it."""
    return tuple(_DELIMITER.sub(SEPARATOR, word) for word in argv)


def plain(output: str, delimiter: str) -> str:
    """``output`` of a command run with ``delimiter``, its fields split by :data:`SEPARATOR` again; a
    ``SEPARATOR`` that was someone's text reads as :data:`SHOWN_SEPARATOR`, so every row splits exactly."""
    if output.count(SEPARATOR) == 2 * output.count(delimiter):  # nobody's text holds one: the common case
        return output.replace(delimiter, SEPARATOR)
    return SEPARATOR.join(part.replace(SEPARATOR, SHOWN_SEPARATOR) for part in output.split(delimiter))


async def run_read(transport: Transport, argv: Sequence[str], timeout: float, *,
                   idempotent: bool = True) -> CommandResult:
    """Run ``argv`` on ``transport``; where its fields are split by :data:`SEPARATOR`, with a fresh delimiter in
    its place and the output split by ``SEPARATOR`` again (:func:`plain`). The result names ``argv`` as given."""
    if not any(SEPARATOR in word for word in argv):
        return await transport.run(argv, timeout, idempotent=idempotent)
    delimiter = fresh_delimiter()
    result = await transport.run(with_delimiter(argv, delimiter), timeout, idempotent=idempotent)
    return replace(result, argv=tuple(argv), stdout=plain(result.stdout, delimiter))
