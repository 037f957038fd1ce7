"""The threads Betty's blocking cluster I/O runs in: a pool of its own, never the event loop's default executor.

Jupyter's server and tornado (its client's name resolution, for one) use the loop's default
executor, which holds only a few threads on a small machine. A burst of cluster commands (a
watcher tick, a sweep's logs read at once over SSH) waiting there would stall every request to
the server behind them; in this pool they wait only for each other.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

WORKERS = 16
"""The most blocking cluster calls running at once in one process (more wait their turn in the pool)."""

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="betty-cluster")
        return _pool


async def in_cluster_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in Betty's own pool (with this task's context variables), awaited."""
    import asyncio  # lazy: the event loop's module is loaded by whoever awaits this; a login started early needs none

    call = functools.partial(contextvars.copy_context().run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)
