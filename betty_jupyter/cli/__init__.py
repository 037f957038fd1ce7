"""The ``betty`` command. Every user error is one line on stderr and a non-zero exit.

Only the standard library is imported at start-up, so ``betty dev-cluster up`` works on a
machine where Betty's heavier dependencies are not installed yet.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
from typing import NoReturn, Sequence

from .. import read_commands
from .._version import __version__
from ..errors import BettyError
from .parser import Parser

# Each module adds its subcommands with `add_commands(subparsers)` and sets `run` on them; in this order
# `betty --help` lists them.
COMMAND_MODULES = (
    "devcluster", "reads", "cluster", "advise", "gpu", "experiments", "sweeps", "notebooks", "wiki",
    "actions", "agent", "llm", "mcp", "policy", "notify",
)
COMMANDS = {
    "dev-cluster": "devcluster", "cluster": "cluster", "run": "cluster", "submit": "cluster", "sweep": "cluster",
    "cancel": "cluster", "extend": "cluster", "pipeline": "cluster", "advise": "advise", "gpu": "gpu",
    **{name: "reads" for name in read_commands.names("cli")},
    "experiments": "experiments", "sweeps": "sweeps", "watch": "experiments", "init": "wiki", "wiki": "wiki", "log": "actions",
    "ask": "agent", "llm": "llm", "mcp": "mcp", "submit-notebook": "notebooks", "policy": "policy",
    "approve": "policy", "notify": "notify",
}
"""Which module adds each command: a command imports its own module alone (``betty jobs`` starts fast)."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``betty`` command line: every command, or only the one ``argv`` names (its options, its help)."""
    parser = Parser(prog="betty", description="Betty: an assistant for researchers on Slurm clusters.")
    parser.add_argument("--version", action="version", version=f"betty {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    commands.add_parser("version", help="print Betty's version")
    named = command_module(sys.argv[1:] if argv is None else argv)
    for module in COMMAND_MODULES if named is None else (named,):
        importlib.import_module(f"{__name__}.{module}").add_commands(commands)
    return parser


def command_module(argv: Sequence[str]) -> str | None:
    """The module that adds the command ``argv`` names (None: no known command)."""
    words = [word for word in argv if not word.startswith("-")]
    return COMMANDS.get(words[0]) if words else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``betty`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    if command_module(words) == "reads" and not {"-h", "--help"} & set(words):
        # a read logs in to its cluster while the rest of it loads
        importlib.import_module(f"{__name__}.reads").open_cluster_early(words)
    args = build_parser(argv).parse_args(argv)
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
