"""Pre-flight: what a batch script names that must exist on the cluster, checked before its card is shown.

A job whose log directory, program, script, environment or container image is missing fails at once
(a missing ``--output`` directory even leaves no log to say why), after waiting in the queue. Betty
reads the script (:func:`named_paths`), asks the cluster once with ``stat`` (:func:`stat_argv`, parsed
by :func:`read_stat`) and puts what it checked on the card; what a job cannot start without refuses
the submission, one line each, before anything is uploaded.

Only what the script names plainly is checked: a word with a variable other than ``$HOME``, a glob or
a command substitution is left alone (the job's own shell decides what it means), and so is a path the
script creates (``mkdir``) or writes (``>``). Paths that are only arguments (``--data /scratch/x``)
are checked and reported, never refused: the job may write them.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Sequence

from .sbatch import SbatchScript

MAX_PATHS = 40
"""At most this many paths are checked in one script (the first ones, in script order)."""

INTERPRETERS = frozenset({"python", "python3", "bash", "sh", "zsh", "Rscript", "julia", "perl", "ruby",
                          "node", "torchrun", "accelerate", "deepspeed"})
"""Programs whose first operand is the script they run (``python train.py``)."""

CONTAINER_RUNTIMES = frozenset({"apptainer", "singularity"})
IMAGE_SUFFIXES = (".sif", ".simg", ".sqsh", ".squashfs", ".img")

REQUIRED_ROLES = ("log directory", "working directory", "program", "script", "environment",
                  "container image")
"""Roles a job cannot start without: missing, they refuse the submission. Any other role is reported only."""

_NEVER_CHECKED = ("/dev/", "/proc/", "/sys/")
_PLAIN_VARIABLE = re.compile(r"^\$(?:HOME|\{HOME\})(?=/|$)")
_SHELL_WORDS = frozenset({"if", "then", "else", "elif", "fi", "for", "while", "do", "done", "case", "esac",
                          "time", "exec", "nohup", "!", "{", "}"})
_SAYS_ONLY = frozenset({"echo", "printf", "mkdir", "touch", "rm"})
"""Programs whose operands are text to print or paths they create or remove, never something they read."""
_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<<", "<<<", "<>"})


@dataclass(frozen=True)
class NamedPath:
    """A path the script names: absolute, as checked; its ``role`` in the job; the script line it is on."""

    path: str
    role: str
    line: int

    @property
    def required(self) -> bool:
        """Whether the job cannot start without it (a missing one refuses the submission)."""
        return self.role in REQUIRED_ROLES


@dataclass(frozen=True)
class CheckedPath:
    """A named path and what the cluster said: ``kind`` is ``directory``, ``file``… or None when not found."""

    named: NamedPath
    kind: str | None

    def line(self) -> str:
        """One line for the card: ``✓ /path (script, line 9)`` or ``✗ /path: not found (…)``."""
        where = f"{self.named.role}, line {self.named.line}"
        if self.kind is not None:
            return f"found {self.named.path} ({where})"
        if self.named.required:
            return f"not found: {self.named.path} ({where})"
        return f"not found yet: {self.named.path} ({where}; fine if the job writes it)"


@dataclass(frozen=True)
class Preflight:
    """What was checked, in script order, and the free space where the job writes (bytes, None if unknown)."""

    checked: tuple[CheckedPath, ...]
    free_bytes: int | None = None
    free_at: str | None = None
    unchecked: str | None = None
    """Why nothing could be checked (the cluster did not answer ``stat``), or None."""
    quota: "Quota | None" = None
    """The quota of the file system the job writes to, as ``lfs quota`` or ``quota`` told it; None: not asked, or
    not known (:attr:`quota_unknown_at`)."""
    quota_unknown_at: str | None = None
    """Where the job writes, when neither ``lfs quota`` nor ``quota`` answered for it (None: they did, or not asked)."""

    @property
    def missing(self) -> tuple[CheckedPath, ...]:
        """What the job cannot start without and the cluster does not have."""
        return tuple(item for item in self.checked if item.kind is None and item.named.required)

    def lines(self) -> list[str]:
        """The card's lines: each checked path, then the free space."""
        lines = [item.line() for item in self.checked]
        if self.unchecked is not None:
            lines.append(f"not checked: {self.unchecked}")
        if self.free_bytes is not None and self.free_at is not None:
            lines.append(f"{_size(self.free_bytes)} free on the file system of {self.free_at}")
        if self.quota is not None:
            lines.append(self.quota.line())
        elif self.quota_unknown_at is not None:
            lines.append(f"quota not known: neither lfs quota nor quota answered for {self.quota_unknown_at}")
        return lines

    def refusal(self, first_line: int = 1) -> str | None:
        """``can't submit: line 6: environment /x is not on the cluster; …`` naming each missing thing, with lines
        numbered as the person sees them (``first_line``, as :func:`~.commands.cant_submit`), or None."""
        reasons = [f"line {item.named.line + first_line - 1}: {item.named.role} {item.named.path} is not on the "
                   "cluster (or cannot be reached)" for item in self.missing]
        if self.quota is not None and self.quota.exhausted:
            reasons.append(self.quota.exhausted)
        return "can't submit: " + "; ".join(reasons) if reasons else None


