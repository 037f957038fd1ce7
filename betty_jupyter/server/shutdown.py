"""A Jupyter server that stops (Ctrl-C, SIGTERM) ends its process: no idle worker thread keeps it alive.

Ctrl-C first: a server with a terminal asks there whether to stop (Jupyter's own handler). One without
(Open OnDemand, a batch job, a process manager) gets no handler from Jupyter, so SIGINT would land as a
``KeyboardInterrupt`` wherever the event loop happens to be and skip the server's clean stop. Betty gives
it the same clean stop as SIGTERM; a second Ctrl-C interrupts as before.

Then the threads.

Jupyter's contents API, through which JupyterLab's file browser lists folders, reads the disk in AnyIO's
worker threads. AnyIO ends such a thread when the task that first asked for it ends. A request still being
answered when the server stops its event loop never ends, nor does one whose end the loop had no turn left
to act on; its worker thread, which is not a daemon, then waits for work forever, and Python waits for
every such thread before the process may exit. So, as Python begins its exit and before it waits for
threads, Betty tells each AnyIO worker thread to end once the call it may be running returns.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable

_lock = threading.Lock()
_registered = False


def end_worker_threads_at_exit() -> None:
    """Have the process's exit end AnyIO's worker threads before Python waits for its threads (once per process)."""
    global _registered
    with _lock:
        if not _registered:
            # Python's own hook for this moment (concurrent.futures ends its thread pools through it)
            threading._register_atexit(end_worker_threads)  # type: ignore[attr-defined]
            _registered = True


def stop_on_interrupt_without_terminal(serverapp: Any) -> Callable[[], None]:
    """Make SIGINT stop ``serverapp`` cleanly, as SIGTERM does, where Jupyter left it to ``KeyboardInterrupt``.

    Only in the main thread (where signal handlers live), and only while SIGINT still has Python's
    default handler: a server with a terminal keeps Jupyter's "Shut down this Jupyter server?" prompt.
    Returns what puts the default handler back (the extension calls it as it stops).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: None

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once
        serverapp.log.critical("received signal %s, stopping", signum)
        serverapp.stop(from_signal=True)

    def undo() -> None:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is stop:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, stop)
    return undo


def end_worker_threads() -> None:
    """Tell every AnyIO worker thread to end once idle; only when the event loop that ran them has stopped."""
    backend = sys.modules.get("anyio._backends._asyncio")
    if backend is None:  # AnyIO never ran a thread in this process
        return
    for thread in threading.enumerate():
        if isinstance(thread, backend.WorkerThread) and thread.is_alive():
            try:
                thread.stop()
            except queue.Full:  # two calls wait for it, which AnyIO never queues for one thread
                pass
