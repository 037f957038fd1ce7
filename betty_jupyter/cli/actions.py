"""``betty log show|export|replay``: the action log of a workspace (``.betty/actions/``).

``show --json`` prints an array of action records; ``export`` prints them as JSON lines, the
same fields as the log itself. ``replay`` makes each logged preview again with Betty's tools
on the configured cluster (``--cluster``; a dry run: no tool runs) and says whether it is the
same today.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, TextIO

from ..errors import UsageError
from ..safe_text import terminal_line
from .output import buffered_stdout
from .parser import Parser

if TYPE_CHECKING:
    from ..agent.action_index import IndexedLine
    from ..agent.actions import ActionLog, PreviewFunction
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
    common.add_argument("--tool", metavar="NAME", help="only the calls of this tool (e.g. submit_job)")
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


def _open(args: argparse.Namespace) -> "ActionLog":
    from ..agent.actions import ActionLog  # lazy: the action log needs pydantic; `betty --help` never loads it

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir} is not a directory; give the workspace with --dir")
    # The CLI says itself how many lines it skipped; keep the logger's copy off the terminal.
    logging.getLogger("betty_jupyter.agent.actions").addHandler(logging.NullHandler())
    return ActionLog(args.dir)


def _select(args: argparse.Namespace) -> tuple["ActionLog", list["IndexedLine"]]:
    """The log and where its records asked for are (from its index); warns once about unreadable lines."""
    log = _open(args)
    selected = log.select(day=args.day, session_id=args.session, tool=args.tool)
    if log.skipped:
        shown = ", ".join(log.skipped[:3]) + (" …" if len(log.skipped) > 3 else "")
        print(f"betty: warning: skipped {len(log.skipped)} unreadable line(s) of the action log ({shown})",
              file=sys.stderr)
    return log, selected


def _nothing(args: argparse.Namespace, log: "ActionLog") -> str:
    where = f" on {args.day.isoformat()}" if args.day else ""
    session = f" for session {args.session}" if args.session else ""
    tool = f" of tool {_cell(args.tool)}" if args.tool else ""
    return f"no actions are recorded{where}{session}{tool} in {log.directory}"


def _show(args: argparse.Namespace) -> int:
    """The table (or ``--json`` array), printed row by row as the records are read: the column widths come from
    the log's index, so no record is held but the one being printed."""
    log, selected = _select(args)
    with buffered_stdout() as out:
        return _print_show(args, log, selected, out)


def _print_show(args: argparse.Namespace, log: "ActionLog", selected: list["IndexedLine"], out: TextIO) -> int:
    if args.json:
        out.write("[" if selected else "[]")
        for number, record in enumerate(log.records(selected)):
            text = json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False)
            out.write(("\n" if number == 0 else ",\n") + "\n".join("  " + line for line in text.splitlines()))
        out.write("\n]\n" if selected else "\n")
        return 0
    if not selected:
        out.write(_nothing(args, log) + "\n")
        return 0
    time_format = _time_format(line.ts for line in selected)
    tools = {tool: _cell(tool) for tool in {line.tool for line in selected}}
    header = ("time", "tool", "decision", "ok", "summary")
    widths = [max(len(header[0]), len(datetime.fromtimestamp(selected[0].ts).strftime(time_format))),
              max(len(header[1]), *map(len, tools.values())),
              max(len(header[2]), *(len(line.decision) for line in selected)),
              max(len(header[3]), *(len(_ok(line.ok)) for line in selected)),
              0]  # the last column: its width would only pad the end of the line, which is cut off
    out.write(_row(header, widths))
    for line, summary in log.summaries(selected):
        out.write(_row((datetime.fromtimestamp(line.ts).strftime(time_format), tools[line.tool], line.decision,
                        _ok(line.ok), _cell(summary, _SUMMARY_WIDTH)), widths))
    return 0


def _export(args: argparse.Namespace) -> int:
    log, selected = _select(args)
    if args.output is None:
        with buffered_stdout() as out:
            for record in log.records(selected):
                out.write(record.model_dump_json() + "\n")
        return 0
    try:
        with args.output.open("w", encoding="utf-8") as file:
            for record in log.records(selected):
                file.write(record.model_dump_json() + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
    print(f"wrote {len(selected)} record(s) to {args.output}", file=sys.stderr)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from ..agent.actions import replay  # lazy: the action log needs pydantic; `betty --help` never loads it

    log, selected = _select(args)
    if not selected:
        print(_nothing(args, log))
        return 0
    time_format = _time_format(line.ts for line in selected)
    with _tool_previews(args) as preview:
        lines = replay(log.records(selected), preview)
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.status] = counts.get(line.status, 0) + 1
        record = line.record
        verdict = f"{line.status}: {line.diff}" if line.status in ("failed", "gone") else line.status
        print(f"{datetime.fromtimestamp(record.ts).strftime(time_format)}  {_cell(record.tool)}  {_cell(record.call_id)}  {verdict}")
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
        from ..agent.timeline import tool_previews
    except ImportError as exc:
        raise ActionLogError(f"cannot replay: Betty's tool registry is not available here ({exc})") from exc
    with tool_previews(load_config().profile(args.cluster), Workspace.at(args.dir)) as preview:
        yield preview


def _time_format(stamps: Iterable[float]) -> str:
    """How a row's time is written: the hour alone when every record is of one (local) day, else the date too."""
    days: set[date] = set()
    for ts in stamps:
        days.add(datetime.fromtimestamp(ts).date())
        if len(days) > 1:
            return "%Y-%m-%d %H:%M:%S"
    return "%H:%M:%S"


def _ok(ok: bool | None) -> str:
    return "-" if ok is None else "yes" if ok else "no"


def _cell(text: str, width: int = 40) -> str:
    """One line of ``text``: runs of white space as one space, other control characters written
    out (:func:`~betty_jupyter.safe_text.terminal_line`), cut to ``width``."""
    flat = terminal_line(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip() + "\n"