def named_paths(script: SbatchScript, home: str) -> list[NamedPath]:
    """The paths ``script`` names that can be checked, in script order, without repeats (first role wins)."""
    workdir = _directive_path(script.get("chdir"), home, None)
    found: list[NamedPath] = []
    for directive in script.directives:
        if directive.option in ("output", "error", "input") and directive.value:
            where = _directive_path(directive.value, home, workdir)
            if where is not None and "%" not in posixpath.dirname(where):
                role = "input" if directive.option == "input" else "log directory"
                found.append(NamedPath(where if role == "input" else posixpath.dirname(where) or "/", role,
                                       directive.line))
        elif directive.option == "chdir" and workdir is not None:
            found.append(NamedPath(workdir, "working directory", directive.line))
    found += _body_paths(script, home, workdir)
    unique: dict[str, NamedPath] = {}
    for item in found:
        unique.setdefault(item.path, item)
    return list(unique.values())[:MAX_PATHS]


STAT_FORMAT = "%F\\0%n\\0"
"""``stat --printf``: each found path as its kind and its name, NUL-terminated (a name may hold anything)."""


def stat_argv(paths: Sequence[str]) -> list[str]:
    """``stat`` that follows links and prints kind and name of each path it finds (missing ones go to stderr)."""
    return ["stat", "-L", f"--printf={STAT_FORMAT}", "--", *paths]


def read_stat(output: str, named: Sequence[NamedPath]) -> tuple[CheckedPath, ...]:
    """Each named path with the kind ``stat`` printed for it, None where it printed nothing."""
    fields = output.split("\0")
    kinds = {fields[i + 1]: fields[i] for i in range(0, len(fields) - 1, 2)}
    return tuple(CheckedPath(item, _kind(kinds.get(item.path))) for item in named)


def free_space_argv(path: str) -> list[str]:
    """``df`` of the file system holding ``path``: the bytes available, with no header."""
    return ["df", "--block-size=1", "--output=avail", "--", path]


def read_free_space(output: str) -> int | None:
    """The available bytes from :func:`free_space_argv`'s output, None if it says something else."""
    numbers = [word for word in output.split() if word.isdigit()]
    return int(numbers[-1]) if numbers else None


QUOTA_LINES = 200
"""At most this many lines of a quota command's answer are read."""
_QUOTA_NUMBER = re.compile(r"^(\d{1,19})(\*?)$")


