"""``BettyHandler``: the base of every REST handler — authentication, JSON in and out, errors as statuses.

Status codes exist only here and in the handlers: the core raises Betty's own errors
(``betty_jupyter/errors.py``) and :func:`status_for` maps them (bad input 400, the cluster or
the model unreachable or refusing 502). What needs a 404 or a 409 (an unknown session, an
approval answered twice) the handlers check themselves and raise :func:`refused`. Every
error answer is ``{"error": "one line for a person"}``.
"""

from __future__ import annotations

import getpass
import json
import re
from http.client import responses
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_server.auth import User
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..agent.vocabulary import Face
from ..errors import ActionLogError, BettyError, ModelError, SiteRefusal, SlurmError, TransportError
from ..json_text import TooDeep, parse_json

try:
    from jupyter_server.auth.decorator import allow_unauthenticated as allow_unauthenticated
except ImportError:  # jupyter_server < 2.13 has no allowlist: every handler decides for itself
    def allow_unauthenticated(method: Any) -> Any:  # type: ignore[misc]
        """A no-op where jupyter_server has no such allowlist."""
        return method

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..agent.assistant import Assistant
    from ..agent.loop import AgentSession
    from ..config import BettyConfig
    from .services import BettyServices

B = TypeVar("B", bound="BaseModel")
API_CONTENT_SECURITY_POLICY = (
    "img-src 'none'", "script-src 'none'", "style-src 'none'", "connect-src 'none'",
    "base-uri 'none'", "form-action 'none'", "sandbox",
)
"""What Betty adds to Jupyter's Content-Security-Policy on its API answers (JSON, never a page): should a
browser ever be made to show one as a page, nothing in it may run, load, connect or submit anything. Each
directive is added after Jupyter's (and the site's), so one the site sets itself keeps precedence."""
ANONYMOUS_USERNAME = re.compile(r"[0-9a-f]{32}")
"""The username Jupyter makes up for an identity it does not know (token auth): a random hex id, no person."""
_STATUS: tuple[tuple[type[BettyError], int], ...] = (
    (TransportError, 502), (SlurmError, 502), (ModelError, 502), (ActionLogError, 500), (SiteRefusal, 403),
)


def status_for(error: BettyError) -> int:
    """The HTTP status of one of Betty's errors: 502 when the cluster or the model failed, 403 when the site's policy
    refuses, else 400."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


def refused(status: int, message: str) -> web.HTTPError:
    """An error answer with ``status`` and ``message`` (one line for a person) to raise."""
    return web.HTTPError(status, message)


def error_message(error: BaseException | None, status: int) -> str:
    """The one line an error answer carries."""
    if isinstance(error, BettyError):
        return str(error)
    if isinstance(error, web.HTTPError):
        return error.get_message() or error.reason or responses.get(status, "error")
    return "Betty failed unexpectedly; the Jupyter server's log has the details"


def json_object(text: bytes | str, parsed: Any = None) -> dict[str, Any]:
    """A request body that must be one JSON object (an empty body is ``{}``); 400 otherwise. ``parsed``: the
    body's value when it was read already (:meth:`BettyHandler.prepare`), so it is not parsed twice."""
    try:
        data = parsed if parsed is not None else parse_json(text) if text and text.strip() else {}
    except TooDeep as exc:
        raise refused(400, f"the request body is refused: {exc}; send a flatter JSON object") from None
    except ValueError as exc:
        raise refused(400, f"the request body is not valid JSON ({exc}); send one JSON object") from None
    if not isinstance(data, dict):
        raise refused(400, f"the request body must be one JSON object, not {type(data).__name__}")
    return data


def _read_body(text: bytes | str) -> Any:
    """The JSON value of ``text``; 400 when it nests too deep; None when it is not JSON (the route judges that)."""
    try:
        return parse_json(text)
    except TooDeep as exc:
        raise refused(400, f"the request body is refused: {exc}; send a flatter JSON object") from None
    except ValueError:
        return None


def parse_body(model: type[B], text: bytes | str, parsed: Any = None) -> B:
    """A request body checked by ``model``; a 400 naming each problem on one line when it is refused (``parsed``:
    its value when it was read already)."""
    from pydantic import ValidationError  # lazy: pydantic and the tools; the server's extension loads without them

    # lazy: pydantic and the tools; the server's extension loads without them
    from ..agent.tools.base import validation_problems

    try:
        return model.model_validate(json_object(text, parsed))
    except ValidationError as error:
        raise refused(400, "; ".join(validation_problems(error))) from None


def person_name(user: User | None) -> str:
    """The person behind a Jupyter identity, by name: the identity's own name when it is a person's (a
    JupyterHub or OnDemand login), else (an anonymous identity under token auth, whose username is a random
    hex id) the account the Jupyter server runs as, which is the person on a laptop or an OnDemand session."""
    if user is None or ANONYMOUS_USERNAME.fullmatch(user.username):
        return getpass.getuser()
    return user.name or user.display_name or user.username


