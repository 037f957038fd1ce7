"""The action log as a timeline: every session's calls in lanes, a dry-run replay, and a bug bundle.

- :func:`timeline` reads the action log (through :class:`~.actions.ActionLog`'s index, no
  parser of its own) and puts each call in a *lane*: the session's own calls, each delegated
  helper's calls (records of the session with the helper's ``task``), each automation run's
  calls (session ``automation-<run id>``). A helper's lane is linked to the ``delegate_tasks``
  call of the session that handed it its task: one naming the task's title that was running
  when the helper called (a call waiting for its tasks is logged when they end), else the
  latest that ended before (tasks left in the background); an automation run's lane names
  what fired it.
- :func:`replay_calls` makes each call's preview again with Betty's own tools (a dry run:
  :func:`~.actions.replay`, never ``run``) and says where today's preview differs.
- :func:`bug_bundle` is one zip a person can attach to a bug report: the session's events,
  its action-log lines and Betty's configuration, every one through
  :func:`~.actions.without_secrets` with the secrets Betty knows of (the configuration's,
  the model's key, the process's secret-named variables) blanked everywhere.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import zipfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal, Mapping

from ..secret_names import is_secret_name
from .actions import ActionLog, ActionRecord, PreviewFunction, replay, secret_values, without_secrets
from .registry import default_registry
from .tools.base import ToolContext

if TYPE_CHECKING:
    from ..cluster.profiles import ClusterProfile
    from ..experiments.workspace import Workspace
    from .models import Preview

LaneKind = Literal["session", "helper", "automation"]
AUTOMATION_PREFIX = "automation-"
DELEGATE_TOOL = "delegate_tasks"
MAX_CALLS = 5000
TASK_SEPARATOR = " › "


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a session's own calls, one delegated helper's, or one automation run's."""

    id: str
    kind: LaneKind
    session_id: str
    title: str
    started_by: str | None = None
    """The call id of the call that started it (a helper's ``delegate_tasks`` call), when known."""
    trigger: str = ""
    """What fired an automation run: manual, schedule, webhook, job."""


@dataclass(frozen=True)
class Filters:
    """Which calls a timeline, a replay or a bundle takes: of one session, one tool, one decision (None: any)."""

    session: str | None = None
    tool: str | None = None
    decision: str | None = None

    def keeps(self, record: ActionRecord) -> bool:
        """Whether ``record`` passes the tool and decision filters (the session is selected by the index)."""
        return ((self.tool is None or record.tool == self.tool)
                and (self.decision is None or record.decision.value == self.decision))


def timeline(log: ActionLog, filters: Filters = Filters(), trigger_of: Callable[[str], str] | None = None,
             limit: int = MAX_CALLS) -> dict[str, Any]:
    """``{calls, lanes, sessions, tools, decisions, skipped}``: the newest ``limit`` calls that pass ``filters``,
    oldest first, each with its ``lane``; the lanes they fill; and the choices the filters offer.

    ``trigger_of(run_id)`` says what fired an automation run. Lanes are worked out from every
    call of the session(s), so a helper keeps its link when its starting call is filtered out.
    """
    records = list(log.records(log.select(session_id=filters.session)))
    lanes, lane_of = _lanes(records, trigger_of or (lambda run_id: ""))
    kept = [record for record in records if filters.keeps(record)][-limit:]
    used = {lane_of[id(record)] for record in kept}
    return {
        "calls": [{**record.model_dump(mode="json"), "lane": lane_of[id(record)]} for record in kept],
        "lanes": [asdict(lane) for lane in lanes if lane.id in used],
        "sessions": sorted({record.session_id for record in records}),
        "tools": sorted({record.tool for record in records}),
        "decisions": sorted({record.decision.value for record in records}),
        "skipped": len(log.skipped),
    }


def _lanes(records: list[ActionRecord], trigger_of: Callable[[str], str]) -> tuple[list[Lane], dict[int, str]]:
    """The lanes of ``records`` (by session in order of its first call, each session's helpers under it), and
    each record's lane id (by ``id(record)``)."""
    lanes: dict[str, Lane] = {}
    lane_of: dict[int, str] = {}
    triggers: dict[str, str] = {}

    def trigger(run_id: str) -> str:  # one look-up per run, not per call
        if run_id not in triggers:
            triggers[run_id] = trigger_of(run_id)
        return triggers[run_id]

    delegations: dict[str, list[ActionRecord]] = {}  # session -> its delegate_tasks calls, oldest first
    for record in records:
        if record.tool == DELEGATE_TOOL and record.ok is not False:
            delegations.setdefault(record.session_id, []).append(record)
    for record in records:
        lane = _lane(record, delegations.get(record.session_id, []), trigger)
        lanes.setdefault(lane.id, lane)
        lane_of[id(record)] = lane.id
    sessions = list(dict.fromkeys(lane.session_id for lane in lanes.values()))
    ordered = sorted(enumerate(lanes.values()),  # each session's own lane first, its helpers under it
                     key=lambda item: (sessions.index(item[1].session_id), item[1].kind == "helper", item[0]))
    return [lane for _, lane in ordered], lane_of


def _lane(record: ActionRecord, delegations: list[ActionRecord], trigger_of: Callable[[str], str]) -> Lane:
    session = record.session_id
    if session.startswith(AUTOMATION_PREFIX):
        run_id = session.removeprefix(AUTOMATION_PREFIX)
        return Lane(session, "automation", session, record.task or session, trigger=trigger_of(run_id))
    if record.task:
        title = record.task.split(TASK_SEPARATOR)[-1]
        starter = _starter(record, [call for call in delegations if title in _task_titles(call)])
        if starter is not None:
            return Lane(f"{session}/{starter.call_id}/{title}", "helper", session, record.task,
                        started_by=starter.call_id)
    return Lane(session, "session", session, session)


