"""Chat sessions over REST: open, list, mode, ask, stop, events (long poll), the tools and a person's own calls."""

from __future__ import annotations

import uuid

from tornado import web

from .base import BettyHandler, approver, refused
from .open_notebook import remember_context

MAX_WAIT = 30.0
SESSION = r"/betty/api/sessions/(?P<session_id>[^/]+)"


class SessionsHandler(BettyHandler):
    """``GET sessions``: the open sessions; ``POST sessions``: open (or resume) one."""

    @web.authenticated
    def get(self) -> None:
        """The open sessions, oldest first."""
        self.answer({"sessions": [self.services.info(s.session_id) for s in self.assistant.sessions()]})

    @web.authenticated
    async def post(self) -> None:
        """A new session on ``cluster`` in ``mode``, or the kept ``session_id`` resumed: 201 Session."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import SessionRequest

        request = self.body(SessionRequest)
        cluster = self.cluster_name(request.cluster)
        session = await self.services.session(request.session_id, cluster=cluster, mode=request.mode,
                                              agent=request.agent)
        self.answer(self.services.info(session.session_id), status=201)


class SessionHandler(BettyHandler):
    """``GET sessions/{id}``: one open session."""

    @web.authenticated
    def get(self, session_id: str) -> None:
        """The session, or 404."""
        self.session_of(session_id)
        self.answer(self.services.info(session_id))


class ModeHandler(BettyHandler):
    """``PUT sessions/{id}/mode``: switch the agent between off, propose, confirm and auto."""

    @web.authenticated
    def put(self, session_id: str) -> None:
        """Set the mode; answers the session."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import ModeRequest

        self.session_of(session_id)
        self.assistant.set_mode(session_id, self.body(ModeRequest).mode)
        self.answer(self.services.info(session_id))


class AskHandler(BettyHandler):
    """``POST sessions/{id}/ask``: the agent starts on ``prompt``; 202 ``{after}``."""

    @web.authenticated
    def post(self, session_id: str) -> None:
        """Start the answer; its events follow ``after``. 409 while the session still answers."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import AskRequest

        session = self.session_of(session_id)
        request = self.body(AskRequest)
        if self.assistant.busy(session_id):
            raise refused(409, f"session {session_id} is still answering; stop it or wait for it to finish")
        after = session.stream.last_seq
        remember_context(self.settings, self.services, session_id, request.context)
        self.assistant.ask(session_id, request.prompt, request.context)
        self.answer({"after": after}, status=202)


class StopHandler(BettyHandler):
    """``POST sessions/{id}/stop``: stop the answer; the session's open approvals are cancelled."""

    @web.authenticated
    def post(self, session_id: str) -> None:
        """``{stopped}``: whether an answer was stopped or a card cancelled."""
        self.session_of(session_id)
        stopped = self.assistant.stop(session_id)
        cancelled = self.assistant.disconnected(session_id, "the person stopped Betty")
        self.answer({"stopped": stopped or bool(cancelled)})


class EventsHandler(BettyHandler):
    """``GET sessions/{id}/events?after=N&wait=S``: the events after N, held up to S seconds until there is one."""

    @web.authenticated
    async def get(self, session_id: str) -> None:
        """``{events, last_seq}``."""
        stream = self.session_of(session_id).stream
        after = int(self.query_number("after", 0, 0, 2**53))
        events = await self.services.events(session_id, after, self.query_number("wait", 0, 0, MAX_WAIT))
        self.answer({"events": [event.model_dump(mode="json") for event in events], "last_seq": stream.last_seq})


class ToolsHandler(BettyHandler):
    """``GET sessions/{id}/tools``: the tools the session may call, each with its tier and arguments' JSON schema."""

    @web.authenticated
    def get(self, session_id: str) -> None:
        """``{tools: [ToolInfo]}``, in the registry's order."""
        self.session_of(session_id)
        self.answer({"tools": self.services.tools(session_id)})


class ToolHandler(BettyHandler):
    """``POST sessions/{id}/tools/{tool}``: a person's own tool call (or another agent's), through the same
    policy, approvals and log; a waiting call whose caller hangs up has its open card cancelled."""

    waiting: tuple[str, str] | None = None

    @web.authenticated
    async def post(self, session_id: str, tool: str) -> None:
        """``wait: true``: the Outcome once it ran; ``wait: false``: 202 ``{call_id, session_id}`` at once."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import ToolRequest

        session = self.session_of(session_id)
        request = self.body(ToolRequest)
        agent = request.caller == "agent"
        if request.wait:
            call_id = request.call_id or f"call_{uuid.uuid4().hex[:12]}"
            self.waiting = (session_id, call_id)
            try:
                if agent:
                    self.answer(await self.services.agent_call(session_id, tool, request.args, call_id))
                else:
                    await self.call_tool(session, tool, request.args, call_id, approver(self.current_user, request.face))
            finally:
                self.waiting = None
            return
        session.registry.get(tool).parse(request.args)  # refused now (400), not later in the background
        call_id = self.services.start_call(session_id, tool, request.args,
                                           None if agent else approver(self.current_user, request.face),
                                           request.call_id)
        self.answer({"call_id": call_id, "session_id": session_id}, status=202)

    def on_connection_close(self) -> None:
        """The caller hung up: a card its call still waits on is cancelled, since nobody would get the answer."""
        if self.waiting is not None:
            self.services.abandoned(*self.waiting)
        super().on_connection_close()


handlers = [
    (r"/betty/api/sessions", SessionsHandler),
    (SESSION, SessionHandler),
    (SESSION + r"/mode", ModeHandler),
    (SESSION + r"/ask", AskHandler),
    (SESSION + r"/stop", StopHandler),
    (SESSION + r"/events", EventsHandler),
    (SESSION + r"/tools", ToolsHandler),
    (SESSION + r"/tools/(?P<tool>[^/]+)", ToolHandler),
]
"""The session routes."""
