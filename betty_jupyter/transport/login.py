"""Questions a cluster's login asks a person: a one-time code, a Duo push choice, a key passphrase.

A login node that demands a second factor asks over SSH's keyboard-interactive method; both
transports turn each of its prompts into a :class:`LoginQuestion` and hand it to
:func:`ask`. Where the answer comes from depends on the face Betty runs in, which says so
once with :func:`answer_login_questions_with`:

* ``betty`` in a terminal asks on the terminal (the default when there is one);
* a notebook kernel asks under the running ``%betty`` cell (``notebook/login.py``);
* the Jupyter server holds the question until the panel answers it (``server/login.py``).

The server's exact prompt text reaches the person unchanged (it is shown as text, never as
markup). Answers are never logged, stored or put into an error message; a transport keeps its
connection open, so one answer serves that connection's lifetime.
"""

from __future__ import annotations

import getpass
import os
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Protocol

from ..errors import LinkProblem, TransportError
from ..safe_text import terminal_line


@dataclass(frozen=True)
class LoginQuestion:
    """One prompt of a cluster's login, as the server worded it."""

    cluster: str
    prompt: str
    echo: bool = False
    instructions: str = ""


class LoginAnswerer(Protocol):
    """Asks a person a :class:`LoginQuestion` and returns what they typed.

    Raises :class:`~betty_jupyter.errors.TransportError` when nobody answers.
    """

    def __call__(self, question: LoginQuestion) -> str: ...


_lock = threading.Lock()
_answerer: LoginAnswerer | None = None


def answer_login_questions_with(answerer: LoginAnswerer | None) -> LoginAnswerer | None:
    """Make ``answerer`` answer every login question in this process; returns the previous one."""
    global _answerer
    with _lock:
        previous, _answerer = _answerer, answerer
    return previous


def stop_answering(answerer: LoginAnswerer) -> None:
    """Stop ``answerer`` answering login questions, if it still does (a face shutting down)."""
    global _answerer
    with _lock:
        if _answerer is answerer:
            _answerer = None


def ask(question: LoginQuestion) -> str:
    """The person's answer to ``question``, from the face Betty runs in."""
    with _lock:
        answerer = _answerer
    if answerer is not None:
        return answerer(question)
    if _has_terminal():
        return ask_on_terminal(question)
    raise TransportError(
        f"{question.cluster} asks {question.prompt.strip()!r} to log in, and nothing here can ask you; "
        f"answer it in Betty's panel, or run `betty cluster test` in a terminal", LinkProblem.LOGIN
    )


def ask_on_terminal(question: LoginQuestion) -> str:
    """Ask on the controlling terminal, without echo unless the server asked for it."""
    # The prompt comes from another host: an escape sequence in it must not drive the terminal.
    if question.instructions.strip():
        print(terminal_line(question.instructions.strip()), file=sys.stderr)
    prompt = f"{question.cluster}: {terminal_line(question.prompt)}"
    if question.echo:
        return input(prompt)
    return getpass.getpass(prompt)


def _has_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty() and os.isatty(sys.stderr.fileno())
    except (OSError, ValueError):
        return False


def keyboard_interactive_handler(cluster: str) -> Callable[[str, str, list[tuple[str, bool]]], list[str]]:
    """A paramiko keyboard-interactive handler that asks each prompt through :func:`ask`."""

    def handler(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        told = "\n".join(part for part in (title.strip(), instructions.strip()) if part)
        return [ask(LoginQuestion(cluster, prompt, bool(echo), told)) for prompt, echo in prompts]

    return handler
