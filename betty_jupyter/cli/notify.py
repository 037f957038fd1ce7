"""``betty notify add|list|test|remove``: where word goes when a job ends (``docs/notifications.md``)."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path

from ..experiments.notify import KINDS
from .parser import Parser


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty notify``."""
    where = Parser(add_help=False)
    where.add_argument("--dir", type=Path, default=Path("."), help="the project directory (default: here)")
    notify = commands.add_parser("notify", help="word when your jobs end: e-mail, ntfy, Slack, Matrix, Mattermost, "
                                 "a webhook (docs/notifications.md)")
    actions = notify.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    add = actions.add_parser("add", help="add a target; a webhook's URL is asked for, never typed on the command line")
    add.add_argument("name", metavar="NAME", help="what to call it, like phone")
    add.add_argument("kind", choices=KINDS)
    add.add_argument("address", nargs="?", default="", metavar="ADDRESS", help="the e-mail address (email only)")
    add.add_argument("--room", default="", help="a Matrix room id, like '!abc:example.org' (matrix only)")
    add.add_argument("--token-file", default="", metavar="FILE", help="a file holding the Matrix access token")
    add.set_defaults(run=_add)
    listing = actions.add_parser("list", parents=[where], help="the targets (never their URLs) and how they fared")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    listing.set_defaults(run=_list)
    test = actions.add_parser("test", help="send a sample notification to a target now")
    test.add_argument("name", metavar="NAME")
    test.set_defaults(run=_test)
    remove = actions.add_parser("remove", parents=[where], help="forget a target")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=_remove)


def _ask(prompt: str) -> str:
    """A secret from the terminal without echo, or the first line of stdin when it is not a terminal."""
    return getpass.getpass(prompt) if sys.stdin.isatty() else sys.stdin.readline()


def _ledger(args: argparse.Namespace) -> Path:
    # lazy: the workspace; `betty notify add` needs none
    from ..experiments.workspace import Workspace

    return Workspace.at(args.dir).ledger_path


def _add(args: argparse.Namespace) -> int:
    # lazy: the targets file; `betty --help` needs none of it
    from ..experiments.notify import commands

    made = commands.add(args.name, args.kind, _ask, args.address, args.room, args.token_file)
    print(f"added {made.name}: {made.where()}; `betty notify test {made.name}` sends a sample")
    return 0


def _list(args: argparse.Namespace) -> int:
    # lazy: the targets file and the ledger; `betty --help` needs none of it
    from ..experiments.notify import commands

    records = commands.listed(_ledger(args))
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        print("\n".join(commands.line(record) for record in records) or
              "no notification targets; add one with `betty notify add NAME KIND`")
    return 0


def _test(args: argparse.Namespace) -> int:
    # lazy: the configuration and the mail and HTTP clients; `betty --help` needs none of them
    from ..config import load_config
    from ..experiments.notify import commands

    print(commands.test(args.name, load_config().notify))
    return 0


def _remove(args: argparse.Namespace) -> int:
    # lazy: the targets file and the ledger; `betty --help` needs none of it
    from ..experiments.notify import commands

    gone = commands.remove(args.name, _ledger(args))
    print(f"removed {gone.name} ({gone.where()})")
    return 0
