"""Durable file writes: a whole page replaced atomically, or text appended, each reaching the disk.

Callers hold the page's lock; these functions only make each write all-or-nothing and
durable. OSError is left to the caller, which knows the page's name for the message.

Many files rewritten in one pass (the job watcher's pages and notebooks after a thousand jobs
ended) are written together (:func:`written_together`): every new text reaches the disk (its own files
flushed together, never the whole file system), then each file is renamed into place, then each folder is
flushed once.
"""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

BATCH_LIMIT = 256
"""The most files (or page locks) a batch holds before it makes them durable and renames them."""


def temporary_name(path: Path) -> Path:
    """A fresh hidden name next to ``path`` (hidden, so a listing of pages never shows it)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


class Batch:
    """Files written in one pass, each replaced whole, made durable together (see :func:`written_together`).

    :func:`write_atomically` inside the block writes the new text to a temporary file and leaves it here;
    :meth:`flush` (at the end of the block, and whenever :data:`BATCH_LIMIT` files wait) makes every
    waiting text durable (:func:`make_durable`), renames each file into place, flushes each
    folder once, then releases the page locks the writers handed over (:meth:`hold`).

    Each file is written once per batch: a writer that reads a file to change it (a page under its lock,
    which :class:`~.store.WikiStore` hands over here) must see it in place first, so taking a held lock
    again flushes the batch.
    """

    def __init__(self, limit: int = BATCH_LIMIT) -> None:
        self.limit = limit
        self._waiting: list[tuple[Path, Path]] = []  # (temporary, path)
        self._held: dict[object, Callable[[], None]] = {}
        self._vetoes: list[Callable[[list[Path]], set[Path]]] = []
        self.skipped: set[Path] = set()
        """Files a veto (:meth:`before_renames`) kept as they were: their new text was dropped."""
        self.failed: dict[Path, OSError] = {}
        """Files whose new text could not be made durable or put in place (each stays as it was), with why."""

    def add(self, temporary: Path, path: Path) -> None:
        """``temporary`` holds ``path``'s complete new text (not yet durable): rename it at the next flush."""
        self._waiting.append((temporary, path))
        if len(self._waiting) >= self.limit:
            self.flush()

    def hold(self, key: object, release: Callable[[], None]) -> None:
        """Keep a writer's lock (named ``key``) until the files waiting now are in place; ``release`` frees it."""
        self._held[key] = release
        if len(self._held) >= self.limit:
            self.flush()

    def holds(self, key: object) -> bool:
        """Whether the lock named ``key`` is held until the next flush (taking it again would wait on ourselves)."""
        return key in self._held

    def before_renames(self, veto: Callable[[list[Path]], set[Path]]) -> None:
        """Ask ``veto`` at each flush, just before the renames, which of the waiting files must stay as they are."""
        self._vetoes.append(veto)

    def flush(self) -> None:
        """Make the waiting files durable and put them in place; then release the held locks (an error included)."""
        waiting, self._waiting = self._waiting, []
        try:
            if waiting:
                self._put_in_place(waiting)
        finally:
            held, self._held = self._held, {}
            for release in held.values():
                release()

    def _put_in_place(self, waiting: list[tuple[Path, Path]]) -> None:
        try:
            make_durable([temporary for temporary, _ in waiting])
            vetoed = set().union(*(veto([path for _, path in waiting]) for veto in self._vetoes))
        except BaseException as exc:  # nothing is renamed: every file stays as it was
            for temporary, path in waiting:
                temporary.unlink(missing_ok=True)
                self.failed[path] = exc if isinstance(exc, OSError) else OSError(f"not written ({exc!r})")
            if not isinstance(exc, OSError):
                raise
            return
        folders: set[Path] = set()
        for temporary, path in waiting:
            if path in vetoed:
                temporary.unlink(missing_ok=True)
                self.skipped.add(path)
                continue
            try:
                os.replace(temporary, path)
            except OSError as exc:
                temporary.unlink(missing_ok=True)
                self.failed[path] = exc
                continue
            folders.add(path.parent)
        for folder in sorted(folders):
            sync_directory(folder)


_BATCH: ContextVar[Batch | None] = ContextVar("written_together", default=None)


def current_batch() -> Batch | None:
    """The batch files are being written into now (None outside :func:`written_together`)."""
    return _BATCH.get()


@contextmanager
def written_together(limit: int = BATCH_LIMIT) -> Iterator[Batch]:
    """Within this block, :func:`write_atomically` writes each file's new text and leaves the rest to one
    :meth:`Batch.flush` for all of them, when the block ends (an error included) or :data:`BATCH_LIMIT` wait.

    A crash at any point leaves each file whole, old or new: a new text is renamed into place only after
    it reached the disk, and an unflushed rename is lost whole. When the block ends, every file not in
    :attr:`Batch.failed` or :attr:`Batch.skipped` is in place on disk; record that it was written only then.
    The first rename that failed is raised then (OSError naming its file), unless the block raised itself.
    Nested blocks join the outer one.
    """
    outer = _BATCH.get()
    if outer is not None:
        yield outer
        return
    batch = Batch(limit)
    token = _BATCH.set(batch)
    try:
        yield batch
    finally:
        _BATCH.reset(token)
        batch.flush()
    if batch.failed:
        path, exc = next(iter(batch.failed.items()))
        raise OSError(exc.errno, exc.strerror, str(path))


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, line endings as given): readers see the old or the new file.

    Inside :func:`written_together` the new text waits in a temporary file for the batch's flush."""
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
        path.parent.mkdir(parents=True, exist_ok=True)
    batch = _BATCH.get()
    temporary = temporary_name(path)
    # 0o666 goes through the umask, as for any file a person's editor creates.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            if mode is not None and stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                os.chmod(temporary, mode)  # the file keeps its mode (most have the one a new file gets)
            file.write(text.encode("utf-8"))
            file.flush()
            if batch is None:
                os.fsync(file.fileno())
        if batch is None:
            os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if batch is None:
        sync_directory(path.parent)
    else:
        batch.add(temporary, path)


SYNC_WORKERS = 8
"""How many files are flushed at once: the file system commits flushes that wait together in one go."""


def make_durable(paths: list[Path]) -> None:
    """Flush the written contents of ``paths`` to disk, and nothing else: one ``fsync`` per file, several at once.

    A flush of the whole file system (``syncfs``) would also wait for every other program's pending writes,
    so its cost would not be bounded by what Betty wrote. The first error is raised once all have finished."""
    if len(paths) <= 1:
        for path in paths:
            _sync_file(path)
        return
    # lazy: threads are needed only when a batch of files is flushed
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(SYNC_WORKERS, len(paths)), thread_name_prefix="betty-fsync") as pool:
        results = [pool.submit(_sync_file, path) for path in paths]
    for result in results:
        result.result()


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