def _starter(record: ActionRecord, candidates: list[ActionRecord]) -> ActionRecord | None:
    """The ``delegate_tasks`` call that handed ``record``'s helper its task: the one running when the helper
    called (a call that waits for its tasks is logged once they end), else the latest that ended before it
    (one that left them in the background)."""
    for call in candidates:
        if call.ts - call.duration_ms / 1000 <= record.ts <= call.ts:
            return call
    before = [call for call in candidates if call.ts <= record.ts]
    return before[-1] if before else None


def _task_titles(call: ActionRecord) -> set[str]:
    tasks = call.args.get("tasks")
    if not isinstance(tasks, list):
        return set()
    return {str(task.get("title")) for task in tasks if isinstance(task, dict) and task.get("title")}


# ----- replay -------------------------------------------------------------------------------------

@contextmanager
def tool_previews(profile: "ClusterProfile", workspace: "Workspace") -> Iterator[PreviewFunction]:
    """``preview(tool, args)`` with Betty's own tools on ``profile``'s cluster: dry runs only, never ``run``.

    It runs its own event loop: call it from a thread of its own (the server does), never from a running loop.
    """
    registry = default_registry()
    context = ToolContext.open(profile, workspace, "replay")
    loop = asyncio.new_event_loop()

    def preview(tool: str, tool_args: dict[str, Any]) -> "Preview":
        return loop.run_until_complete(registry.get(tool).dry_run(context, tool_args))

    try:
        yield preview
    finally:
        loop.run_until_complete(context.close())
        loop.close()


def replay_calls(log: ActionLog, filters: Filters, preview: PreviewFunction) -> list[dict[str, Any]]:
    """Each call that passes ``filters`` with its preview made again by ``preview`` (nothing runs):
    ``{call_id, session_id, ts, tool, status, diff, recorded, current}``, oldest first."""
    records = [record for record in log.records(log.select(session_id=filters.session)) if filters.keeps(record)]
    return [{"call_id": line.record.call_id, "session_id": line.record.session_id, "ts": line.record.ts,
             "tool": line.record.tool, "status": line.status, "diff": line.diff,
             "recorded": None if line.record.preview is None else line.record.preview.model_dump(mode="json"),
             "current": None if line.current is None else line.current.model_dump(mode="json")}
            for line in replay(records, preview)]


# ----- the bug bundle -----------------------------------------------------------------------------

def known_secrets(config: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Every secret value Betty can name: under a secret-looking key of ``config``, of a secret-named variable
    of ``environ``, and the model's key (the variable ``llm.api_key_env`` names, the file ``llm.api_key_file``)."""
    found = set(secret_values(dict(config)))
    found.update(value for name, value in environ.items() if value and is_secret_name(name))
    llm = config.get("llm") or {}
    if isinstance(llm, Mapping):
        variable = llm.get("api_key_env")
        if isinstance(variable, str) and environ.get(variable):
            found.add(environ[variable])
        key_file = llm.get("api_key_file")
        if isinstance(key_file, str) and key_file:
            try:
                found.add(Path(key_file).expanduser().read_text(encoding="utf-8").strip())
            except OSError:
                pass  # a key Betty cannot read is a key it cannot leak
    return sorted((value for value in found if value), key=len, reverse=True)


def bug_bundle(log: ActionLog, session_id: str, events: Iterable[Mapping[str, Any]], config: Mapping[str, Any],
               environ: Mapping[str, str] | None = None) -> bytes:
    """A zip of ``session_id``'s events (``events.jsonl``), its action-log lines (``actions.jsonl``) and
    ``config`` (``config.json``), each without any secret; ``environ`` defaults to this process's."""
    secrets = known_secrets(config, os.environ if environ is None else environ)
    records = log.records(log.select(session_id=session_id))
    files = {
        "events.jsonl": "".join(_line(without_secrets(event, secrets)) for event in joined_deltas(events)),
        "actions.jsonl": "".join(_line(without_secrets(record.model_dump(mode="json"), secrets))
                                 for record in records),
        "config.json": json.dumps(without_secrets(dict(config), secrets), indent=2, ensure_ascii=False,
                                  default=str) + "\n",
        "README.txt": (f"Betty bug bundle of session {without_secrets(session_id, secrets)}: its events, its "
                       "action-log lines and Betty's configuration, every secret replaced by [redacted].\n"),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as bundle:  # stored: a plain byte search reads it all
        for name, text in files.items():
            bundle.writestr(name, text)
    return buffer.getvalue()


def joined_deltas(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with the ``message_delta`` pieces of each reply joined into one, at the first piece's place.

    A secret streamed in pieces is whole again, so redaction finds it as it would in the whole message.
    The pieces of one reply are those up to its ``message`` (or the turn's ``done`` or ``error``).
    """
    joined: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for event in events:
        kind = event.get("type")
        if kind == "message_delta":
            text = str((event.get("payload") or {}).get("text", ""))
            if pending is None:
                pending = {**event, "payload": {**(event.get("payload") or {}), "text": text}}
                joined.append(pending)
            else:
                pending["payload"]["text"] += text
            continue
        if kind in _REPLY_ENDS:
            pending = None
        joined.append(dict(event))
    return joined


_REPLY_ENDS = frozenset({"message", "done", "error"})


def _line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str) + "\n"
