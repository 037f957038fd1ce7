"""The chat WebSocket: ``sessions/{id}/ws?after=N`` replays the session's events after N, then streams them.

The front-end sends ``ask``, ``approval`` and ``stop`` messages (``models.SocketMessage``); a bad
one is answered with a ``{type: "server_error", message}`` frame (``models.ServerError``: not an
event, so it can never be mistaken for the agent's ``error`` event) and changes nothing. When the last
socket of a session closes, its open approvals are cancelled (fail closed).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Callable

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..agent.vocabulary import Decision, Face
from ..errors import BettyError
from ..json_text import parse_json
from .base import approver, refused
from .open_notebook import remember_context

if TYPE_CHECKING:
    from ..agent.events import AnyEvent
    from .models import ServerError
    from .services import BettyServices


_CHECKING: set["asyncio.Future[None]"] = set()
"""Edited answers from sockets being checked before they answer their card."""


class ChatSocket(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """One front-end's socket on one chat session."""

    session_id: str = ""
    after: int = 0
    _unsubscribe: Callable[[], None] | None = None

    def set_default_headers(self) -> None:
        """No page headers on a socket (as jupyter_server's own sockets)."""

    @property
    def services(self) -> "BettyServices":
        """What the extension app built at start-up."""
        services: BettyServices = self.settings["betty_services"]
        return services

    @property
    def person(self) -> str:
        """Who answers cards on this socket, as the action log names an approver."""
        return approver(self.current_user, Face.SIDE_PANEL)

    @ws_authenticated
    async def get(self, session_id: str) -> None:
        """Check the session and ``after`` before the upgrade (a 404 or 400 is a plain HTTP answer)."""
        try:
            self.services.assistant.opened(session_id)
        except BettyError:
            raise refused(404, f"no open session {session_id[:40]!r}; open it with POST sessions") from None
        text = self.get_query_argument("after", "0") or "0"
        if not text.isdigit():
            raise refused(400, f"?after= takes the last seq you saw (a whole number), not {text[:30]!r}")
        self.session_id, self.after = session_id, int(text)
        self.services.start()
        await super().get(session_id)

    def open(self, session_id: str) -> None:
        """Replay the events after ``after``, then stream each new one."""
        super().open()
        loop = asyncio.get_running_loop()
        stream = self.services.assistant.opened(session_id).stream

        def forward(event: "AnyEvent") -> None:  # may run in another thread: hand it to the loop, in order
            loop.call_soon_threadsafe(self._send, event.model_dump_json())

        self._unsubscribe = stream.subscribe(forward, after=self.after)
        self.services.connected(session_id, self)

    def on_message(self, message: str | bytes) -> None:
        """Act on one front-end message; a bad one gets a ``server_error`` frame."""
        # lazy: pydantic and the tools; the server's extension loads without them
        from pydantic import TypeAdapter, ValidationError

        # lazy: pydantic and the tools; the server's extension loads without them
        from ..agent.tools.base import validation_problems
        from .models import ApprovalMessage, AskMessage, SocketMessage

        try:
            data = parse_json(message)
            request = TypeAdapter(SocketMessage).validate_python(data)
            if isinstance(request, AskMessage):
                remember_context(self.settings, self.services, self.session_id, request.context)
                self.services.assistant.ask(self.session_id, request.prompt, request.context)
            elif isinstance(request, ApprovalMessage) and request.decision == Decision.EDITED and request.args:
                checking = asyncio.ensure_future(self._answer_edited(request.approval_id, request.args,
                                                                     request.digest))
                _CHECKING.add(checking)  # held until done: the loop keeps only a weak reference
                checking.add_done_callback(_CHECKING.discard)
            elif isinstance(request, ApprovalMessage):
                self.services.assistant.respond(request.approval_id, request.decision, self.person, request.args,
                                                request.digest)
            else:
                self.services.assistant.stop(self.session_id)
        except ValueError as error:
            problems = validation_problems(error) if isinstance(error, ValidationError) else [str(error)]
            self._refuse("a message is {type: ask|approval|stop, …}: " + "; ".join(problems))
        except BettyError as error:
            self._refuse(str(error))

    async def _answer_edited(self, approval_id: str, args: dict[str, Any], digest: str | None) -> None:
        """An edit is checked by the tool's own code first; a refused one leaves the card open, with its one line."""
        try:
            await self.services.assistant.repreview(approval_id, args)
            self.services.assistant.respond(approval_id, Decision.EDITED, self.person, args, digest)
        except BettyError as error:
            self._refuse(str(error))

    def on_close(self) -> None:
        """Stop streaming; the session's last socket going away cancels its open approvals."""
        if self.ping_callback is not None:
            self.ping_callback.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
            self.services.disconnected(self.session_id, self)

    def _refuse(self, message: str) -> None:
        error: ServerError = {"type": "server_error", "message": message}
        self._send(json.dumps(error))

    def _send(self, text: str) -> None:
        try:
            sent = self.write_message(text)
        except WebSocketClosedError:
            return
        sent.add_done_callback(_quiet)


def _quiet(sent: "asyncio.Future[Any]") -> None:
    """A frame the peer left before receiving is not an error: the next connection replays it."""
    if not sent.cancelled():
        sent.exception()


handlers = [
    (r"/betty/api/sessions/(?P<session_id>[^/]+)/ws", ChatSocket),
]
"""The chat socket route."""
