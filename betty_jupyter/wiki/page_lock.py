"""One page's lock: ``flock`` on its lock file, as ``filelock`` takes it, without ``filelock``'s bookkeeping.

A watcher that rewrites a thousand pages takes a thousand locks; ``filelock``'s per-lock work (its
registries, fork checks, options) cost more than the lock itself. The lock is the same one
``filelock.FileLock`` takes (``fcntl.flock`` on the same file, which stays in place), so both exclude
each other. Where the file system has no ``flock`` (some network mounts), ``filelock`` takes it,
with its own fallback.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Callable

try:
    import fcntl
except ImportError:  # Windows: filelock's own lock
    fcntl = None  # type: ignore[assignment]

_NO_FLOCK = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK)


class LockTimeout(Exception):
    """Another process held the lock for longer than the timeout."""


def acquire(path: Path, timeout: float, poll_interval: float = 0.005) -> Callable[[], None]:
    """Take the exclusive lock on ``path`` (created when missing), waiting up to ``timeout`` seconds; the function
    that releases it. LockTimeout when it stayed taken."""
    if fcntl is None:
        return _filelock(path, timeout, poll_interval)
    deadline = time.monotonic() + timeout
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NO_FLOCK:
                return _filelock(path, timeout, poll_interval)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                raise LockTimeout(str(path)) from None
            time.sleep(poll_interval)
            continue
        if os.fstat(fd).st_nlink == 0:  # the file was removed before the lock was won: lock the one there now
            os.close(fd)
            continue
        return _releaser(fd)


def _releaser(fd: int) -> Callable[[], None]:
    """The function that releases the lock held on ``fd`` (once; called again, it does nothing)."""
    held = [fd]

    def release() -> None:
        while held:
            taken = held.pop()
            try:
                fcntl.flock(taken, fcntl.LOCK_UN)
            finally:
                os.close(taken)

    return release


def _filelock(path: Path, timeout: float, poll_interval: float) -> Callable[[], None]:
    # lazy: filelock is needed only where flock is not
    from filelock import FileLock, Timeout

    lock = FileLock(path, timeout=timeout, poll_interval=poll_interval)
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeout(str(path)) from None
    return lock.release
