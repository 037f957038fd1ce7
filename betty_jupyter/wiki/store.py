"""WikiStore: a folder of markdown pages that Betty and a person share safely.

- Every name is checked by :mod:`.names` and resolved under the root; symbolic links are
  followed only while they stay inside it.
- ``log.md`` (at the root) is append-only: :meth:`WikiStore.log` and :meth:`WikiStore.append`
  add to it, nothing rewrites it.
- On a page with auto markers, Betty writes only between them (:meth:`WikiStore.update_auto`);
  an update that would change the person's text outside them is refused.
- Each write is atomic (a temporary file in the same folder, fsync, ``os.replace``; many at once in one
  flush, :func:`.files.written_together`) and
  holds the page's lock (``flock``, as ``filelock`` takes it: one lock file per page under ``.locks/`` in the root,
  :mod:`.page_lock`),
  so writers in several processes never lose each other's changes. Reads take no lock: they
  see a page before or after a write, never half of one.
"""

from __future__ import annotations

import builtins
import errno
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import WikiError
from .cache import CACHE_FILE, FrontmatterCache
from .files import append_durably, current_batch, write_atomically
from .names import check_folder_name, check_page_name, resolve_inside
from .page import Page, compose, parse_page, render_frontmatter, written_page
from .page_lock import LockTimeout, acquire
from .regions import check_no_markers, check_one_line, find_region, insert_in_section, outside, replace_region
from .schema import check_frontmatter

LOG = "log.md"
INDEX = "index.md"
LOCK_DIR = ".locks"
STATE_DIR = ".betty"
"""Betty's state folder, beside the wiki in its workspace: the frontmatter cache lives there."""
_FWALK = hasattr(os, "fwalk") and os.open in os.supports_dir_fd  # folders held open while listing (POSIX)

_LOG_FRONTMATTER = {"name": "Log", "type": "note",
                    "description": "What Betty and people did in this workspace, one line each, oldest first."}
_INDEX_FRONTMATTER = {"name": "Index", "type": "note",
                      "description": "Where to start: clusters, how-tos and every recorded experiment."}


@dataclass(frozen=True)
class _Target:
    name: str        # as the caller wrote it
    path: Path       # the real file, under the root
    real_name: str   # the real file's name relative to the root (differs only through a link)


