"""A question asked on the person's terminal while a command's event loop runs."""

from __future__ import annotations

import asyncio
import threading


async def typed_answer(question: str) -> str:
    """The line the person types after ``question`` (empty at the end of input).

    The line is read in a daemon thread of its own, not in the loop's pool of worker threads:
    ``asyncio.run`` waits for that pool as it ends, so a Ctrl-C while the question waits would
    not end the command until the person also pressed Enter.
    """
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[str] = loop.create_future()

    def settle(line: str) -> None:
        if not answered.done():
            answered.set_result(line)

    def read() -> None:
        try:
            line = input(question)
        except EOFError:
            line = ""
        try:
            loop.call_soon_threadsafe(settle, line)
        except RuntimeError:
            pass  # the command ended (Ctrl-C) while the question waited: nobody wants the answer

    threading.Thread(target=read, name="betty-terminal-answer", daemon=True).start()
    return await answered
