"""The action log's index: ``betty log`` prints what it printed before it had one, filters return what a full
scan returns, and the index follows its day file through appends, replacement, truncation and damage."""

from __future__ import annotations

import json
import os
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.agent import action_index
from betty_jupyter.agent.action_index import index_path
from betty_jupyter.agent.actions import ActionLog, ActionLogError, ActionRecord
from betty_jupyter.agent.models import Preview
from betty_jupyter.safe_text import terminal_line

from conftest import run_betty

DAYS = [datetime(2024, 5, 1, 9, 30, 0), datetime(2024, 5, 2, 23, 58, 0), datetime(2024, 5, 3, 0, 0, 1)]
HOSTILE_TOOL = "read_page\x1b]0;owned\x07\u202e"
HOSTILE_SUMMARIES = ["\x1b[2J\x1b[31mcleared\x1b[0m", "two\nlines\r\nand\ttabs", "\u202egnp.exe", "", "ok " * 60,
                     "長い要約" * 30, "<img src=x onerror=alert(1)>"]


def make(n: int, **fields: Any) -> ActionRecord:
    """The ``n``-th record of the fixture: three days, five sessions, four tools, every decision and ``ok``."""
    day = DAYS[n % 3]
    values: dict[str, Any] = {
        "ts": day.timestamp() + n, "session_id": f"s-{n % 5}", "call_id": f"call_{n}",
        "tool": ["submit_job", "squeue", HOSTILE_TOOL, "cancel_job"][n % 4], "tier": n % 3,
        "args": {"n": n}, "decision": ["auto", "approved", "denied", "refused", "timed_out"][n % 5],
        "ok": [True, False, None][n % 3], "summary": HOSTILE_SUMMARIES[n % len(HOSTILE_SUMMARIES)] + f" #{n}",
        "preview": Preview(kind="command", title=f"t{n}", text="sbatch x") if n % 2 else None,
    }
    return ActionRecord(**{**values, **fields})


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    log = ActionLog(tmp_path)
    for n in range(40):
        log.record(make(n), full_output=f"out {n}" if n % 4 == 0 else None)
    day_file = log.day_file(DAYS[0].date())
    with day_file.open("ab") as file:
        file.write(b'{"ts": 1714550000, "tool": "sub\n[1, 2]\n\n')  # a torn line, a line that is no record
    log.record(make(40))
    with day_file.open("ab") as file:  # a whole record with no newline after it yet, as a writer leaves it
        file.write(make(41, ts=DAYS[0].timestamp() + 41).model_dump_json().encode())
    return tmp_path


def full_scan(workspace: Path) -> tuple[list[ActionRecord], list[str]]:
    """Every record of every day file, parsed line by line as the log was read before it had an index."""
    records, skipped = [], []
    for path in sorted((workspace / ".betty/actions").glob("*.jsonl")):
        for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if raw.strip():
                try:
                    records.append(ActionRecord.model_validate_json(raw))
                except ValueError:
                    skipped.append(f"{path.name}:{number}")
    return records, skipped


def table_before(records: list[ActionRecord]) -> str:
    """The table ``betty log show`` printed before it streamed: every row made, then the widths measured."""
    def cell(text: str, width: int = 40) -> str:
        flat = terminal_line(" ".join(text.split()))
        return flat if len(flat) <= width else flat[: width - 1] + "…"

    one_day = len({r.day for r in records}) == 1
    rows = [(datetime.fromtimestamp(r.ts).strftime("%H:%M:%S" if one_day else "%Y-%m-%d %H:%M:%S"), cell(r.tool),
             r.decision.value, "-" if r.ok is None else "yes" if r.ok else "no", cell(r.summary, 80)) for r in records]
    header = ("time", "tool", "decision", "ok", "summary")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in [header, *rows])


def keep(records: list[ActionRecord], day: date | None = None, session: str | None = None,
         tool: str | None = None) -> list[ActionRecord]:
    return [r for r in records if (day is None or r.day == day) and (session is None or r.session_id == session)
            and (tool is None or r.tool == tool)]


@pytest.mark.parametrize("filters", [
    [], ["--day", "2024-05-01"], ["--session", "s-1"], ["--tool", HOSTILE_TOOL], ["--day", "2024-05-02", "--tool",
                                                                                  "squeue", "--session", "s-1"]])
