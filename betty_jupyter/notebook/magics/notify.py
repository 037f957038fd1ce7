"""``%betty notify``: where word goes when a job ends, set by the person in a cell (``docs/notifications.md``).

The same actions as ``betty notify``; a webhook's URL is asked for with a prompt that does not echo,
so it is never in the notebook.
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any, Callable

from ...errors import UsageError
from ...experiments.notify import KINDS
from .parsing import MagicParser, parser


class NotifyCommands:
    """``%betty notify list|add|test|remove``."""

    def notify_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module."""
        return {"notify": (self._notify_parser, self._notify)}

    @staticmethod
    def _notify_parser() -> MagicParser:
        made = parser("notify", "where word goes when your jobs end: list, add NAME KIND [ADDRESS], test NAME, "
                      "remove NAME")
        made.add_argument("action", nargs="?", choices=["list", "add", "test", "remove"], default="list")
        made.add_argument("name", nargs="?", metavar="NAME")
        made.add_argument("kind", nargs="?", choices=KINDS, metavar="KIND")
        made.add_argument("address", nargs="?", default="", metavar="ADDRESS", help="the e-mail address (email only)")
        made.add_argument("--room", default="", help="a Matrix room id (matrix only)")
        made.add_argument("--token-file", default="", metavar="FILE", help="a file holding the Matrix access token")
        return made

    def _notify(self, args: argparse.Namespace, cell: str | None) -> Any:
        # lazy: the targets file and the mail and HTTP clients; `%load_ext` never needs them
        from ...config import load_config
        from ...experiments.notify import commands

        if args.action == "list":
            records = commands.listed(None)
            print("\n".join(commands.line(record) for record in records) or
                  "no notification targets; add one with `%betty notify add NAME KIND`")
            return None
        if not args.name:
            raise UsageError(f"%betty notify {args.action}: name the target")
        if args.action == "add":
            if not args.kind:
                raise UsageError(f"%betty notify add: give the kind, one of {', '.join(KINDS)}")
            made = commands.add(args.name, args.kind, getpass.getpass, args.address, args.room, args.token_file)
            print(f"added {made.name}: {made.where()}; `%betty notify test {made.name}` sends a sample")
        elif args.action == "test":
            print(commands.test(args.name, load_config().notify))
        else:
            gone = commands.remove(args.name, None)
            print(f"removed {gone.name} ({gone.where()})")
        return None
