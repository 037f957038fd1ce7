"""The action log: one JSON line per tool call, append-only, one file per day.

::

    <workspace>/.betty/actions/2024-05-01.jsonl      one ActionRecord per line, oldest first
    <workspace>/.betty/actions/outputs/<call>.txt    a call's full output, named by output_ref
    <workspace>/.betty/actions/.lock                 held while a line or an output is written

- The day is the local date of the record's ``ts``; lines are only ever appended, never
  rewritten, under a lock file shared by every process (``flock``, as ``filelock`` takes it), each append
  reaching the disk.
- A line torn by a crash (or edited by hand into nonsense) is skipped when reading and
  counted in :attr:`ActionLog.skipped`; the next append starts on a fresh line.
- Each day file has an index beside it (``.index/<day>.json``, :mod:`.action_index`) that
  says where each record starts and its session, tool and decision: :meth:`ActionLog.select`
  answers from it, reading only the lines appended since, and :meth:`ActionLog.records`
  reads just the records selected, one at a time.
- Secrets are never written: the value of any argument whose key looks like a secret
  (``api_key``, ``password``, ``token``, ``secret``, …; the rule is
  :func:`betty_jupyter.secret_names.is_secret_name`) becomes ``"[redacted]"``, and those
  values are also blanked wherever they appear in the preview, summary and full output.
  Secrets no key points at are blanked from every text too: ``export OPENAI_API_KEY=…`` in a
  script, ``--api-key …`` in a command, the password of ``https://user:password@host``, a
  bearer token, a key of a well-known shape (:func:`~betty_jupyter.secret_names.blank_secret_text`).
- :func:`replay` re-runs only previews (never actions) and says which changed since.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ActionLogError as ActionLogError  # defined with the others, importable here too
from ..errors import BettyError
from ..secret_names import REDACTED as REDACTED, blank_secret_text, is_secret_name
from ..wiki.files import append_durably, sync_directory
from ..wiki.page_lock import LockTimeout, acquire
from .action_index import IndexedLine, load_index, parse_line
from .models import Preview
from .vocabulary import Decision

log = logging.getLogger(__name__)

ACTIONS_DIR = Path(".betty") / "actions"
LOCK_TIMEOUT = 30.0
MIN_BLANKED = 4

_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.jsonl")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")





class ActionRecord(BaseModel):
    """One tool call as it happened: what was asked, who decided, what came of it.

    ``ok`` is None when the tool did not run (denied, refused, timed out); ``output_ref`` is
    the workspace-relative path of the full output, when one was kept.
    """

    model_config = ConfigDict(extra="ignore")

    ts: float = Field(default_factory=time.time, ge=0, le=253402300799)  # up to the last second of 9999
    session_id: str
    call_id: str
    tool: str
    tier: int = Field(ge=0, le=2)
    task: str | None = None
    """Whom the session worked for when not the person's own chat: a delegated task, an automation, an MCP client."""
    args: dict[str, Any] = Field(default_factory=dict)
    preview: Preview | None = None
    digest: str | None = None
    """The digest of the card the approver answered (``sha256:<hex>``), when the call was shown on a card."""
    decision: Decision
    approver: str | None = None
    ok: bool | None = None
    summary: str = ""
    output_ref: str | None = None
    duration_ms: float = Field(default=0.0, ge=0)
    artifacts: list[str] = Field(default_factory=list)

    @property
    def day(self) -> date:
        """The local date the record belongs to (its file)."""
        return datetime.fromtimestamp(self.ts).date()


