"""The ``betty`` command. Every user error is one line on stderr and a non-zero exit.

Only the standard library is imported at start-up, so ``betty dev-cluster up`` works on a
machine where Betty's heavier dependencies are not installed yet.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Sequence

from .._version import __version__
from ..errors import BettyError
from . import actions, agent, cluster, devcluster, experiments, gpu, llm, mcp, wiki
from .parser import Parser

# Each module adds its subcommands with `add_commands(subparsers)` and sets `run` on them.
_COMMAND_MODULES = (devcluster, cluster, gpu, experiments, wiki, actions, agent, llm, mcp)


def build_parser() -> argparse.ArgumentParser:
    """The full ``betty`` command line."""
    parser = Parser(prog="betty", description="Betty: an assistant for researchers on Slurm clusters.")
    parser.add_argument("--version", action="version", version=f"betty {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    commands.add_parser("version", help="print Betty's version")
    for module in _COMMAND_MODULES:
        module.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``betty`` console script (``argv``: run in-process with these arguments instead)."""
    code = _run(argv)
    if argv is None:
        # The program ends here: leave its objects to the exit rather than have the interpreter's last garbage
        # collection walk every one of them (frozen, they are out of its reach); the output is flushed as before.
        gc.freeze()
    return code


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "version":
            print(f"betty {__version__}")
            return 0
        return int(args.run(args))
    except BettyError as error:
        print(f"betty: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("betty: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `betty jobs | head`: the reader left; say nothing more and exit as a pipe would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