def approver(user: User | None, face: Face) -> str:
    """How the action log names a person who answered a card: "alice (side panel)"."""
    return f"{person_name(user)} ({face})"


class BettyHandler(ExtensionHandlerMixin, APIHandler):
    """Base of Betty's REST handlers: every method is ``@web.authenticated`` in the subclasses."""

    _body_value: Any = None
    """The request body's JSON value, read once in :meth:`prepare` (None: not read, or not JSON)."""

    @property
    def content_security_policy(self) -> str:
        """Jupyter's policy for API answers (the site's ``headers`` setting first), then Betty's own."""
        return "; ".join((super().content_security_policy, *API_CONTENT_SECURITY_POLICY))

    @property
    def services(self) -> "BettyServices":
        """What the extension app built at start-up."""
        services: BettyServices = self.settings["betty_services"]
        return services

    @property
    def assistant(self) -> "Assistant":
        """The server's one Assistant."""
        return self.services.assistant

    @property
    def betty_config(self) -> "BettyConfig":
        """Betty's configuration, its clusters as the configuration files say now."""
        return self.services.current_config()

    @property
    def person(self) -> str:
        """Who makes this request, as the action log names an approver (their own calls are the server API's)."""
        return approver(self.current_user, Face.SERVER_API)

    async def prepare(self) -> None:  # type: ignore[override]  # as APIHandler's own
        """Authenticate (Jupyter's own), then make sure the Assistant and its job watcher run on this loop.

        A body nested deeper than any route reads is refused here, on every route, before a handler
        (or a route that reads no body) meets it.
        """
        await super().prepare()
        if self.current_user:
            if self.request.method in ("POST", "PUT", "PATCH") and self.request.body.strip():
                self._body_value = _read_body(self.request.body)
            self.services.start()

    # ----- input --------------------------------------------------------------------------------
    def body(self, model: type[B]) -> B:
        """The JSON body, checked by ``model``."""
        return parse_body(model, self.request.body, self._body_value)

    def body_object(self) -> dict[str, Any]:
        """The JSON body as a plain object (a tool's arguments)."""
        return json_object(self.request.body, self._body_value)

    def query(self, name: str, default: str | None = None) -> str | None:
        """One query argument (stripped), or ``default``."""
        value = self.get_query_argument(name, None)
        return default if value is None or not value.strip() else value.strip()

    def query_number(self, name: str, default: float, low: float, high: float) -> float:
        """A numeric query argument within [low, high]; 400 otherwise."""
        text = self.query(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise refused(400, f"?{name}= takes a number, not {text[:30]!r}") from None
        if not low <= value <= high:
            raise refused(400, f"?{name}= must be between {low:g} and {high:g}, not {value:g}")
        return value

    def cluster_name(self, name: str | None) -> str:
        """A configured cluster's name (default: the default cluster); 404 for an unknown one."""
        config = self.betty_config
        if name and name not in config.cluster_names:
            raise refused(404, f"no cluster called {name[:60]!r}; configured: {', '.join(config.cluster_names) or 'none'}")
        return config.profile(name).name

    def session_of(self, session_id: str) -> "AgentSession":
        """An open session; 404 when this server has none of that id."""
        try:
            return self.assistant.opened(session_id)
        except BettyError:
            raise refused(404, f"no open session {session_id[:40]!r}; open it with POST sessions") from None

    async def call_tool(self, session: "AgentSession", tool: str, args: dict[str, Any],
                        call_id: str | None = None, person: str | None = None) -> None:
        """Run ``tool`` in ``session`` as this person's own call and answer its Outcome (400 for bad arguments);
        ``person`` names them with the face they called from (default: the server API)."""
        from ..agent.wire import outcome_to_json  # lazy: pydantic and pandas; the extension loads without them

        session.registry.get(tool).parse(args)  # a bad name or bad arguments: 400 now, not a failed call
        outcome = await self.assistant.call(session.session_id, tool, args, person or self.person, call_id)
        self.answer(outcome_to_json(outcome))

    # ----- output -------------------------------------------------------------------------------
    def answer(self, data: Any, status: int = 200) -> None:
        """Finish with ``data`` as JSON."""
        self.set_status(status)
        self.finish(json.dumps(data, default=str))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error answer is ``{"error": one line}``; Betty's errors get their own status."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, BettyError):
            status_code = status_for(error)
            self.set_status(status_code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": error_message(error, status_code)}))

    def log_exception(self, typ: type[BaseException] | None, value: BaseException | None,
                      tb: TracebackType | None) -> None:
        """Betty's errors are expected answers: one warning line, no traceback."""
        if isinstance(value, BettyError):
            self.log.warning("%d %s: %s", status_for(value), self._request_summary(), value)
            return
        super().log_exception(typ, value, tb)
