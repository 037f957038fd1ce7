"""The action log as a timeline: the calls in lanes, a dry-run replay of their previews, a bug bundle to download.

Every route is authenticated; none of them runs a tool (the replay makes previews only).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import TYPE_CHECKING, Any

from tornado import web

from ..errors import BettyError
from .base import BettyHandler, refused

if TYPE_CHECKING:
    from ..agent.timeline import Filters

MAX_REPLAY = 200
"""The most calls one replay makes previews of: a longer one is narrowed with the filters."""
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class TimelineHandler(BettyHandler):
    """Shared by the timeline routes: the filters of a request, and the automation runs' triggers."""

    def filters(self, session: str | None, tool: str | None, decision: str | None) -> "Filters":
        """The filters asked for; 400 for a session id or a decision that cannot be one."""
        from ..agent.timeline import Filters  # lazy: the action log needs pydantic; the extension loads without it
        from ..agent.vocabulary import Decision  # lazy: as above

        if session is not None and not _SESSION_ID.fullmatch(session):
            raise refused(400, f"{session[:40]!r} is not a session id (letters, digits, - and _)")
        if decision is not None and decision not in {d.value for d in Decision}:
            raise refused(400, f"{decision[:40]!r} is not a decision; one of: {', '.join(d.value for d in Decision)}")
        return Filters(session=session, tool=tool, decision=decision)

    def config_values(self) -> dict[str, Any]:
        """Betty's configuration as its files say now, as a plain object."""
        config = self.betty_config
        return {"clusters": config.clusters, "default_cluster": config.default_cluster, "llm": config.llm,
                "rules": config.rules}

    def without_secrets(self, value: Any) -> Any:
        """``value`` with every secret Betty knows of blanked (:func:`~betty_jupyter.agent.timeline.known_secrets`):
        what the log recorded before a secret was known as one (a token's value in a script) never reaches the page."""
        from ..agent.actions import without_secrets  # lazy: pydantic; the extension loads without it
        from ..agent.timeline import known_secrets  # lazy: as above

        return without_secrets(value, known_secrets(self.config_values(), os.environ))

    def trigger_of(self, run_id: str) -> str:
        """What fired the automation run ``run_id`` ('' when the store no longer knows it)."""
        run = self.services.automations.store.run(run_id)
        return "" if run is None else str(run.trigger)


class TimelineListHandler(TimelineHandler):
    """``GET timeline?session=&tool=&decision=&limit=``: every session's calls with their lanes."""

    @web.authenticated
    def get(self) -> None:
        """``{calls, lanes, sessions, tools, decisions, skipped}``."""
        from ..agent.timeline import MAX_CALLS, timeline  # lazy: pydantic; the extension loads without it

        filters = self.filters(self.query("session"), self.query("tool"), self.query("decision"))
        limit = int(self.query_number("limit", MAX_CALLS, 1, MAX_CALLS))
        self.answer(self.without_secrets(timeline(self.assistant.actions, filters, self.trigger_of, limit)))


class TimelineReplayHandler(TimelineHandler):
    """``POST timeline/replay {session?, tool?, decision?, cluster?}``: each call's preview made again; nothing runs."""

    @web.authenticated
    async def post(self) -> None:
        """``{replay: [{call_id, session_id, ts, tool, status, diff, recorded, current}]}``."""
        from ..agent.timeline import replay_calls, tool_previews  # lazy: the tools; the extension loads without them

        body = self.body_object()
        texts = {name: body.get(name) for name in ("session", "tool", "decision", "cluster")}
        for name, value in texts.items():
            if value is not None and not isinstance(value, str):
                raise refused(400, f"{name} must be a string, not {type(value).__name__}")
        filters = self.filters(texts["session"] or None, texts["tool"] or None, texts["decision"] or None)
        log = self.assistant.actions
        count = sum(1 for record in log.records(log.select(session_id=filters.session)) if filters.keeps(record))
        if count > MAX_REPLAY:
            raise refused(400, f"{count} calls match; a replay takes at most {MAX_REPLAY}: "
                               "choose a session, a tool or a decision")
        profile = self.betty_config.profile(self.cluster_name(texts["cluster"] or None))
        workspace = self.assistant.workspace

        def previews() -> list[dict[str, Any]]:
            with tool_previews(profile, workspace) as preview:
                return replay_calls(log, filters, preview)

        lines = await asyncio.to_thread(previews)  # its own loop, in a thread of its own
        self.answer({"replay": self.without_secrets(lines)})


class TimelineBundleHandler(TimelineHandler):
    """``GET timeline/bundle?session=ID``: a zip of the session's events, action-log lines and configuration,
    with every secret removed."""

    @web.authenticated
    def get(self) -> None:
        """The zip, as a download named after the session; 404 for a session Betty knows nothing of."""
        from ..agent.timeline import bug_bundle  # lazy: pydantic; the extension loads without it

        session_id = self.query("session")
        if session_id is None:
            raise refused(400, "?session= names the session to bundle")
        self.filters(session_id, None, None)
        events = self._events(session_id)
        log = self.assistant.actions
        if not events and not log.select(session_id=session_id):
            raise refused(404, f"Betty knows nothing of session {session_id!r}: no events and no action-log lines")
        data = bug_bundle(log, session_id, events, self.config_values())
        self.set_header("Content-Disposition", f'attachment; filename="betty-bundle-{session_id}.zip"')
        self.finish(data, set_content_type="application/zip")

    def _events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events: an open session's from its stream, an automation run's from its transcript."""
        from ..agent.automations.transcripts import read_transcript, transcript_path  # lazy: as above
        from ..agent.timeline import AUTOMATION_PREFIX  # lazy: as above

        try:
            session = self.assistant.opened(session_id)
        except BettyError:  # not open here: perhaps an automation run's
            session = None
        if session is not None:
            return [event.model_dump(mode="json") for event in session.stream.since(0)]
        if session_id.startswith(AUTOMATION_PREFIX):
            return read_transcript(transcript_path(self.assistant.workspace.state,
                                                   session_id.removeprefix(AUTOMATION_PREFIX)))
        return []


handlers = [
    (r"/betty/api/timeline", TimelineListHandler),
    (r"/betty/api/timeline/replay", TimelineReplayHandler),
    (r"/betty/api/timeline/bundle", TimelineBundleHandler),
]
"""The timeline routes."""