@dataclass(frozen=True)
class Quota:
    """The tightest quota on the file system holding ``path`` (KiB and files used, and their limits; 0: none)."""

    path: str
    source: str
    """``lfs quota`` or ``quota``: which command answered."""
    used_kib: int
    limit_kib: int
    files: int
    file_limit: int

    @property
    def exhausted(self) -> str | None:
        """Why the job could not write there (a limit reached), in one line, or None."""
        if self.limit_kib and self.used_kib >= self.limit_kib:
            return (f"the quota of the file system of {self.path} is exhausted ({_size(self.used_kib * 1024)} used "
                    f"of {_size(self.limit_kib * 1024)}, {self.source}): the job could not write its output")
        if self.file_limit and self.files >= self.file_limit:
            return (f"the quota of the file system of {self.path} is exhausted ({self.files} files of "
                    f"{self.file_limit}, {self.source}): the job could not write its output")
        return None

    def line(self) -> str:
        """The card's line: the headroom left under the quota, or that none limits the file system."""
        if self.exhausted:
            return f"quota exhausted: {self.exhausted}"
        left = [f"{_size((self.limit_kib - self.used_kib) * 1024)} of {_size(self.limit_kib * 1024)}"
                ] if self.limit_kib else []
        left += [f"{self.file_limit - self.files} of {self.file_limit} files"] if self.file_limit else []
        if not left:
            return f"quota: no limit on the file system of {self.path} ({self.source})"
        return f"quota: {' and '.join(left)} left on the file system of {self.path} ({self.source})"


def quota_argvs(path: str) -> list[tuple[str, list[str]]]:
    """The reads that tell the quota of the file system holding ``path``, in the order they are asked: Lustre's
    ``lfs quota`` for that path (the person's, group's and project's rows), then the Linux ``quota`` (every
    file system with a quota, without wrapping, mount points shown)."""
    return [("lfs quota", ["lfs", "quota", "-q", path]), ("quota", ["quota", "-w", "--show-mntpoint"])]


def read_quota(output: str, path: str, source: str) -> Quota | None:
    """The tightest quota row of ``output`` whose file system holds ``path`` (one of its names is ``path`` or a
    folder above it), or a :class:`Quota` without limits when the command listed no such row; None when ``output``
    is not a quota listing at all. Rows are ``NAME… USED[*] QUOTA LIMIT [GRACE] FILES[*] QUOTA LIMIT [GRACE]``;
    anything else is skipped, so no text of the answer reaches the card."""
    rows: list[tuple[int, int, int, int]] = []
    listing = False
    for line in output.splitlines()[:QUOTA_LINES]:
        words = line.split()
        if not words:
            continue
        if words[0] in ("Disk", "Filesystem") or "quotas for" in line:
            listing = True
            continue
        names = [word for word in words if word.startswith("/") and not _QUOTA_NUMBER.match(word)]
        numbers = [int(m.group(1)) for word in words if (m := _QUOTA_NUMBER.match(word))]
        if not names or len(numbers) < 6:
            continue
        listing = True
        if any(_holds(name, path) for name in names):
            used, soft, hard, files, file_soft, file_hard = numbers[:6]
            rows.append((used, hard or soft, files, file_hard or file_soft))
    if not rows:
        return Quota(path, source, 0, 0, 0, 0) if listing or not output.strip() else None

    def left(row: tuple[int, int, int, int]) -> float:
        return min(row[1] - row[0] if row[1] else float("inf"), (row[3] - row[2]) * 4 if row[3] else float("inf"))

    used, limit, files, file_limit = min(rows, key=left)
    return Quota(path, source, used, limit, files, file_limit)


def _holds(name: str, path: str) -> bool:
    mount = name.rstrip("/") or "/"
    return mount == "/" or path == mount or path.startswith(mount + "/")


def writes_to(named: Iterable[NamedPath]) -> str | None:
    """Where the job writes first: its log directory, else its working directory."""
    by_role = {item.role: item.path for item in reversed(list(named))}
    return by_role.get("log directory") or by_role.get("working directory")


def _kind(stat_kind: str | None) -> str | None:
    if stat_kind is None:
        return None
    return {"regular file": "file", "regular empty file": "file"}.get(stat_kind, stat_kind)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _directive_path(value: str | None, home: str, workdir: str | None) -> str | None:
    """A directive's path made absolute, or None when it cannot be known here."""
    if not value or "$" in value:
        return None
    return _absolute(value, home, workdir)


