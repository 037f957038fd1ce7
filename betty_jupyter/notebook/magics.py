"""The ``%betty`` line magic. A user error prints one line, never a traceback."""

from __future__ import annotations

import shlex
import sys
from typing import Callable

from IPython.core.magic import Magics, line_magic, magics_class

from .._version import __version__
from ..errors import BettyError, UsageError

_HELP = """\
%betty COMMAND — Betty, an assistant for your Slurm cluster.

Commands:
  version   print Betty's version
  help      print this help
"""


@magics_class
class BettyMagics(Magics):
    """``%betty …`` in a notebook: parse, call the core, render."""

    @line_magic
    def betty(self, line: str) -> object:
        """Run one ``%betty`` command; returns its result so it flows into ``_``."""
        try:
            words = shlex.split(line)
            command, args = (words[0], words[1:]) if words else ("help", [])
            handler = self._commands().get(command)
            if handler is None:
                raise UsageError(f"unknown %betty command {command!r}; try `%betty help`")
            return handler(args)
        except (BettyError, ValueError) as error:
            print(f"betty: {error}", file=sys.stderr)
            return None

    def _commands(self) -> dict[str, Callable[[list[str]], object]]:
        return {"version": self._version, "help": self._help}

    @staticmethod
    def _version(args: list[str]) -> str:
        if args:
            raise UsageError("`%betty version` takes no arguments")
        return f"Betty {__version__}"

    @staticmethod
    def _help(args: list[str]) -> None:
        print(_HELP, end="")