def test_log_show_prints_the_table_it_printed_before(workspace: Path, filters: list[str]) -> None:
    records, _ = full_scan(workspace)
    day = date.fromisoformat(filters[filters.index("--day") + 1]) if "--day" in filters else None
    session = filters[filters.index("--session") + 1] if "--session" in filters else None
    tool = filters[filters.index("--tool") + 1] if "--tool" in filters else None
    expected = keep(records, day, session, tool)
    assert expected, "the fixture must give every filter something to show"
    for _ in range(2):  # the first run makes the index, the second reads from it
        result = run_betty("log", "show", "--dir", str(workspace), *filters)
        assert result.returncode == 0, result.stderr
        assert result.stdout == table_before(expected)
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout and "\x07" not in result.stdout


def test_hostile_text_is_written_out_as_before(workspace: Path) -> None:
    shown = run_betty("log", "show", "--dir", str(workspace)).stdout
    assert "read_page\\x1b]0;owned\\x07\\u202e" in shown
    assert "\\x1b[2J\\x1b[31mcleared\\x1b[0m #0" in shown
    assert "two lines and tabs #1" in shown and "\\u202egnp.exe #2" in shown
    missing = run_betty("log", "show", "--dir", str(workspace), "--tool", "no\x1b[2Jsuch")
    assert missing.stdout.startswith("no actions are recorded of tool no\\x1b[2Jsuch in ")


def test_json_export_and_warnings_are_as_before(workspace: Path) -> None:
    records, skipped = full_scan(workspace)
    shown = run_betty("log", "show", "--json", "--dir", str(workspace), "--session", "s-2")
    assert shown.stdout == json.dumps([r.model_dump(mode="json") for r in keep(records, session="s-2")], indent=2,
                                      ensure_ascii=False) + "\n"
    assert shown.stderr == ("betty: warning: skipped 2 unreadable line(s) of the action log "
                            "(2024-05-01.jsonl:15: not JSON, 2024-05-01.jsonl:16: not an action record)\n")
    assert skipped == ["2024-05-01.jsonl:15", "2024-05-01.jsonl:16"]
    exported = run_betty("log", "export", "--dir", str(workspace), "--tool", "squeue")
    assert exported.stdout == "".join(r.model_dump_json() + "\n" for r in keep(records, tool="squeue"))
    assert run_betty("log", "show", "--json", "--dir", str(workspace), "--session", "nobody").stdout == "[]\n"


def test_every_filter_returns_what_a_full_scan_returns(workspace: Path) -> None:
    records, _ = full_scan(workspace)
    log = ActionLog(workspace)
    for day in [None, *(d.date() for d in DAYS), date(2020, 1, 1)]:
        for session in [None, "s-0", "s-2", "nobody"]:
            for tool in [None, "squeue", HOSTILE_TOOL, "nothing"]:
                assert log.read(day, session, tool) == keep(records, day, session, tool), (day, session, tool)
                assert len(log.skipped) == (2 if day in (None, DAYS[0].date()) else 0)


