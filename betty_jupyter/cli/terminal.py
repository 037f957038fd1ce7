"""A question asked on the person's terminal while a command's event loop runs."""

from __future__ import annotations

import asyncio
import os
import sys
import threading


async def typed_answer(question: str) -> str:
    """The line the person types after ``question`` (empty at the end of input).

    The line is read in a daemon thread of its own, not in the loop's pool of worker threads:
    ``asyncio.run`` waits for that pool as it ends, so a Ctrl-C while the question waits would
    not end the command until the person also pressed Enter. The thread reads standard input's
    file descriptor itself rather than through ``input()``, whose lock on ``sys.stdin`` would
    hold the interpreter's exit (Python 3.13 closes ``sys.stdin`` as it ends).
    """
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[str] = loop.create_future()

    def settle(line: str) -> None:
        if not answered.done():
            answered.set_result(line)

    def read() -> None:
        typed = b""
        try:
            while not typed.endswith(b"\n"):
                part = os.read(sys.stdin.fileno(), 4096)
                if not part:  # the end of input: no answer
                    break
                typed += part
        except OSError:
            typed = b""
        try:
            loop.call_soon_threadsafe(settle, typed.decode(errors="replace").split("\n", 1)[0].rstrip("\r"))
        except RuntimeError:
            pass  # the command ended (Ctrl-C) while the question waited: nobody wants the answer

    sys.stdout.write(question)
    sys.stdout.flush()
    threading.Thread(target=read, name="betty-terminal-answer", daemon=True).start()
    return await answered
