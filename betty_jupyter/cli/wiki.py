"""``betty init [DIR]`` and ``betty wiki list|show|search``: the workspace and its wiki.

``--json`` output is for scripts: ``list`` and ``search`` print an array of
``{name, frontmatter}``; ``show`` prints ``{name, frontmatter, body}``; ``init`` prints
``{workspace, wiki, added, kept}``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import WikiError
from .parser import Parser

if TYPE_CHECKING:
    from ..wiki import Page, WikiStore


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty init`` and ``betty wiki`` with its actions."""
    init = commands.add_parser(
        "init", help="set up a workspace: the seed wiki, notebooks/experiments/ and .betty/",
        description="Copy Betty's seed wiki into DIR/wiki (pages you already have are kept as they are) "
        "and create DIR/notebooks/experiments/ and DIR/.betty/.",
    )
    init.add_argument("directory", nargs="?", default=".", metavar="DIR",
                      help="the workspace (default: the current directory)")
    init.add_argument("--json", action="store_true", help="one JSON object for scripts")
    init.set_defaults(run=run)
    wiki = commands.add_parser("wiki", help="list, show and search the workspace's wiki pages",
                               description="Read the wiki of a workspace (DIR/wiki).")
    wiki.set_defaults(run=run)
    actions = wiki.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path("."), metavar="DIR",
                        help="the workspace holding wiki/ (default: the current directory)")
    common.add_argument("--json", action="store_true", help="JSON for scripts")
    listing = actions.add_parser("list", parents=[common], help="pages, with their type and description")
    listing.add_argument("folder", nargs="?", default="", metavar="FOLDER", help="only pages under this folder")
    listing.add_argument("--type", metavar="T", help="only pages of this type (experiment, cluster, howto, …)")
    show = actions.add_parser("show", parents=[common], help="one page, as stored")
    show.add_argument("page", metavar="PAGE", help="the page's name, e.g. clusters/dev-cluster.md")
    search = actions.add_parser("search", parents=[common], help="pages holding every word of QUERY")
    search.add_argument("query", nargs="+", metavar="QUERY", help="words to find (any case)")
    search.add_argument("--type", metavar="T", help="only pages of this type")


def run(args: argparse.Namespace) -> int:
    """Carry out ``betty init`` or one ``betty wiki`` action."""
    if args.command == "init":
        return _init(Path(args.directory), args.json)
    store = _store(args.dir)
    if getattr(args, "type", None):
        _check_type(args.type)
    if args.action == "show":
        page = store.read(args.page)
        if args.json:
            print(json.dumps({"name": page.name, "frontmatter": page.frontmatter, "body": page.body},
                             indent=2, default=str))
        else:
            sys.stdout.write(page.text if page.text.endswith("\n") else page.text + "\n")
        return 0
    fields = {"type": args.type} if args.type else {}
    if args.action == "list":
        pages = [page for page in store.list(args.folder) if not fields or page.frontmatter.get("type") == args.type]
    else:
        pages = store.search(" ".join(args.query), **fields)
    _print_pages(pages, args.json)
    return 0


def _init(directory: Path, as_json: bool) -> int:
    from ..wiki import init_workspace  # lazy: the wiki needs PyYAML and filelock; `betty --help` never loads them

    report = init_workspace(directory)
    if as_json:
        print(json.dumps({"workspace": str(report.workspace), "wiki": str(report.wiki),
                          "added": report.added, "kept": report.kept}, indent=2))
        return 0
    print(f"workspace {report.workspace}: wiki/ with {len(report.added)} page(s) added, "
          f"{len(report.kept)} kept as you had them; notebooks/experiments/ and .betty/ ready")
    for name in report.added:
        print(f"  added  {name}")
    for name in report.kept:
        print(f"  kept   {name}")
    return 0


def _store(workspace: Path) -> WikiStore:
    from ..wiki import WikiStore  # lazy: the wiki needs PyYAML and filelock; `betty --help` never loads them

    root = workspace / "wiki"
    if not root.is_dir():
        raise WikiError(f"no wiki in {workspace} (looked for {root}); "
                        f"create one with `betty init {shlex.quote(str(workspace))}`")
    return WikiStore(root)


def _check_type(kind: str) -> None:
    from ..wiki import PAGE_TYPES  # lazy: the wiki needs PyYAML and filelock; `betty --help` never loads them

    if kind not in PAGE_TYPES:
        raise WikiError(f"unknown page type {kind!r}; the types are {', '.join(PAGE_TYPES)}")


def _print_pages(pages: Sequence[Page], as_json: bool) -> None:
    if as_json:
        rows: list[dict[str, Any]] = [{"name": page.name, "frontmatter": page.frontmatter} for page in pages]
        print(json.dumps(rows, indent=2, default=str))
        return
    if not pages:
        print("no pages")
        return
    width = max(len(page.name) for page in pages)
    kinds = max(len(str(page.frontmatter.get("type", ""))) for page in pages)
    for page in pages:
        kind = str(page.frontmatter.get("type", ""))
        description = " ".join(str(page.frontmatter.get("description", "")).split())
        print(f"{page.name:<{width}}  {kind:<{kinds}}  {description}".rstrip())