class WikiStore:
    """Read, search and write the pages of one wiki folder (``<workspace>/wiki``)."""

    lock_timeout: float = 30.0
    """Seconds a write waits for another writer of the same page before giving up."""

    def __init__(self, root: str | Path) -> None:
        given = Path(root)
        if not given.is_dir():
            raise WikiError(f"no wiki at {given}; create one with `betty init` in its workspace")
        self.root = Path(os.path.realpath(given))

    # Reading

    def path(self, name: str) -> Path:
        """The real absolute path of page ``name``; WikiError naming the rule when the name is refused."""
        return self._target(name).path

    def real_name(self, name: str) -> str:
        """The name of the file page ``name`` is (links inside the wiki followed); WikiError when refused."""
        return self.path(name).relative_to(self.root).as_posix()

    def exists(self, name: str) -> bool:
        """Whether page ``name`` exists (a refused name is a WikiError, not False)."""
        return self._target(name).path.is_file()

    def read(self, name: str) -> Page:
        """Page ``name``; WikiError when it is missing or its frontmatter does not parse."""
        return self._read(self._target(name))

    def list(self, folder: str = "") -> builtins.list[Page]:
        """Every page under ``folder`` (default: the whole wiki), sorted by name.

        Hidden files (locks, temporary files), files that are not ``.md``, files whose names
        the name rules refuse and links leading out of the wiki are skipped. A page whose frontmatter does not parse is listed with
        empty frontmatter and its whole text as body, so one broken page hides no other.
        """
        cache = self._cache()
        pages = [cache.page(name, text) for name, text in self._texts(folder)]
        cache.save(complete=not folder)
        return sorted(pages, key=lambda page: page.name)

    def search(self, query: str = "", **fields: str) -> builtins.list[Page]:
        """Pages holding every word of ``query`` (any case, in frontmatter or body) whose frontmatter
        has each of ``fields`` exactly (``type="experiment"``, ``job_id="123"``; a list field
        matches when one of its items does)."""
        words = query.casefold().split()
        cache = self._cache()
        pages = []
        for name, text in self._texts():
            if words:
                folded = text.casefold()
                if not all(word in folded for word in words):
                    continue  # the words alone rule it out: its frontmatter is not needed
            page = cache.page(name, text)
            if all(_field_matches(page.frontmatter.get(key), str(value)) for key, value in fields.items()):
                pages.append(page)
        cache.save(complete=not words)
        return sorted(pages, key=lambda page: page.name)

    # Writing

    def create(self, name: str, frontmatter: Mapping[str, Any], body: str) -> Page:
        """Write a new page; WikiError when it exists or its frontmatter fails the schema."""
        target = self._writable(name, "create")
        head = check_frontmatter(name, frontmatter)
        _check_body(name, body)
        text = head + body
        with self._locked(target):
            if target.path.exists():
                raise WikiError(f"{name} already exists; change it with an update instead")
            self._write(target, text)
        return parse_page(name, text)

    def update(self, name: str, *, frontmatter: Mapping[str, Any] | None = None,
               body: str | None = None) -> Page:
        """Merge ``frontmatter`` into the page's and replace its body.

        On a page with auto markers the new body must keep every character outside the
        markers as it is; to change Betty's region alone, use :meth:`update_auto`.
        """
        target = self._writable(name, "update")
        with self._locked(target):
            page = self._read(target)
            merged, head = _merged(name, page, frontmatter)
            new_body = page.body if body is None else _kept_outside(name, page.body, body)
            return self._replace(target, page, merged, head, new_body)

    def update_auto(self, name: str, content: str, frontmatter: Mapping[str, Any] | None = None) -> Page:
        """Replace what lies between the auto markers with ``content`` and merge ``frontmatter``.

        ``content`` is markdown such as ``"## Status\\n…\\n\\n## Runtime\\n…"``. Every byte
        outside the markers stays as stored. WikiError when the page has no markers.
        """
        target = self._writable(name, "update")
        _check_text(content, "the auto region's content")
        check_no_markers(content, "the auto region's content")
        with self._locked(target):
            page = self._read(target)
            region = find_region(page.body, name)
            if region is None:
                raise WikiError(f"{name} has no region for Betty: add a '<!-- betty:auto-start -->' line and a "
                                "'<!-- betty:auto-end -->' line where Betty may write")
            merged, head = _merged(name, page, frontmatter)
            return self._replace(target, page, merged, head, replace_region(page.body, region, content))

    def append(self, name: str, text: str) -> None:
        """Add ``text`` at the end of existing page ``name`` (on a new line; a final newline is added)."""
        target = self._target(name)
        _check_text(text, "appended text")
        check_no_markers(text, "appended text")
        if not text:
            return
        with self._locked(target):
            if not target.path.is_file():
                raise WikiError(f"no page {name} in the wiki at {self.root}; create it before appending")
            self._append(target, text if text.endswith("\n") else text + "\n")

    def log(self, line: str) -> None:
        """Append ``- YYYY-MM-DD HH:MM — line`` (local time) to ``log.md``, creating it when missing."""
        check_one_line(line, "a log entry")
        check_no_markers(line, "a log entry")
        entry = f"- {datetime.now():%Y-%m-%d %H:%M} — {line}\n"
        target = self._target(LOG)
        with self._locked(target):
            if not target.path.is_file():
                self._write(target, render_frontmatter(_LOG_FRONTMATTER) + "# Log\n\n")
            self._append(target, entry)

    def add_to_index(self, section: str, line: str) -> None:
        """Add ``line`` (one markdown line; ``- `` is prefixed when it is not a list item) at the end
        of ``## section`` in ``index.md``; the section, or index.md itself, is added when missing."""
        check_one_line(section, "an index section")
        if section.lstrip().startswith("#"):
            raise WikiError("an index section is its title alone, e.g. 'Experiments', without '#'")
        check_one_line(line, "an index line")
        check_no_markers(line, "an index line")
        item = line if line.startswith(("- ", "* ")) else f"- {line}"
        target = self._target(INDEX)
        with self._locked(target):
            text = self._read(target).text if target.path.is_file() else (
                render_frontmatter(_INDEX_FRONTMATTER) + "# Index\n")
            self._write(target, insert_in_section(text, section.strip(), item))

    def add_missing(self, name: str, text: str) -> bool:
        """Write ``text`` as page ``name`` only when no page has that name; whether it wrote.

        Used to seed a wiki (``betty init``): the text is written as given, unlinted.
        """
        target = self._target(name)
        with self._locked(target):
            if target.path.exists():
                return False
            self._write(target, text)
        return True

    # Inside

    def _target(self, name: str) -> _Target:
        path, real_name = resolve_inside(self.root, check_page_name(name))
        return _Target(name, path, real_name)

    def _writable(self, name: str, action: str) -> _Target:
        target = self._target(name)
        if target.real_name == LOG:
            raise WikiError(f"refused to {action} {name}: log.md is append-only; add entries with log() or append()")
        return target

    def _read(self, target: _Target) -> Page:
        return parse_page(target.name, self._read_text(target))

    def _read_text(self, target: _Target) -> str:
        try:
            data = target.path.read_bytes()
        except FileNotFoundError:
            raise WikiError(f"no page {target.name} in the wiki at {self.root}; see `betty wiki list`") from None
        except IsADirectoryError:
            raise WikiError(f"{target.name} is a folder, not a page") from None
        except OSError as exc:
            raise WikiError(f"cannot read {target.name}: {exc.strerror or exc}") from exc
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WikiError(f"{target.name} is not UTF-8 text; save it as UTF-8 in an editor") from None

    def _texts(self, folder: str = "") -> Iterator[tuple[str, str]]:
        """The name and stored text of every page under ``folder``, as :meth:`list` describes them."""
        base = self.root
        if folder:
            base, _ = resolve_inside(self.root, check_folder_name(folder.rstrip("/")), "folder name")
        if not base.is_dir():
            return  # as os.walk: a folder that is not there holds no pages
        root = str(self.root)
        walk = os.fwalk(base) if _FWALK else ((*step, None) for step in os.walk(base))
        for directory, folders, files, dir_fd in walk:
            folders[:] = [name for name in folders if not name.startswith(".")]
            prefix = directory[len(root) + 1:].replace(os.sep, "/")
            for file in files:
                if file.startswith(".") or not file.endswith(".md"):
                    continue
                name = f"{prefix}/{file}" if prefix else file
                data = self._read_listed(name, file, dir_fd)
                if data is not None:
                    yield name, data.decode("utf-8", errors="replace")

    def _read_listed(self, name: str, file: str, dir_fd: int | None) -> bytes | None:
        """The bytes of listed page ``name``; None for what is not a page (refused names, links leading
        out, files gone since the walk, anything but a regular file)."""
        try:
            check_page_name(name)
            if dir_fd is None:
                return self._target(name).path.read_bytes()
            try:
                # A file in a folder the walk holds open is inside the wiki unless it is a link.
                fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.EMLINK):
                    raise
                return self._target(name).path.read_bytes()  # a link: followed only while it stays inside
            try:
                return _read_regular(fd)
            finally:
                os.close(fd)
        except (WikiError, OSError):
            return None

    def _cache(self) -> FrontmatterCache:
        state = self.root.parent / STATE_DIR
        return FrontmatterCache(state / CACHE_FILE if state.is_dir() and not state.is_symlink() else None)

    def _replace(self, target: _Target, page: Page, frontmatter: Mapping[str, Any], head: str | None,
                 body: str) -> Page:
        text = compose(page, frontmatter, body, head)
        if text != page.text:
            self._write(target, text)
        return written_page(target.name, page, frontmatter, body, text)

    def _write(self, target: _Target, text: str) -> None:
        try:
            write_atomically(target.path, text)
        except OSError as exc:
            raise WikiError(f"cannot write {target.name}: {exc.strerror or exc}") from exc

    def _append(self, target: _Target, text: str) -> None:
        try:
            append_durably(target.path, text)
        except OSError as exc:
            raise WikiError(f"cannot append to {target.name}: {exc.strerror or exc}") from exc

    @contextmanager
    def _locked(self, target: _Target) -> Iterator[None]:
        lock_file = self.root / LOCK_DIR / f"{target.real_name}.lock"
        try:
            if not lock_file.is_file():  # the page's first lock (a page already locked once has its folders)
                lock_file.parent.mkdir(parents=True, exist_ok=True)
                ignore = self.root / LOCK_DIR / ".gitignore"
                if not ignore.exists():
                    ignore.write_text("*\n", encoding="utf-8")
        except OSError as exc:
            raise WikiError(f"cannot create the lock for {target.name} under {lock_file.parent}: "
                            f"{exc.strerror or exc}") from exc
        batch = current_batch()
        if batch is not None and batch.holds(lock_file):
            batch.flush()  # this page waits in the batch: put it in place before reading it again
        try:
            release = acquire(lock_file, self.lock_timeout)
        except LockTimeout:
            raise WikiError(f"{target.name} is being written by another process for more than "
                            f"{self.lock_timeout:g} s; try again in a moment") from None
        except OSError as exc:
            raise WikiError(f"cannot take the lock for {target.name} at {lock_file}: {exc.strerror or exc}") from exc
        try:
            yield
        except BaseException:
            release()
            raise
        if batch is None:
            release()
        else:  # the new page is renamed into place at the batch's flush: nobody may write it before then
            batch.hold(lock_file, release)


