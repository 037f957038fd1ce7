"""How a ``%betty`` command line is read: argparse whose mistakes are one line, and the parsers the table gives."""

from __future__ import annotations

import argparse
from typing import Callable, NoReturn

from ...cluster.jobs import job_id
from ...errors import UsageError
from ...read_commands import ReadCommand, add_tool_options


class HelpShown(Exception):
    """``--help`` printed the help; the command stops quietly."""


class MagicParser(argparse.ArgumentParser):
    """argparse for a magic: a mistake is one :class:`UsageError` line, ``--help`` prints and stops."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, end="")
        raise HelpShown()


def parser(name: str, description: str) -> MagicParser:
    """A parser for ``%betty NAME``."""
    return MagicParser(prog=f"%betty {name}", description=description, add_help=True)


def job_parser(name: str, description: str) -> MagicParser:
    """A parser for a command about one job (``JOBID`` first)."""
    made = parser(name, description)
    made.add_argument("job_id", metavar="JOBID", type=job_id_type)
    return made


def job_id_type(text: str) -> str:
    """A job id as argparse checks it: a bad one is the parser's one-line error."""
    try:
        return job_id(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def read_parser(command: ReadCommand, name: str,
                face_options: Callable[[argparse.ArgumentParser], None]) -> MagicParser:
    """``%betty NAME`` for a read of the table: the options derived from its tool, then the notebook's own."""
    made = parser(name, command.description or command.help)
    add_tool_options(made, command)
    face_options(made)
    return made
