"""Durable file writes: a whole page replaced atomically, or text appended, each reaching the disk.

Callers hold the page's lock; these functions only make each write all-or-nothing and
durable. OSError is left to the caller, which knows the page's name for the message.
"""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

_DEFERRED: ContextVar[set[Path] | None] = ContextVar("deferred_directory_syncs", default=None)


def temporary_name(path: Path) -> Path:
    """A fresh hidden name next to ``path`` (hidden, so a listing of pages never shows it)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, line endings as given): readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    temporary = temporary_name(path)
    # 0o666 goes through the umask, as for any file a person's editor creates.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    deferred = _DEFERRED.get()
    if deferred is None:
        sync_directory(path.parent)
    else:
        deferred.add(path.parent)


@contextmanager
def one_directory_sync() -> Iterator[None]:
    """Within this block, each :func:`write_atomically` flushes its file but leaves the rename's folder
    to be flushed once, when the block ends (an error included): many pages written at once cost one
    flush of their folder, not one each.

    A crash inside the block leaves each page whole, old or new (its new text reached the disk before
    its rename; an unflushed rename is lost whole); once the block has ended every rename is on disk.
    Record that the pages were written only after the block.
    """
    if _DEFERRED.get() is not None:
        yield  # an outer block flushes
        return
    folders: set[Path] = set()
    token = _DEFERRED.set(folders)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        for folder in sorted(folders):
            sync_directory(folder)


def append_durably(path: Path, text: str) -> None:
    """Append ``text`` to the existing file ``path``, starting on a new line, and flush it to disk."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            text = "\n" + text
        data = text.encode("utf-8")
        while data:
            written = os.write(fd, data)
            data = data[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_directory(directory: Path) -> None:
    """Flush a directory entry (a rename) to disk where the platform allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # Windows cannot open a directory; its rename is durable without this.
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems (network mounts) refuse fsync on directories; the rename still happened
    finally:
        os.close(fd)
