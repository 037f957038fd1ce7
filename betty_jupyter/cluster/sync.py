"""A sync facade for the async cluster layer, for the CLI and notebook magics.

Coroutines run on one private event loop in a daemon thread, so calling from code that
already has a running loop (an IPython kernel) works as well as from a plain script.

The main thread waits for them so that a signal ends its wait at any moment (:func:`wait`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import select
import signal
import threading
import time
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="betty-cluster-loop", daemon=True).start()
        return _loop


def submit(awaitable: Awaitable[T]) -> "Future[T]":
    """Start ``awaitable`` on Betty's background loop; returns at once with its future."""
    return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), _background_loop())


def run_sync(awaitable: Awaitable[T], timeout: float | None = None) -> T:
    """Run ``awaitable`` on Betty's background loop and wait for its result."""
    return wait(submit(awaitable), timeout)


def wait(future: "Future[T]", timeout: float | None = None) -> T:
    """``future``'s result; in the main thread a signal (Ctrl-C) ends the wait whenever it comes.

    Python runs a signal's handler (Ctrl-C's KeyboardInterrupt) only between two steps of Python
    code. A signal that comes after the last step before a thread blocks in a lock, as
    ``future.result()`` does, is kept until the lock is let go: after the future is done, which may
    be never. So the main thread blocks in ``select`` on a pipe that the operating system's handler
    writes every signal into (``signal.set_wakeup_fd``) and that the future writes into when done:
    whichever comes first, even a moment before the wait began, ends it. Where something else
    already takes the signals' wake-ups (an event loop of the main thread), the wait is the future's own.
    """
    with _woken_by_signals() as wakeup:
        if wakeup is None:
            return future.result(timeout)
        future.add_done_callback(lambda _: wakeup.ring())
        if not wakeup.wait_until(future.done, timeout):
            raise TimeoutError()
        return future.result()


def sleep(seconds: float) -> None:
    """``time.sleep``, except that in the main thread a signal ends it whenever it comes (see :func:`wait`)."""
    with _woken_by_signals() as wakeup:
        if wakeup is None:
            time.sleep(seconds)
        else:
            wakeup.wait_until(lambda: False, seconds)


@contextmanager
def _woken_by_signals() -> Iterator["_WakeupPipe | None"]:
    """The wake-up pipe, which signals write into meanwhile; None outside the main thread or where it is taken."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    wakeup = _wakeup_pipe()
    previous = signal.set_wakeup_fd(wakeup.write, warn_on_full_buffer=False)
    if previous not in (-1, wakeup.write):
        signal.set_wakeup_fd(previous)
        yield None
        return
    try:
        yield wakeup
    finally:
        signal.set_wakeup_fd(previous, warn_on_full_buffer=False)


class _WakeupPipe:
    """The pipe the main thread waits on: signals and finished futures write a byte into it."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        for end in (self.read, self.write):
            os.set_blocking(end, False)
            os.set_inheritable(end, False)

    def ring(self) -> None:
        """Wake the waiting thread (a full pipe wakes it already)."""
        try:
            os.write(self.write, b"\0")
        except BlockingIOError:
            pass

    def wait_until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Block until ``done()`` (rung meanwhile) or ``timeout`` seconds; whether it is done.

        A signal's handler runs as ``select`` returns, so Ctrl-C's KeyboardInterrupt comes out of here.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            select.select([self.read], [], [], left)
            try:
                while os.read(self.read, 512):
                    pass
            except BlockingIOError:
                pass
        return True


_wakeup: _WakeupPipe | None = None


def _wakeup_pipe() -> _WakeupPipe:
    """The main thread's one wake-up pipe, kept open for the process (a late future may still ring it)."""
    global _wakeup
    if _wakeup is None:
        _wakeup = _WakeupPipe()
    return _wakeup


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


class Blocking(Generic[T]):
    """Wraps an object with async methods; each call blocks until the coroutine is done.

    ``Blocking(SlurmClient(transport)).queue()`` returns the DataFrame directly.
    """

    def __init__(self, target: T) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.target, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            return run_sync(attribute(*args, **kwargs))

        return call
