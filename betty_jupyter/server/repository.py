"""A notebook folder's git facts for the context chip, without running anything the repository names.

A repository's configuration can name programs for git to run (a filter's ``clean``, ``textconv``,
``core.fsmonitor``, hooks, ``core.pager``, credential helpers, aliases), and ``include.path`` or
``includeIf`` can pull such settings from anywhere. ``git status`` runs a filter's ``clean`` for
every tracked file whose stat changed: every file of an unpacked archive. So Betty never lets git
read the repository's configuration:

- the branch is read from ``HEAD`` here, as data;
- whether there is uncommitted work is asked of git with a git directory of Betty's own (a
  temporary folder): its ``config`` holds only the format keys Betty copies, checked, from the
  repository's (``core.repositoryformatversion``, ``extensions.objectformat``, ``extensions.refstorage``
  and a few comparisons' switches: ``core.filemode``, ``core.symlinks``, ``core.ignorecase``,
  ``core.trustctime``, ``core.checkstat``), and it points at the repository's objects, refs and index; the
  system and global configurations are switched off and git's environment is built from nothing, so no
  configuration that names a program reaches git at all. Submodules are not looked into (their git would
  read their own configuration).

A ``.git`` file (a worktree's or a submodule's ``gitdir:``), and a worktree's ``commondir``, must lead
inside the workspace and to a git directory that belongs to the person; anything else gives no facts.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

GIT_SECONDS = 5.0
"""How long the chip waits for git's answer."""
_SMALL_FILE = 4096
_HEX_NAME = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_REF = re.compile(r"^refs/[^\x00-\x20\x7f~^:?*\[\\]{1,250}$")
_COPIED = {
    ("core", "repositoryformatversion"): re.compile(r"^[01]$"),
    ("extensions", "objectformat"): re.compile(r"^(?:sha1|sha256)$"),
    ("extensions", "refstorage"): re.compile(r"^(?:files|reftable)$"),
    **{("core", key): re.compile(r"^(?:true|false|yes|no|on|off|1|0)$")
       for key in ("filemode", "symlinks", "ignorecase", "trustctime")},
    ("core", "checkstat"): re.compile(r"^(?:default|minimal)$"),
}
"""The only settings a repository's config gives git: data that says how to read it, never a program."""
_LINKED = ("objects", "refs", "packed-refs", "reftable")
"""What the git directory of Betty's own borrows from the repository's common directory."""


@dataclass(frozen=True)
class Repository:
    """Where a repository's pieces are: its work tree, its git directory, and the directory its worktrees share."""

    top: Path
    git_dir: Path
    common_dir: Path


def find_repository(folder: Path, workspace: Path) -> Repository | None:
    """The repository ``folder`` lies in (looking up as git does), or None (none, or one Betty will not read)."""
    for top in (folder, *folder.parents):
        dot_git = top / ".git"
        try:
            found = dot_git.lstat()
        except OSError:
            continue
        git_dir: Path | None = None
        if stat.S_ISDIR(found.st_mode):
            git_dir = dot_git
        elif stat.S_ISREG(found.st_mode):
            git_dir = _pointed_to(dot_git, "gitdir:", workspace)
        else:
            return None
        if git_dir is None or not _persons_git_dir(git_dir):
            return None
        common = _common_dir(git_dir, workspace)
        return None if common is None else Repository(top, git_dir, common)
    return None


def branch(repository: Repository) -> str | None:
    """The checked-out branch as ``git rev-parse --abbrev-ref HEAD`` names it (``HEAD`` when detached)."""
    head = _small_text(repository.git_dir / "HEAD")
    if head is None:
        return None
    head = head.strip()
    if _HEX_NAME.fullmatch(head):
        return "HEAD"
    ref = head.removeprefix("ref:").strip() if head.startswith("ref:") else ""
    if not _REF.fullmatch(ref) or any(part in ref for part in ("..", "//", "@{", "/.")) or ref.endswith((".lock", "/")):
        return None
    return ref.removeprefix("refs/heads/")


async def has_changes(repository: Repository) -> bool | None:
    """Whether tracked files differ from the last commit (staged or not); None when git cannot say in time."""
    with tempfile.TemporaryDirectory(prefix="betty-git-") as scratch:
        own = Path(scratch)
        if not _own_git_dir(repository, own / "git"):
            return None
        (own / "home").mkdir()
        out = await _git(repository.top, own, ["status", "--porcelain", "--untracked-files=no",
                                               "--ignore-submodules=all", "--no-renames"])
    return None if out is None else bool(out.strip())


