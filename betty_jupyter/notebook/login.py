"""A cluster's login questions asked under the running ``%betty`` cell, in the notebook's password box.

When a ``%betty`` command makes Betty log in to a cluster that asks for a second factor, the
question appears under that cell as ipykernel's ``getpass`` box, with the server's own prompt.
Between cells there is nowhere to ask (a background refresh, say): the login fails with one
line instead of waiting for a box nobody sees, and the next ``%betty`` command asks.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from IPython import get_ipython

from ..transport.login import LoginQuestion
from ..errors import TransportError
from ..safe_text import terminal_line


class CellLogin:
    """Answers login questions while a ``%betty`` command runs (a :class:`~betty_jupyter.transport.login.LoginAnswerer`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        """While a ``%betty`` command runs, its cell can ask."""
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1

    def __call__(self, question: LoginQuestion) -> str:
        with self._lock:
            running = self._running > 0
        kernel = _kernel()
        if not running or kernel is None:
            raise TransportError(f"{question.cluster} asks {question.prompt.strip()!r} to log in, and no %betty "
                                 "command is running to ask you; run the command again")
        if question.instructions.strip():
            print(terminal_line(question.instructions.strip()))
        try:
            answer: str = kernel.getpass(f"{question.cluster}: {terminal_line(question.prompt)}")
        except Exception as exc:  # StdinNotImplementedError: this frontend has no input box
            raise TransportError(f"{question.cluster} asks {question.prompt.strip()!r} to log in, and this "
                                 f"notebook cannot ask you ({exc}); answer it in Betty's panel") from exc
        return answer


def _kernel() -> Any:
    return getattr(get_ipython(), "kernel", None)


cell_login = CellLogin()
"""The kernel's one answerer; ``%load_ext betty_jupyter`` makes it answer this process's login questions."""
