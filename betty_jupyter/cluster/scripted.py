"""``ScriptedTransport``: a cluster that answers from a script, for fast tests of what sits above a transport.

Like httpx's ``MockTransport``: the code under test gets a real :class:`~betty_jupyter.transport.interface.Transport`
and Betty's real Slurm client, parsers and policy run; only the cluster's answers are written
down in the test::

    cluster = ScriptedTransport().on("squeue", stdout=row).on("scancel", "42")
    client = SlurmClient(cluster)
    frame = await client.queue()
    assert cluster.ran("scancel") == []

What a script says Slurm prints must be what Slurm prints: copy it from a real cluster (the
dev cluster's output under ``tests/data/`` is a good source). The real-cluster tests stay
the authority on how Slurm behaves; this is for the logic around it.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from .delimited import as_written, delimiter_in
from .parsing import SEPARATOR
from ..transport.interface import CommandResult, program_name


@dataclass(frozen=True)
class Reply:
    """What a scripted command prints and how it ends."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


@dataclass(frozen=True)
class _Rule:
    program: str
    prefix: tuple[str, ...]
    reply: Reply

    def matches(self, argv: tuple[str, ...]) -> bool:
        words = _after_env(argv)
        return bool(words) and words[0] == self.program and words[1:1 + len(self.prefix)] == self.prefix


class ScriptedTransport:
    """A :class:`~betty_jupyter.transport.interface.Transport` whose commands answer from rules or a function.

    A command is answered by the newest rule that matches its program and first arguments,
    else by ``answer(argv)`` when given, else as a shell would answer an unknown program
    (exit 127). Every command is kept in :attr:`calls`, every upload in :attr:`files`.

    Scripts write Betty's separator between fields, as its formats do; a command run with a fresh delimiter in
    its place (:mod:`.delimited`) is matched and kept as written, and answered with that delimiter where the
    script has the separator, as Slurm would print it. So a separator in a scripted job name reads as one more
    field: what a real job named so does is for the real-cluster tests.
    """

    def __init__(self, answer: Callable[[tuple[str, ...]], Reply | None] | None = None,
                 home: str = "/home/researcher") -> None:
        self.answer = answer
        self.home = home
        self.calls: list[tuple[str, ...]] = []
        self.files: dict[str, bytes] = {}
        self.closed = False
        self._rules: list[_Rule] = []

    def on(self, program: str, *prefix: str, stdout: str = "", stderr: str = "",
           exit_code: int = 0) -> "ScriptedTransport":
        """Answer ``program prefix…`` (and any arguments after) with this output; returns the transport."""
        self._rules.append(_Rule(program, prefix, Reply(stdout, stderr, exit_code)))
        return self

    def ran(self, program: str) -> list[tuple[str, ...]]:
        """Every command of ``program`` run so far (``env NAME=value`` in front ignored), oldest first."""
        return [argv for argv in self.calls if program_name(argv) == program]

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Answer ``argv`` from the script."""
        delimiter = delimiter_in(argv)
        words = as_written(argv)
        self.calls.append(words)
        reply = next((rule.reply for rule in reversed(self._rules) if rule.matches(words)), None)
        if reply is None and self.answer is not None:
            reply = self.answer(words)
        if reply is None:
            reply = Reply(stderr=f"{program_name(words)}: command not found (not in the script)\n", exit_code=127)
        return CommandResult(tuple(argv), _printed(reply.stdout, argv, delimiter), reply.stderr, reply.exit_code, 0.0)

    async def put(self, data: bytes, remote_path: str) -> str:
        """Keep ``data`` in :attr:`files` under the absolute path; returns it."""
        path = posixpath.join(self.home, remote_path[2:]) if remote_path.startswith("~/") else remote_path
        self.files[path] = bytes(data)
        return path

    async def close(self) -> None:
        """Note that the transport was closed."""
        self.closed = True


def _printed(stdout: str, argv: Sequence[str], delimiter: str | None) -> str:
    """What Slurm prints of the script's ``stdout`` (fields split by Betty's separator) for ``argv``: with its
    delimiter between every field, or, for a ``squeue --format`` with the delimiter around some fields only, each row
    of the format's width joined as that format joins it."""
    if delimiter is None:
        return stdout
    fields = next((argv[index + 1] for index, word in enumerate(argv[:-1])
                   if word == "--format" and delimiter in argv[index + 1]), None)
    if argv[0] != "squeue" or fields is None:
        return stdout.replace(SEPARATOR, delimiter)
    joiners = re.findall(f"{re.escape(delimiter)}|{SEPARATOR}", fields)
    closing = fields.endswith(delimiter)
    width = len(joiners) + (0 if closing else 1)
    lines = []
    for line in stdout.split("\n"):
        cells = line.split(SEPARATOR)
        if len(cells) != width:
            lines.append(line)
            continue
        row = cells[0] + "".join(joiner + cell for joiner, cell in zip(joiners, cells[1:]))
        lines.append(row + (delimiter if closing else ""))
    return "\n".join(lines)


def _after_env(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` without a leading ``env NAME=value …`` (how Betty sets variables for a command)."""
    program = program_name(argv)
    return argv[argv.index(program):] if program in argv else argv