class ActionLog:
    """The action log of the workspace at ``workspace_root``; safe to share between processes."""

    def __init__(self, workspace_root: str | Path) -> None:
        self.workspace_root = Path(workspace_root).expanduser().absolute()
        self.directory = self.workspace_root / ACTIONS_DIR
        self.outputs = self.directory / "outputs"
        self.skipped: list[str] = []
        """Where the last :meth:`read` found unreadable lines (``file:line: why``)."""

    def record(self, record: ActionRecord, full_output: str | None = None) -> ActionRecord:
        """Append ``record`` (secrets redacted; ``full_output`` stored beside it) and return what was written."""
        secrets = secret_values(record.args)
        record = record.model_copy(update={
            "args": redact(record.args),
            "summary": blank(record.summary, secrets),
            "preview": _blank_preview(record.preview, secrets),
        })
        line = record.model_dump_json() + "\n"
        with self._locked():
            if full_output is not None:
                record = record.model_copy(update={"output_ref": self._store_output(record.call_id,
                                                                                    blank(full_output, secrets))})
                line = record.model_dump_json() + "\n"
            self._append(self.day_file(record.day), line)
        return record

    def read(self, day: date | None = None, session_id: str | None = None,
             tool: str | None = None) -> list[ActionRecord]:
        """The records of ``day`` (every day when None), of one session and one tool when given, oldest day first."""
        records = list(self.records(self.select(day, session_id, tool)))
        if self.skipped:
            log.warning("skipped %d unreadable line(s) of the action log in %s: %s", len(self.skipped),
                        self.directory, ", ".join(self.skipped[:5]) + (" …" if len(self.skipped) > 5 else ""))
        return records

    def select(self, day: date | None = None, session_id: str | None = None,
               tool: str | None = None) -> list[IndexedLine]:
        """Where the records of ``day`` (every day when None), of one session and one tool when given, are.

        Answered from each day file's index (brought up to date first, reading only what was
        appended since); :attr:`skipped` says which lines of those files are unreadable.
        :meth:`records` reads the records themselves.
        """
        self.skipped = []
        files = [self.day_file(day)] if day is not None else [self.day_file(d) for d in self.days()]
        found: list[IndexedLine] = []
        for path in files:
            try:
                index, partial = load_index(path, ActionRecord)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ActionLogError(f"cannot read the action log {path}: {exc.strerror or exc}") from exc
            self.skipped.extend(f"{path.name}:{number}: {why}" for number, why in index.skipped)
            found.extend(index.selected(path, session_id, tool))
            if partial.strip():  # the last line, still being written (or torn by a crash): read, never indexed
                record, why = parse_line(partial, ActionRecord)
                if record is None:
                    self.skipped.append(f"{path.name}:{index.lines + 1}: {why}")
                elif (session_id is None or record.session_id == session_id) and (tool is None or record.tool == tool):
                    found.append(IndexedLine(path, index.end, record.ts, record.session_id, record.tool,
                                             str(record.decision.value), record.ok))
        return found

    def lines(self, selected: Iterable[IndexedLine]) -> Iterator[tuple[IndexedLine, bytes]]:
        """Each selected record's place and its JSON text, read from its day file as it is asked for."""
        file: BinaryIO | None = None
        path: Path | None = None
        try:
            for line in selected:
                if line.path != path:
                    if file is not None:
                        file.close()
                    path = line.path
                    try:
                        file = open(path, "rb")
                    except OSError as exc:
                        raise ActionLogError(f"cannot read the action log {path}: {exc.strerror or exc}") from exc
                assert file is not None
                file.seek(line.offset)
                yield line, file.readline()
        finally:
            if file is not None:
                file.close()

    def summaries(self, selected: Iterable[IndexedLine]) -> Iterator[tuple[IndexedLine, str]]:
        """Each selected record's place and summary: with the index's fields, all a listing shows, read one at a
        time with the plain JSON reader (the line was checked as a record when it was indexed)."""
        for line, raw in self.lines(selected):
            try:
                summary = json.loads(raw.decode("utf-8", "replace"))["summary"]
            except (ValueError, KeyError, TypeError):
                summary = None
            if not isinstance(summary, str):
                raise ActionLogError(f"the action log {line.path} changed while it was read; read it again")
            yield line, summary

    def records(self, selected: Iterable[IndexedLine]) -> Iterator[ActionRecord]:
        """The selected records, read one at a time."""
        for line, raw in self.lines(selected):
            try:
                record = ActionRecord.model_validate_json(raw)
            except ValidationError:
                raise ActionLogError(f"the action log {line.path} changed while it was read; "
                                     "read it again") from None
            yield record

    def days(self) -> list[date]:
        """The days that have a log file, oldest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            match = _DAY_FILE.fullmatch(path.name)
            if match:
                try:
                    found.append(date.fromisoformat(match.group(1)))
                except ValueError:
                    continue
        return sorted(found)

    def day_file(self, day: date) -> Path:
        """The log file of ``day``."""
        return self.directory / f"{day.isoformat()}.jsonl"

    def output(self, record: ActionRecord) -> str | None:
        """The full output kept for ``record``, or None when none was kept (or it is gone)."""
        if record.output_ref is None:
            return None
        path = (self.workspace_root / record.output_ref).resolve()
        if not path.is_relative_to(self.outputs.resolve()):
            return None  # a hand-edited line must not make us read outside the log
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ActionLogError(f"cannot create the action log folder {self.directory}: "
                                 f"{exc.strerror or exc}") from exc
        try:
            release = acquire(self.directory / ".lock", timeout=LOCK_TIMEOUT)
        except LockTimeout:
            raise ActionLogError(f"the action log in {self.directory} is held by another process for more than "
                                 f"{LOCK_TIMEOUT:g} s; try again in a moment") from None
        try:
            yield
        finally:
            release()

    def _append(self, path: Path, line: str) -> None:
        try:
            created = not path.exists()
            path.touch(exist_ok=True)
            append_durably(path, line)
            if created:
                sync_directory(path.parent)
        except OSError as exc:
            raise ActionLogError(f"cannot append to the action log {path}: {exc.strerror or exc}") from exc

    def _store_output(self, call_id: str, text: str) -> str:
        """Write ``text`` to a new file under outputs/ (never over an earlier one); its workspace-relative path."""
        stem = call_id if _SAFE_NAME.fullmatch(call_id) else "call"
        try:
            self.outputs.mkdir(parents=True, exist_ok=True)
            for attempt in range(1, 10_000):
                path = self.outputs / (f"{stem}.txt" if attempt == 1 else f"{stem}-{attempt}.txt")
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                except FileExistsError:
                    continue
                with os.fdopen(fd, "wb") as file:
                    file.write(text.encode("utf-8"))
                    file.flush()
                    os.fsync(file.fileno())
                return path.relative_to(self.workspace_root).as_posix()
        except OSError as exc:
            raise ActionLogError(f"cannot store the output of {call_id!r} under {self.outputs}: "
                                 f"{exc.strerror or exc}") from exc
        raise ActionLogError(f"too many outputs named {stem} under {self.outputs}; move old ones away")


def redact(value: Any) -> Any:
    """``value`` with every secret-looking key's value replaced by ``"[redacted]"``, at any depth.

    Texts are blanked of the secrets :func:`blank_secret_text` finds in them.
    """
    if isinstance(value, dict):
        return {key: REDACTED if is_secret_name(str(key)) else redact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return blank_secret_text(value)
    return value


def secret_values(value: Any) -> list[str]:
    """The secret strings in ``value`` (under secret-looking keys), longest first."""
    found: set[str] = set()

    def walk(item: Any, secret: bool) -> None:
        if isinstance(item, dict):
            for key, inner in item.items():
                walk(inner, secret or is_secret_name(str(key)))
        elif isinstance(item, (list, tuple)):
            for inner in item:
                walk(inner, secret)
        elif secret and item is not None and not isinstance(item, bool) and str(item):
            found.add(str(item))

    walk(value, False)
    return sorted(found, key=len, reverse=True)


def blank(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets``, and every secret :func:`blank_secret_text` finds, replaced by ``"[redacted]"``.

    Values shorter than ``MIN_BLANKED`` characters are left in free text (they are still
    redacted in the arguments): blanking every ``1`` or ``a`` would ruin the log and hide nothing.
    """
    for secret in secrets:
        if len(secret) >= MIN_BLANKED:
            text = text.replace(secret, REDACTED)
    return blank_secret_text(text)


