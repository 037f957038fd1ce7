"""Login questions a cluster asks while the server connects to it, answered in the side panel.

The questions wait in the server's :class:`~betty_jupyter.server.login_desk.LoginDesk`:

* ``GET  /betty/api/login-questions``        the questions waiting now, oldest first
* ``POST /betty/api/login-questions/{id}``   ``{"answer": "123456"}``
* ``DELETE /betty/api/login-questions/{id}`` nobody will answer: the login fails with one line
"""

from __future__ import annotations

from tornado import web

from .base import BettyHandler, refused


class LoginQuestionsHandler(BettyHandler):
    """``GET login-questions``: what the clusters' logins are asking now."""

    @web.authenticated
    def get(self) -> None:
        """``{questions: [{id, cluster, prompt, echo, instructions, asked_at}]}``."""
        self.answer({"questions": self.services.login_desk.pending()})


class LoginQuestionHandler(BettyHandler):
    """``POST login-questions/{id} {answer}`` answers a question; ``DELETE`` cancels its login."""

    @web.authenticated
    def post(self, ident: str) -> None:
        """``{answered: true}``; 404 when no login waits on ``ident`` (answered, cancelled or timed out)."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import LoginAnswer

        if not self.services.login_desk.answer(ident, self.body(LoginAnswer).answer):
            raise refused(404, f"no login is waiting on {ident[:40]!r}; it was answered, cancelled or timed out")
        self.answer({"answered": True})

    @web.authenticated
    def delete(self, ident: str) -> None:
        """``{cancelled: true}``; 404 when no login waits on ``ident``."""
        if not self.services.login_desk.answer(ident, None):
            raise refused(404, f"no login is waiting on {ident[:40]!r}; it was answered, cancelled or timed out")
        self.answer({"cancelled": True})


handlers = [
    (r"/betty/api/login-questions", LoginQuestionsHandler),
    (r"/betty/api/login-questions/(?P<ident>[^/]+)", LoginQuestionHandler),
]
"""The login-question routes."""
