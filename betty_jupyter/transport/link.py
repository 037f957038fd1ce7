"""``Link``: the one transport a shared cluster keeps, made again when the link under it broke.

A transport already mends small breaks inside itself: its shells start again on a fresh
connection and a read is retried once (``remote_shell.ShellPool``). A link that still drops
under a command (see :func:`broken`) is given up: the transport is closed and the next command
gets a fresh one from the profile. A read is tried once more on the fresh transport; a write
never is (its outcome is unknown, the caller decides). Failing to connect or to log in (a host
that does not answer, a refused or cancelled login, an unknown host key) and a command past its
time are no dropped link: trying again would only wait again or ask the person again, so those
errors go to the caller as they are.

Errors are the transport's own, never reworded here: they name the program and the cluster,
not a command's arguments (a job's environment) nor an answer typed at a login.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Sequence

from ..errors import BettyError, TransportError
from .remote_shell import ShellClosed
from .interface import CommandResult, Transport


def broken(error: BaseException) -> bool:
    """Whether ``error`` says the link dropped under a command: a shell's channel ended (the error, or its cause for
    a write whose outcome is unknown); not a failure to connect or log in, nor a command's time."""
    return isinstance(error, ShellClosed) or isinstance(error.__cause__, ShellClosed)


class Link:
    """A :class:`~betty_jupyter.transport.interface.Transport` over the transport ``opener`` makes, made again after a
    dropped link; the transport is made on the first command (or :meth:`open_early`), not before."""

    def __init__(self, opener: Callable[[], Transport]) -> None:
        self._opener = opener
        self.opened = 0
        """How many transports this link has made (one, unless the link broke or was closed)."""
        self._transport: Transport | None = None
        self._lock = threading.Lock()  # the link serves every event loop of the process: its state is a thread's

    @property
    def transport(self) -> Transport | None:
        """The transport commands go over now (None before the first command and after :meth:`close`)."""
        return self._transport

    def current(self) -> Transport:
        """The transport in use now, made when there is none (for what goes beside commands: a port's forward)."""
        return self._current()

    def _current(self) -> Transport:
        with self._lock:
            if self._transport is None:
                self._transport = self._opener()
                self.opened += 1
            return self._transport

    def open_early(self) -> None:
        """Make the transport now and have it start logging in, in the background, where it can (an SSH transport's
        :meth:`~betty_jupyter.transport.remote_shell.ShellPool.open_early`): the first command then finds the link
        open. Nothing runs on the cluster."""
        opening = getattr(self._current(), "open_early", None)
        if opening is not None:
            opening()

    async def _give_up(self, transport: Transport) -> None:
        """Close ``transport`` after its link dropped, unless another command already did; the next opens a new one."""
        with self._lock:
            if self._transport is not transport:
                return
            self._transport = None
        with contextlib.suppress(BettyError):
            await transport.close()

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Run ``argv``; after a dropped link a read runs once more over a fresh transport, a write never does."""
        transport = self._current()
        try:
            return await transport.run(argv, timeout, idempotent=idempotent)
        except TransportError as error:
            if not broken(error):
                raise
            await self._give_up(transport)
            if not idempotent:
                raise
        return await self._current().run(argv, timeout, idempotent=idempotent)

    async def put(self, data: bytes, remote_path: str) -> str:
        """Write ``data`` to ``remote_path``; after a dropped link the write, atomic, is made once more on a fresh one."""
        transport = self._current()
        try:
            return await transport.put(data, remote_path)
        except TransportError as error:
            if not broken(error):
                raise
            await self._give_up(transport)
        return await self._current().put(data, remote_path)

    async def close(self) -> None:
        """Close the transport (closing twice is fine); a later command opens a fresh one."""
        with self._lock:
            transport, self._transport = self._transport, None
        if transport is not None:
            await transport.close()
