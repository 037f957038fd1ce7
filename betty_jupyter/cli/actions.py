"""``betty log show|export|replay``: the action log of a workspace (``.betty/actions/``).

``show --json`` prints an array of action records; ``export`` prints them as JSON lines, the
same fields as the log itself. ``replay`` makes each logged preview again with Betty's tools
on the configured cluster (``--cluster``; a dry run: no tool runs) and says whether it is the
same today.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import UsageError
from ..safe_text import terminal_line
from .parser import Parser

if TYPE_CHECKING:
    from ..agent.actions import ActionLog, ActionRecord, PreviewFunction
    from ..agent.models import Preview

_SUMMARY_WIDTH = 80


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty log`` and its actions."""
    log = commands.add_parser("log", help="what Betty's agent did: every tool call, its decision and result",
                              description="Read the action log of a workspace (DIR/.betty/actions/).")
    actions = log.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--day", type=_day, metavar="YYYY-MM-DD", help="only this day (default: every day)")
    common.add_argument("--session", metavar="ID", help="only this agent session")
    common.add_argument("--dir", type=Path, default=Path("."), metavar="DIR",
                        help="the workspace holding .betty/ (default: the current directory)")
    show = actions.add_parser("show", parents=[common], help="a table: time, tool, decision, ok, summary")
    show.add_argument("--json", action="store_true", help="an array of the records, for scripts")
    show.set_defaults(run=_show)
    export = actions.add_parser("export", parents=[common], help="the records as JSON lines")
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE (default: standard output)")
    export.set_defaults(run=_export)
    replay = actions.add_parser("replay", parents=[common],
                                help="make each logged preview again (runs nothing) and say what changed")
    replay.add_argument("--cluster", metavar="NAME", help="the cluster the tools preview on (default: the default one)")
    replay.set_defaults(run=_replay)


def _day(text: str) -> date:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a date; write it as YYYY-MM-DD, e.g. 2024-05-01")


def _records(args: argparse.Namespace) -> tuple["ActionLog", list["ActionRecord"]]:
    from ..agent.actions import ActionLog  # lazy: the action log needs pydantic; `betty --help` never loads it

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir} is not a directory; give the workspace with --dir")
    # The CLI says itself how many lines it skipped; keep the logger's copy off the terminal.
    logging.getLogger("betty_jupyter.agent.actions").addHandler(logging.NullHandler())
    log = ActionLog(args.dir)
    records = log.read(day=args.day, session_id=args.session)
    if log.skipped:
        shown = ", ".join(log.skipped[:3]) + (" …" if len(log.skipped) > 3 else "")
        print(f"betty: warning: skipped {len(log.skipped)} unreadable line(s) of the action log ({shown})",
              file=sys.stderr)
    return log, records


def _nothing(args: argparse.Namespace, log: "ActionLog") -> str:
    where = f" on {args.day.isoformat()}" if args.day else ""
    session = f" for session {args.session}" if args.session else ""
    return f"no actions are recorded{where}{session} in {log.directory}"


def _show(args: argparse.Namespace) -> int:
    log, records = _records(args)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2, ensure_ascii=False))
        return 0
    if not records:
        print(_nothing(args, log))
        return 0
    rows = [(_when(r.ts, records), _cell(r.tool), r.decision, _ok(r.ok), _cell(r.summary, _SUMMARY_WIDTH))
            for r in records]
    _print_table(("time", "tool", "decision", "ok", "summary"), rows)
    return 0


def _export(args: argparse.Namespace) -> int:
    _, records = _records(args)
    text = "".join(r.model_dump_json() + "\n" for r in records)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
    print(f"wrote {len(records)} record(s) to {args.output}", file=sys.stderr)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from ..agent.actions import replay  # lazy: the action log needs pydantic; `betty --help` never loads it

    log, records = _records(args)
    if not records:
        print(_nothing(args, log))
        return 0
    with _tool_previews(args) as preview:
        lines = replay(records, preview)
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.status] = counts.get(line.status, 0) + 1
        record = line.record
        verdict = f"failed: {line.diff}" if line.status == "failed" else line.status
        print(f"{_when(record.ts, records)}  {_cell(record.tool)}  {_cell(record.call_id)}  {verdict}")
        if line.status == "changed":
            print("\n".join("    " + _cell(text, 200) for text in line.diff.splitlines()))
    print(f"{len(lines)} preview(s): " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return 0


@contextmanager
def _tool_previews(args: argparse.Namespace) -> Iterator["PreviewFunction"]:
    """``preview(tool, args)`` with Betty's own tools on the configured cluster: dry runs only, never ``run``."""
    # lazy: pydantic, traitlets; only `betty log replay` needs them
    from ..agent.actions import ActionLogError
    from ..config import load_config
    from ..experiments.workspace import Workspace

    try:
        # lazy: every tool module (pydantic, jsonschema); only `betty log replay` needs them
        from ..agent.registry import default_registry
        from ..agent.tools.base import ToolContext
    except ImportError as exc:
        raise ActionLogError(f"cannot replay: Betty's tool registry is not available here ({exc})") from exc
    profile = load_config().profile(args.cluster)
    registry = default_registry()
    context = ToolContext.open(profile, Workspace.at(args.dir), "replay")
    loop = asyncio.new_event_loop()

    def preview(tool: str, tool_args: dict[str, Any]) -> "Preview":
        return loop.run_until_complete(registry.get(tool).dry_run(context, tool_args))

    try:
        yield preview
    finally:
        loop.run_until_complete(context.close())
        loop.close()


def _when(ts: float, records: list["ActionRecord"]) -> str:
    moment = datetime.fromtimestamp(ts)
    one_day = len({r.day for r in records}) == 1
    return moment.strftime("%H:%M:%S" if one_day else "%Y-%m-%d %H:%M:%S")


def _ok(ok: bool | None) -> str:
    return "-" if ok is None else "yes" if ok else "no"


def _cell(text: str, width: int = 40) -> str:
    """One line of ``text``: runs of white space as one space, other control characters written
    out (:func:`~betty_jupyter.safe_text.terminal_line`), cut to ``width``."""
    flat = terminal_line(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
