"""The login questions waiting in this server for a person, and the logins waiting on their answers.

When a login node asks for a second factor, the transport's worker thread calls the
:class:`LoginDesk` (the server's :class:`~betty_jupyter.transport.login.LoginAnswerer`), which
holds the question until a person answers it (``server/login.py``: the routes) or it times
out. An answer is handed to the waiting login and forgotten: never logged, stored or returned.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..transport.login import LoginQuestion
from ..errors import TransportError

if TYPE_CHECKING:
    from .models import LoginQuestionInfo


@dataclass
class _Waiting:
    question: LoginQuestion
    asked_at: float
    answered: threading.Event = field(default_factory=threading.Event)
    answer: str | None = None


class LoginDesk:
    """The login questions waiting for a person in this server, and the logins waiting on them."""

    def __init__(self, wait: float = 300.0) -> None:
        self.wait = wait
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}

    def __call__(self, question: LoginQuestion) -> str:
        """Hold ``question`` until a person answers it (called on a transport's worker thread)."""
        ident = f"login_{uuid.uuid4().hex[:12]}"
        waiting = _Waiting(question, time.time())
        with self._lock:
            self._waiting[ident] = waiting
        try:
            if not waiting.answered.wait(self.wait):
                raise TransportError(f"{question.cluster} asked {question.prompt.strip()!r} to log in and nobody "
                                     f"answered in Betty's panel within {self.wait:g} s")
        finally:
            with self._lock:
                self._waiting.pop(ident, None)
        if waiting.answer is None:
            raise TransportError(f"the login to {question.cluster} was cancelled in Betty's panel "
                                 f"(it asked {question.prompt.strip()!r})")
        return waiting.answer

    def pending(self) -> list["LoginQuestionInfo"]:
        """The questions waiting now, oldest first, as the panel shows them."""
        with self._lock:
            items = sorted(self._waiting.items(), key=lambda item: item[1].asked_at)
        return [{"id": ident, "cluster": waiting.question.cluster, "prompt": waiting.question.prompt,
                 "echo": waiting.question.echo, "instructions": waiting.question.instructions,
                 "asked_at": waiting.asked_at} for ident, waiting in items]

    def answer(self, ident: str, answer: str | None) -> bool:
        """Hand ``answer`` (None: cancel) to the login waiting on ``ident``; False when none waits."""
        with self._lock:
            waiting = self._waiting.pop(ident, None)
        if waiting is None:
            return False
        waiting.answer = answer
        waiting.answered.set()
        return True