# ----- the repository's own files, read as data ----------------------------------------------
def _small_text(path: Path, limit: int = _SMALL_FILE) -> str | None:
    """A small regular file's text, up to ``limit`` bytes (not a symbolic link, a FIFO or a device), or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        with open(descriptor, "rb", closefd=False) as file:
            return file.read(limit).decode("utf-8", "replace")
    finally:
        os.close(descriptor)


def _pointed_to(path: Path, prefix: str, workspace: Path) -> Path | None:
    """The directory a ``gitdir:`` (or ``commondir``) file names, where it really is; None outside the workspace."""
    text = _small_text(path)
    if text is None or not text.startswith(prefix):
        return None
    named = text[len(prefix):].strip()
    if not named or "\n" in named or "\x00" in named:
        return None
    try:
        where = (path.parent / named).resolve(strict=True)
        where.relative_to(workspace.resolve())
    except (OSError, ValueError, RuntimeError):
        return None
    return where if where.is_dir() else None


def _persons_git_dir(git_dir: Path) -> bool:
    """A git directory of the person's own (git itself refuses another user's without ``safe.directory``)."""
    try:
        return git_dir.stat().st_uid == os.getuid()
    except OSError:
        return False


def _common_dir(git_dir: Path, workspace: Path) -> Path | None:
    """Where a worktree's shared pieces are (its ``commondir``), or the git directory itself."""
    if not (git_dir / "commondir").exists():
        return git_dir
    common = _pointed_to(git_dir / "commondir", "", workspace)
    return common if common is not None and _persons_git_dir(common) else None


def _copied_config(common_dir: Path) -> str:
    """The settings of :data:`_COPIED` found in the repository's own config file, as a config of Betty's own."""
    text = _small_text(common_dir / "config", 1 << 20) or ""
    found: dict[tuple[str, str], str] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            header = re.fullmatch(r"\[([A-Za-z0-9.-]+)\]", line.split(";")[0].split("#")[0].strip())
            section = header[1].lower() if header else ""
            continue
        key, equals, value = line.partition("=")
        value = value.split("#")[0].split(";")[0].strip().lower() if equals else "true"
        name = (section, key.strip().lower())
        if name in _COPIED and _COPIED[name].fullmatch(value):
            found[name] = value
    sections: dict[str, list[str]] = {}
    for (part, key), value in found.items():
        sections.setdefault(part, []).append(f"\t{key} = {value}")
    return "".join(f"[{part}]\n" + "\n".join(lines) + "\n" for part, lines in sections.items())


def _own_git_dir(repository: Repository, own: Path) -> bool:
    """Make a git directory of Betty's own at ``own`` that reads the repository's objects, refs and index."""
    head = _small_text(repository.git_dir / "HEAD")
    config = _copied_config(repository.common_dir)
    if head is None or branch(repository) is None:
        return False
    own.mkdir(mode=0o700)
    (own / "config").write_text("[core]\n\tbare = false\n" + config, encoding="utf-8")
    (own / "HEAD").write_text(head.strip() + "\n", encoding="utf-8")
    for name in _LINKED:
        if (repository.common_dir / name).exists():
            (own / name).symlink_to(repository.common_dir / name)
    for index in (repository.git_dir / "index", *repository.git_dir.glob("sharedindex.*")):
        if index.is_file():
            (own / index.name).symlink_to(index)
    return True


async def _git(top: Path, own: Path, argv: list[str]) -> str | None:
    """What ``git`` prints with the git directory of Betty's own, or None (no git, an error, too slow)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(own / "home"),
           "XDG_CONFIG_HOME": str(own / "home"), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_ATTR_NOSYSTEM": "1", "GIT_DIR": str(own / "git"), "GIT_WORK_TREE": str(top),
           "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1"}
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        return None
    command = [git, "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", *argv]
    try:
        process = await asyncio.create_subprocess_exec(*command, cwd=str(top), env=env,
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.DEVNULL,
                                                       stdin=asyncio.subprocess.DEVNULL)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(process.communicate(), GIT_SECONDS)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return None
    return out.decode("utf-8", "replace")[:4096] if process.returncode == 0 else None
