"""The ``betty`` command. Every user error is one line on stderr and a non-zero exit.

Only the standard library is imported at start-up, so ``betty dev-cluster up`` works on a
machine where Betty's heavier dependencies are not installed yet.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from typing import NoReturn, Sequence

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
    """Entry point of the ``betty`` console script."""
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


def run() -> NoReturn:
    """The ``betty`` console script (and ``python -m betty_jupyter.cli``): :func:`main`, then a prompt exit."""
    exit_promptly(main())


def exit_promptly(code: int) -> NoReturn:
    """End the process once everything the command wrote is out, skipping the interpreter's teardown.

    Tearing down a process that loaded the agent (a thousand modules, 140k objects) takes longer than
    many a command: a last garbage collection and every module freed one by one, none of which
    changes anything outside the process. What does is kept: every ``atexit`` handler runs (logging
    flushes its files, thread pools finish their work), then both output streams are flushed. While
    a thread of Betty's that is not a daemon still runs, the ordinary exit waits for it as always.
    """
    if any(thread is not threading.main_thread() and not thread.daemon for thread in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader left (`betty jobs | head`) or the stream was closed
            code = code or 141
    os._exit(code)