def _read_regular(fd: int) -> bytes | None:
    """The whole content of open file ``fd``; None when it is not a regular file (a pipe, a device)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return None
    chunks = []
    while chunk := os.read(fd, max(info.st_size + 1, 65536)):
        chunks.append(chunk)
    return b"".join(chunks)


def _field_matches(value: Any, wanted: str) -> bool:
    if isinstance(value, list):
        return any(_field_matches(item, wanted) for item in value)
    if isinstance(value, bool):
        return wanted == str(value).lower()
    return value is not None and str(value) == wanted


def _merged(name: str, page: Page, frontmatter: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """The page's frontmatter with ``frontmatter`` merged in, and its checked ``---`` block (None when unchanged)."""
    if frontmatter is None:
        return page.frontmatter, None
    if not isinstance(frontmatter, Mapping):
        raise WikiError(f"{name}: frontmatter must be a mapping of fields, not {type(frontmatter).__name__}")
    merged = {**page.frontmatter, **frontmatter}
    return merged, check_frontmatter(name, merged)


def _check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise WikiError(f"{what} must be text, not {type(text).__name__}")
    if "\0" in text:
        raise WikiError(f"{what} contains a NUL byte; pages are text")
    return text


def _check_body(name: str, body: object) -> None:
    find_region(_check_text(body, f"the body of {name}"), name)


def _kept_outside(name: str, old: str, new: str) -> str:
    _check_body(name, new)
    old_region = find_region(old, name)
    if old_region is None:
        return new
    new_region = find_region(new, name)
    if new_region is None or outside(new, new_region) != outside(old, old_region):
        raise WikiError(f"refused to update {name}: it would change the person's text outside Betty's "
                        "auto markers; change only Betty's region, with update_auto")
    return new
