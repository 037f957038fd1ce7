"""A sync facade for the async cluster layer, for the CLI and notebook magics.

Coroutines run on one private event loop in a daemon thread, so calling from code that
already has a running loop (an IPython kernel) works as well as from a plain script.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from concurrent.futures import Future
from typing import Any, Awaitable, Generic, TypeVar

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
    return submit(awaitable).result(timeout)


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