def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every line the index reads from now on."""
    seen: list[bytes] = []
    real = action_index.parse_line

    def counting(raw: bytes, record_type: Any) -> tuple[Any, str]:
        seen.append(raw)
        return real(raw, record_type)

    monkeypatch.setattr(action_index, "parse_line", counting)
    return seen


def test_appended_lines_are_all_that_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = ActionLog(tmp_path)
    for n in range(0, 30, 3):
        log.record(make(n, session_id="s-0"))
    assert [r.call_id for r in log.read()] == [f"call_{n}" for n in range(0, 30, 3)]
    seen = parses(monkeypatch)
    assert [r.call_id for r in log.read(session_id="s-0")] == [f"call_{n}" for n in range(0, 30, 3)]
    assert seen == []  # answered from the index alone
    log.record(make(30, session_id="s-new"))
    log.record(make(33, session_id="s-0", tool="new_tool"))
    assert [r.call_id for r in log.read(session_id="s-new")] == ["call_30"]
    assert [json.loads(raw)["call_id"] for raw in seen] == ["call_30", "call_33"]
    assert [r.call_id for r in log.read(tool="new_tool")] == ["call_33"]
    assert len(seen) == 2
    assert log.read() == full_scan(tmp_path)[0]


def test_a_line_still_being_written_is_read_and_indexed_once_whole(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    log.record(make(0))
    day_file = log.day_file(DAYS[0].date())
    line = make(3).model_dump_json().encode()
    with day_file.open("ab") as file:
        file.write(line[:20])
    assert [r.call_id for r in log.read()] == ["call_0"] and log.skipped == ["2024-05-01.jsonl:2: not JSON"]
    with day_file.open("ab") as file:
        file.write(line[20:])
    assert [r.call_id for r in log.read()] == ["call_0", "call_3"] and log.skipped == []
    log.record(make(6))
    assert [r.call_id for r in log.read()] == ["call_0", "call_3", "call_6"] and log.skipped == []
    assert json.loads(index_path(day_file).read_text())["end"] == day_file.stat().st_size


@pytest.mark.parametrize("change", ["replaced", "truncated", "rewritten in place", "replaced by a longer one",
                                    "index damaged", "index deleted"])
def test_the_index_follows_a_day_file_that_changed(tmp_path: Path, change: str) -> None:
    log = ActionLog(tmp_path)
    for n in range(0, 60, 3):
        log.record(make(n, session_id="s-0"))
    day_file = log.day_file(DAYS[0].date())
    assert len(log.read(session_id="s-0")) == 20
    lines = day_file.read_bytes().splitlines(keepends=True)
    if change == "replaced":
        other = day_file.with_name("other")
        other.write_bytes(b"".join(lines[5:9]))
        os.replace(other, day_file)
    elif change == "truncated":
        with day_file.open("r+b") as file:
            file.truncate(sum(map(len, lines[:7])))
    elif change == "rewritten in place":  # the same size, another session on one line, saved a moment later
        before = day_file.stat().st_mtime_ns
        day_file.write_bytes(b"".join(lines).replace(b'"session_id":"s-0","call_id":"call_9"',
                                                     b'"session_id":"s-9","call_id":"call_9"'))
        os.utime(day_file, ns=(before + 10**9, before + 10**9))
    elif change == "replaced by a longer one":  # the same inode, other lines, longer than the part indexed
        day_file.write_bytes(b"".join(lines[1:]) + make(90, session_id="s-9").model_dump_json().encode() + b"\n"
                             + make(93, session_id="s-0").model_dump_json().encode() + b"\n")
    elif change == "index damaged":
        index_path(day_file).write_text('{"version": 1, "end": 12, "offsets": [0, 1], "ts": []}')
    else:
        index_path(day_file).unlink()
    records, _ = full_scan(tmp_path)
    for session in [None, "s-0", "s-9"]:
        assert log.read(session_id=session) == keep(records, session=session), (change, session)
    assert log.skipped == []
    assert json.loads(index_path(day_file).read_text())["end"] == day_file.stat().st_size


def test_a_read_only_log_still_reads(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    log.record(make(0))
    log.record(make(3))
    (tmp_path / ".betty/actions/.index").write_text("a file where the index folder should be")
    assert [r.call_id for r in log.read()] == ["call_0", "call_3"]


@pytest.mark.parametrize("damage", [{"offsets": ["0"]}, {"sessions": [99]}, {"oks": [1]}, {"strings": [1]},
                                    {"end": "12"}, {"version": 0}, {"skipped": [[1]]}])
def test_an_index_edited_into_nonsense_is_made_again(tmp_path: Path, damage: dict[str, Any]) -> None:
    log = ActionLog(tmp_path)
    log.record(make(0, session_id="s-0"))
    where = index_path(log.day_file(DAYS[0].date()))
    assert [r.call_id for r in log.read(session_id="s-0")] == ["call_0"]
    where.write_text(json.dumps({**json.loads(where.read_text()), **damage}))
    assert [r.call_id for r in log.read(session_id="s-0")] == ["call_0"]
    assert log.read() == full_scan(tmp_path)[0]


def test_a_day_file_replaced_while_it_is_read_is_one_clear_error(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    log.record(make(0))
    selected = log.select()
    day_file = log.day_file(DAYS[0].date())
    day_file.write_bytes(b"x" * day_file.stat().st_size)
    with pytest.raises(ActionLogError, match="changed while it was read; read it again"):
        list(log.summaries(selected))
    with pytest.raises(ActionLogError, match="changed while it was read; read it again"):
        list(log.records(selected))
