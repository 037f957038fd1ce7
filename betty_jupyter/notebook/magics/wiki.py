"""``%betty wiki``: the project's wiki, its index, a search or one page."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from IPython.display import display

from ...safe_text import markdown_html
from ...errors import UsageError
from ..session import Call
from .base import Connected
from .parsing import MagicParser, parser


class WikiCommands(Connected):
    """The wiki, read through its tools."""

    def wiki_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module."""
        return {"wiki": (self._wiki_parser, self._wiki)}

    @staticmethod
    def _wiki_parser() -> MagicParser:
        made = parser("wiki", "the project's wiki: the index, a search, or one page")
        made.add_argument("action", nargs="?", choices=["search", "show"], default=None)
        made.add_argument("words", nargs="*", metavar="Q|PAGE")
        return made

    def _wiki(self, args: argparse.Namespace, cell: str | None) -> Any:
        if args.action == "search":
            if not args.words:
                raise UsageError("%betty wiki search: give words to look for")
            found = self._run("wiki_search", {"query": " ".join(args.words)}, "searching the wiki")
            if isinstance(found, Call):
                return found
            print(found.summary)
            return found.data
        page = " ".join(args.words) if args.action == "show" else "index.md"
        if args.action == "show" and not args.words:
            raise UsageError("%betty wiki show: name the page, e.g. `%betty wiki show clusters/dev-cluster.md`")
        data = self._read("wiki_read", {"page": page}, f"reading wiki/{page}")
        if isinstance(data, dict):
            # A page is anyone's text: rendered here so its raw HTML stays text and its remote images stay unloaded.
            body = str(data.get("body", ""))
            display({"text/html": markdown_html(body), "text/plain": body}, raw=True)
            return None
        return data