def _blank_preview(preview: Preview | None, secrets: list[str]) -> Preview | None:
    if preview is None:
        return None
    return preview.model_copy(update={"title": blank(preview.title, secrets), "text": blank(preview.text, secrets),
                                      "details": without_secrets(preview.details, secrets)})


def without_secrets(value: Any, secrets: list[str]) -> Any:
    """``value`` (JSON-like, at any depth) with nothing secret left: :func:`redact`, then each of ``secrets``
    blanked from every text (:func:`blank`). The one helper for anything that leaves Betty (a bug bundle)."""
    return _blank_values(redact(value), secrets)


def _blank_values(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return blank(value, secrets)
    if isinstance(value, dict):
        return {key: _blank_values(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_blank_values(item, secrets) for item in value]
    return value


ReplayStatus = Literal["same", "changed", "not recorded", "gone", "failed"]


@dataclass(frozen=True)
class ReplayLine:
    """One record replayed: its preview then and now.

    ``status`` is ``same`` (what would run is what was shown; ``diff`` says what the title and details
    say differently now, such as a job's state), ``changed`` (``diff`` says how), ``not recorded`` (no
    preview was logged; ``current`` is today's), ``gone`` (Betty cannot preview it now, say a job Slurm
    no longer knows; ``diff`` says why, in words) or ``failed`` (the tool's preview code broke; ``diff``
    holds how).
    """

    record: ActionRecord
    status: ReplayStatus
    diff: str = ""
    current: Preview | None = None


PreviewFunction = Callable[[str, dict[str, Any]], Preview]


def replay(records: Iterable[ActionRecord], preview: PreviewFunction, max_diff_lines: int = 20) -> list[ReplayLine]:
    """Make each record's preview again with ``preview(tool, args)`` (a dry run) and compare it with the logged one.

    Nothing is run: ``preview`` must only build previews. A preview that raises is reported as
    ``failed`` with its one-line reason, and the replay goes on.
    """
    lines = []
    for record in records:
        try:
            current = Preview.model_validate(preview(record.tool, dict(record.args)))
        except BettyError as exc:  # what it reads is gone or refused now: no fault of the log or the tool
            lines.append(ReplayLine(record, "gone", _one_line(str(exc))))
            continue
        except Exception as exc:  # a tool's own preview code: report it, keep replaying the rest
            lines.append(ReplayLine(record, "failed", f"{type(exc).__name__}: {_one_line(str(exc))}"))
            continue
        if record.preview is None:
            lines.append(ReplayLine(record, "not recorded", "", current))
        elif current == record.preview:
            lines.append(ReplayLine(record, "same", "", current))
        elif (current.kind, current.text) == (record.preview.kind, record.preview.text):
            lines.append(ReplayLine(record, "same", preview_diff(record.preview, current, max_diff_lines), current))
        else:
            lines.append(ReplayLine(record, "changed", preview_diff(record.preview, current, max_diff_lines), current))
    return lines


def preview_diff(before: Preview, after: Preview, max_lines: int = 20) -> str:
    """A short diff between two previews: changed kind, title and details, then the text as a unified diff."""
    lines = [f"{name}: {getattr(before, name)!r} → {getattr(after, name)!r}"
             for name in ("kind", "title") if getattr(before, name) != getattr(after, name)]
    for key in sorted(set(before.details) | set(after.details)):
        if before.details.get(key) != after.details.get(key):
            lines.append(f"details.{key}: {before.details.get(key)!r} → {after.details.get(key)!r}")
    if before.text != after.text:
        text_diff = difflib.unified_diff(before.text.splitlines(), after.text.splitlines(), "recorded", "now",
                                         n=1, lineterm="")
        lines.extend(text_diff)
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"… ({len(lines) - max_lines} more lines)"]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
