"""A question on the person's terminal: the answer typed comes back, and Ctrl-C while it waits ends the command."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

ASK = """
import asyncio
from betty_jupyter.cli.terminal import typed_answer
try:
    print("ANSWER=" + repr(asyncio.run(typed_answer("Cancel job 7? [y/N] "))), flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


class OnTerminal:
    """A Python process on a pseudo-terminal of its own, as a person's command is."""

    def __init__(self, code: str) -> None:
        self.screen, terminal = pty.openpty()
        # Ctrl-C as on a person's terminal: a suite started in the background inherits SIGINT ignored
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=terminal, stdout=terminal, stderr=terminal,
                                        close_fds=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        os.close(terminal)
        self.seen = ""

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r} in {timeout} s; saw {self.seen!r}"
            if not select.select([self.screen], [], [], min(left, 1.0))[0]:
                continue
            try:
                chunk = os.read(self.screen, 4096)
            except OSError:  # the process ended and its terminal closed
                chunk = b""
            if not chunk and self.process.poll() is not None:
                raise AssertionError(f"ended before {text!r}; saw {self.seen!r}")
            self.seen += chunk.decode(errors="replace")

    def ended(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            os.close(self.screen)


@pytest.fixture
def terminal():
    started: list[OnTerminal] = []

    def start(code: str) -> OnTerminal:
        started.append(OnTerminal(code))
        return started[-1]

    yield start
    for each in started:
        if each.process.poll() is None:
            each.process.kill()
            each.process.wait()


def test_the_typed_line_is_the_answer(terminal) -> None:
    person = terminal(ASK)
    person.wait_for("[y/N] ")
    os.write(person.screen, b"y\n")
    person.wait_for("ANSWER='y'")
    assert person.ended() == 0


def test_ctrl_c_while_the_question_waits_ends_the_command_without_an_answer(terminal) -> None:
    person = terminal(ASK)
    person.wait_for("[y/N] ")
    person.process.send_signal(signal.SIGINT)
    person.wait_for("INTERRUPTED")
    assert person.ended() == 0, "the process ends on its own, with nothing typed"


def test_the_end_of_input_is_no_answer(terminal) -> None:
    person = terminal(ASK)
    person.wait_for("[y/N] ")
    os.write(person.screen, b"\x04")  # Ctrl-D
    person.wait_for("ANSWER=''")
    assert person.ended() == 0
