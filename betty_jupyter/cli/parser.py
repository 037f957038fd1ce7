"""The parser every ``betty`` subcommand is built with (its own module, so the subcommand modules need not import
the package that imports them)."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn, Sequence

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the fix, not a usage dump.

    ``options_later`` adds options the first time the parser parses or shows its help: ``betty --help``
    builds every command's parser and parses none, so what those options need is never loaded there.
    """

    options_later: "Callable[[Parser], None] | None" = None

    def _options_now(self) -> None:
        add, self.options_later = self.options_later, None
        if add is not None:
            add(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._options_now()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._options_now()
        return super().format_help()

    def format_usage(self) -> str:
        self._options_now()
        return super().format_usage()

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