def _absolute(word: str, home: str, workdir: str | None) -> str | None:
    word = _PLAIN_VARIABLE.sub(home, word)
    if any(mark in word for mark in "$`*?[]{}\0\n"):
        return None
    if word == "~" or word.startswith("~/"):
        word = home + word[1:]
    elif not word.startswith("/"):
        if workdir is None:
            return None
        word = f"{workdir}/{word}"
    path = posixpath.normpath(word)
    return path if not any((path + "/").startswith(area) for area in _NEVER_CHECKED) else None


def _body_paths(script: SbatchScript, home: str, workdir: str | None) -> list[NamedPath]:
    first = script.text.count("\n") - script.body.count("\n") + 1  # the body's first line, 1-based
    found: list[NamedPath] = []
    created: list[str] = []
    for number, line in _logical_lines(script.body, first):
        for words in _commands(line):
            named = _command_paths(words, number, home, workdir, created)
            found += named
            moved = [item.path for item in named if item.role == "working directory"]
            if posixpath.basename(words[0]) == "cd":  # later relative paths are relative to where it went
                workdir = moved[0] if moved else None
    return [item for item in found if not _under(item.path, created)]


def _logical_lines(body: str, first: int) -> Iterable[tuple[int, str]]:
    """Body lines with backslash continuations joined, each with its first line's number."""
    pending, start = "", first
    for index, raw in enumerate(body.split("\n")):
        if not pending:
            start = first + index
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        yield start, pending + raw
        pending = ""
    if pending:
        yield start, pending


def _commands(line: str) -> list[list[str]]:
    """The simple commands of one line as words (operators split them); a line shlex cannot read gives none."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _OPERATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _command_paths(words: list[str], line: int, home: str, workdir: str | None,
                   created: list[str]) -> list[NamedPath]:
    words = _without_redirects(words)
    while words and ("=" in words[0] and not words[0].startswith(("=", "-", "/")) or words[0] in _SHELL_WORDS):
        words = words[1:]
    if not words:
        return []
    program, operands = words[0], [word for word in words[1:] if not word.startswith("-")]
    name = posixpath.basename(program)

    def path(word: str) -> str | None:
        return _absolute(word, home, workdir)

    if name in ("mkdir", "touch"):
        created += [where for where in map(path, operands) if where]
    if name in _SAYS_ONLY:
        return []
    found: list[NamedPath] = []
    roles: dict[int, str] = {}
    if "/" in program:
        roles[0] = "program"
    if name in ("cd", "source", ".") and operands:
        roles[words.index(operands[0])] = "working directory" if name == "cd" else "environment"
    if name == "conda" and operands[:1] == ["activate"] and len(operands) > 1 and "/" in operands[1]:
        roles[words.index(operands[1])] = "environment"
    if name in CONTAINER_RUNTIMES:
        image = next((i for i, word in enumerate(words) if word.endswith(IMAGE_SUFFIXES)), None)
        if image is not None:
            roles[image] = "container image"
    script_at = _script_operand(words)
    if script_at is not None:
        roles.setdefault(script_at, "script")
    for index, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
        role = roles.get(index, "input")
        if role == "input" and not value.startswith(("/", "~", "$HOME", "${HOME}")):
            continue  # an argument checked only when it is plainly a path
        where = path(value)
        if where is not None:
            found.append(NamedPath(where, role, line))
    return found


def _script_operand(words: list[str]) -> int | None:
    """Where the script an interpreter runs is named (``python train.py``, ``srun python train.py``)."""
    for index, word in enumerate(words):
        if posixpath.basename(word) not in INTERPRETERS:
            continue
        for later in range(index + 1, len(words)):
            if words[later] in ("-m", "-c", "-e"):
                return None  # a module or inline code, not a file
            if not words[later].startswith("-"):
                return later
        return None
    return None


def _without_redirects(words: list[str]) -> list[str]:
    """The words with every redirection and its target left out (a target is written, not read)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _REDIRECTS or re.fullmatch(r"\d?>>?|\d?<", word):
            skip = True
        elif not re.fullmatch(r"\d?>&\d|\d?<&\d", word):
            kept.append(word)
    return kept


def _under(path: str, folders: Sequence[str]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)
