"""Folders of the person's own on this machine, for what Betty will later load or run (a cell run's code, values,
key and what comes back).

A project directory may be shared with a group and the person's umask may let the group write.
So every folder here is made mode 700, and each time a file is read or written the whole chain
below the base is opened one name at a time, never following a symbolic link, and each folder
is checked where it was opened: a directory, the person's, and writable by nobody else. A file
read must be a regular file of the person's that nobody else can write. What a folder holds was
written by the person's own processes, so another user can neither plant nor swap a file in it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True)
class PrivateFolder:
    """``base/part/part…``: each part a folder only the person can write (``base`` itself may be shared)."""

    base: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        """Where it is, for messages."""
        return self.base.joinpath(*self.parts)

    def child(self, name: str) -> "PrivateFolder":
        """The folder ``name`` inside this one."""
        return PrivateFolder(self.base, (*self.parts, name))

    def make(self) -> "PrivateFolder":
        """Make the missing folders (mode 700; one of the person's with a wider mode is narrowed); itself."""
        self.base.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for index, part in enumerate(self.parts):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=descriptor)
                inner = self._open_folder(descriptor, part, index, narrow=True)
                os.close(descriptor)
                descriptor = inner
        finally:
            os.close(descriptor)
        return self

    def read(self, name: str, limit: int) -> bytes:
        """A file's bytes (at most ``limit``); a one-line UsageError when it is not the person's alone."""
        with self._opened() as folder:
            try:
                descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except OSError as error:
                raise UsageError(f"{self.path / name} cannot be read ({error.strerror})") from None
            with open(descriptor, "rb") as file:
                self._check(os.fstat(file.fileno()), self.path / name, stat.S_ISREG, "a regular file")
                data = file.read(limit + 1)
        if len(data) > limit:
            raise UsageError(f"{self.path / name} is larger than the {limit} bytes Betty reads from it")
        return data

    def exists(self, name: str) -> bool:
        """Whether the folder holds ``name`` (of any kind); a one-line UsageError when the folder is not the person's
        alone."""
        with self._opened() as folder:
            try:
                os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                return False
            return True

    def write(self, name: str, data: bytes) -> None:
        """Put ``data`` into ``name`` (mode 600), replacing it whole."""
        temp = f".{name}.betty-tmp"
        with self._opened() as folder:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=folder)
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
            with open(descriptor, "wb") as file:
                file.write(data)
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)

    def empty(self) -> None:
        """Remove every file in the folder (its folders stay)."""
        with self._opened() as folder:
            for name in os.listdir(folder):
                if not stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=folder)

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The folder's descriptor, every part of its chain checked where it was opened."""
        try:
            descriptor = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as error:
            raise UsageError(f"{self.base} cannot be opened ({error.strerror})") from None
        try:
            for index, part in enumerate(self.parts):
                inner = self._open_folder(descriptor, part, index)
                os.close(descriptor)
                descriptor = inner
            yield descriptor
        finally:
            os.close(descriptor)

    def _open_folder(self, parent: int, part: str, index: int, narrow: bool = False) -> int:
        where = self.base.joinpath(*self.parts[:index + 1])
        try:
            descriptor = os.open(part, _FOLDER_FLAGS, dir_fd=parent)
        except OSError as error:
            kind = "a symbolic link or not a folder" if error.errno in (errno.ENOTDIR, errno.ELOOP) else error.strerror
            raise UsageError(f"{where} cannot be used ({kind}); Betty keeps runs only in folders of yours alone"
                             ) from None
        try:
            found = os.fstat(descriptor)
            if narrow and found.st_uid == os.getuid() and found.st_mode & _OTHERS_WRITE:
                os.fchmod(descriptor, 0o700)
                found = os.fstat(descriptor)
            self._check(found, where, stat.S_ISDIR, "a folder")
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    @staticmethod
    def _check(found: os.stat_result, where: Path, kind: Callable[[int], bool], named: str) -> None:
        if not kind(found.st_mode):
            raise UsageError(f"{where} is not {named}; Betty reads nothing from it")
        if found.st_uid != os.getuid():
            raise UsageError(f"{where} belongs to another user (uid {found.st_uid}); Betty loads nothing from it")
        if found.st_mode & _OTHERS_WRITE:
            raise UsageError(f"{where} can be written by others (mode {stat.S_IMODE(found.st_mode):o}); Betty "
                             "loads nothing from it")
