r"""Batch scripts as sbatch reads them: ``#SBATCH`` directives with line numbers, edits, checks before upload.

Reading follows sbatch (``src/sbatch/opt.c``): the script must start with ``#!``; directives are
read from lines that begin with ``#SBATCH`` until the first line that is neither blank nor a
comment; on a directive line, words split at whitespace, quotes group and are removed, a
backslash escapes the next character (``\ `` is a space, as in Slurm 24.05 and later) and an
unquoted ``#`` starts a comment. One difference: an option's value must be on the same line as
the option (sbatch would take it from the next ``#SBATCH`` line, which nobody means). Values
Betty writes are double-quoted when needed, which every Slurm version reads back the same.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from betty_jupyter.errors import ScriptError

_MAGIC = "#SBATCH"
_SPACE = " \t\n\v\f\r"  # C isspace(), which sbatch uses
_UNSAFE_IN_VALUE = frozenset(_SPACE + "\"'\\#")

# sbatch's long options (Slurm's src/common/slurm_opt.c), by whether they take a value.
_TAKES_VALUE = frozenset(
    "account acctg-freq array batch bbf autocomplete begin bb cluster-constraint chdir clusters cluster comment "
    "constraint container container-id runtime context core-spec cores-per-socket cpu-freq cpus-per-gpu "
    "cpus-per-task deadline delay-boot dependency distribution error exclude export export-file extra "
    "extra-node-info gid gpu-bind tres-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task "
    "tres-per-task gres gres-flags hint input job-name kill-on-invalid-dep licenses mail-type mail-user "
    "mcs-label mem mem-bind mem-per-cpu mem-per-gpu mem-update mincpus network nodefile nodelist nodes ntasks "
    "ntasks-per-core ntasks-per-node ntasks-per-socket ntasks-per-tres ntasks-per-gpu open-mode output "
    "partition prefer priority profile qos reservation resources segment signal sockets-per-node switches "
    "tasks-per-node thread-spec threads-per-core time time-min tmp uid wait-all-nodes wckey wrap".split()
)
_OPTIONAL_VALUE = frozenset("exclusive oom-kill-step nice no-kill propagate requeue resv-ports".split())
_NO_VALUE = frozenset(
    "consolidate-segments contiguous external get-user-env help hold ignore-pbs no-requeue overcommit "
    "oversubscribe parsable quiet reboot spread-job spread-segments stepmgr test-only use-min-nodes usage "
    "verbose version wait".split()
)
LONG_OPTIONS = _TAKES_VALUE | _OPTIONAL_VALUE | _NO_VALUE
"""Every long option sbatch knows, without the leading dashes."""

SHORT_OPTIONS: Mapping[str, str] = {
    "A": "account", "a": "array", "b": "begin", "D": "chdir", "M": "clusters", "C": "constraint",
    "S": "core-spec", "c": "cpus-per-task", "d": "dependency", "m": "distribution", "e": "error",
    "x": "exclude", "B": "extra-node-info", "G": "gpus", "h": "help", "H": "hold", "i": "input",
    "J": "job-name", "L": "licenses", "k": "no-kill", "F": "nodefile", "w": "nodelist", "N": "nodes",
    "n": "ntasks", "o": "output", "O": "overcommit", "s": "oversubscribe", "p": "partition", "q": "qos",
    "Q": "quiet", "t": "time", "v": "verbose", "V": "version", "W": "wait",
}  # fmt: skip
"""sbatch's one-letter options and the long option each stands for."""

MEMORY_OPTIONS = ("mem", "mem-per-cpu", "mem-per-gpu")
_TIME = re.compile(r"^(\d+)(?:-(\d+))?(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+)(?:([KMGTkmgt])[Bb]?)?$")
_MEMORY_UNITS = {"": 1024**2, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_UNLIMITED = ("UNLIMITED", "INFINITE", "-1")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Directive:
    """One option from an ``#SBATCH`` line: where it is, its long name, its value (None for a flag)."""

    line: int
    option: str
    value: str | None


@dataclass(frozen=True)
class PartitionOffer:
    """What one partition offers, as plain data the caller builds from ``sinfo``."""

    name: str
    gpus: Mapping[str, int]
    max_time_minutes: int | None = None


@dataclass(frozen=True)
class _Place:
    """Where a directive's words sit: 0-based line index and the span within that line."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int


class _Malformed(ValueError):
    """A value or a line sbatch would not accept; the message lacks only the line number."""


class SbatchScript:
    """A batch script with its ``#SBATCH`` directives; immutable, so edits return a new script."""

    def __init__(self, text: str, found: _Found) -> None:
        """Use :meth:`parse`; this takes what it found."""
        self._text = text
        self._found = found

    @classmethod
    def parse(cls, text: str) -> SbatchScript:
        """Read ``text`` as sbatch does; raise :class:`ScriptError` ("line N: …") if sbatch would refuse it."""
        _check_whole_script(text)
        return cls(text, _Found.read(text.split("\n")))

    @property
    def text(self) -> str:
        """The script exactly as it reads now."""
        return self._text

    @property
    def directives(self) -> tuple[Directive, ...]:
        """The options sbatch reads, in script order (those after the first command are not among them)."""
        return self._found.directives

    @property
    def body(self) -> str:
        """The script from its first command to the end ("" when it has no command)."""
        first = self._found.first_command
        return "" if first is None else "\n".join(self._text.split("\n")[first:])

    def get(self, option: str) -> str | None:
        """The value of ``option`` (long name; ``job_name`` or ``job-name``), the last one winning as in sbatch."""
        directive = self._last(option.replace("_", "-"))
        return directive.value if directive else None

    def render(self) -> str:
        """The script's text, to upload; an unchanged script renders byte for byte as it was read."""
        return self._text

    def with_options(self, **options: str | None) -> SbatchScript:
        """Set (``time="01:00:00"``), add, or remove (``qos=None``) directives; ``""`` sets a bare flag.

        Keys use underscores for dashes (``job_name``). Every other byte stays as it was; a new
        directive goes after the last ``#SBATCH`` line, or after the shebang.
        """
        script = self
        for key, value in options.items():
            script = script._with_option(key.replace("_", "-"), value)
        return script

    def validate(self, partitions: Sequence[PartitionOffer], default_partition: str | None = None) -> None:
        """Raise :class:`ScriptError` listing every problem ("line N: …", joined with "; ").

        Partition, GPU and time-limit checks need ``partitions``; with none given they are skipped.
        Without a partition directive, ``default_partition`` (when it is offered) is checked.
        """
        problems = self._placement_problems() + self._value_problems()
        problems += self._partition_problems(partitions, default_partition)
        if problems:
            raise ScriptError("; ".join(f"line {line}: {message}" for line, message in sorted(problems)))

    def time_minutes(self) -> int | None:
        """The time limit in minutes (seconds round up); None when unset or unlimited (UNLIMITED, 0)."""
        directive = self._last("time")
        return self._checked(directive, _time_minutes) if directive else None

    def memory_bytes(self) -> int | None:
        """``--mem`` in bytes (megabytes when no unit is given, K rounded up to whole megabytes as Slurm does).

        None when unset; 0 means "all of the node's memory".
        """
        directive = self._last("mem")
        return self._checked(directive, _memory_bytes) if directive else None

    def gpu_request(self) -> tuple[str | None, int] | None:
        """GPUs per node as (type or None, count), from ``--gpus-per-node``, ``--gres`` or ``--gpus``; None if none."""
        found = self._gpu_directive()
        return self._checked(found, self._gpus_per_node) if found else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SbatchScript) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"SbatchScript({len(self.directives)} directives, {self._text.count(chr(10)) + 1} lines)"

    def _last(self, option: str) -> Directive | None:
        matching = [directive for directive in self.directives if directive.option == option]
        return matching[-1] if matching else None

    @staticmethod
    def _checked(directive: Directive, read: Callable[[Directive], _T]) -> _T:
        try:
            return read(directive)
        except _Malformed as exc:
            raise ScriptError(f"line {directive.line}: {exc}") from None

    # -- edits -------------------------------------------------------------------------------

    def _with_option(self, option: str, value: str | None) -> SbatchScript:
        _check_new_value(option, value)
        if value is None:
            return self._remove(option)
        return self._set(option, None if value == "" and option not in _TAKES_VALUE else value)

    def _set(self, option: str, value: str | None) -> SbatchScript:
        lines = self._text.split("\n")
        if any(directive.option == option for directive in self.directives):
            lines = self._rewrite(lines, option, value, remove=False)
        else:
            lines.insert(self._found.last_directive_line + 1, f"{_MAGIC} {_render(option, value)}")
        return SbatchScript.parse("\n".join(lines))

    def _remove(self, option: str) -> SbatchScript:
        if not any(directive.option == option for directive in self.directives):
            return self
        return SbatchScript.parse("\n".join(self._rewrite(self._text.split("\n"), option, None, remove=True)))

    def _rewrite(self, lines: list[str], option: str, value: str | None, remove: bool) -> list[str]:
        """Replace (or remove) ``option`` wherever it appears; drop lines left with no directive."""
        emptied: set[int] = set()
        for place, group in reversed(self._found.groups()):
            if not any(directive.option == option for directive in group):
                continue
            words = [
                _render(directive.option, value if directive.option == option else directive.value)
                for directive in group
                if not (remove and directive.option == option)
            ]
            lines[place.index] = _splice(lines[place.index], place, " ".join(words))
            if not _words(lines[place.index], len(_MAGIC)):
                emptied.add(place.index)
        return [line for index, line in enumerate(lines) if index not in emptied]

    # -- checks ------------------------------------------------------------------------------

    def _placement_problems(self) -> list[tuple[int, str]]:
        late = [(line, "#SBATCH after the first command is ignored by sbatch; move it up") for line in self._found.late]
        indented = [
            (line, "an indented #SBATCH is ignored by sbatch; start the line with #SBATCH") for line in self._found.indented
        ]
        return late + indented

    def _value_problems(self) -> list[tuple[int, str]]:
        readers = {"time": _time_minutes, **dict.fromkeys(MEMORY_OPTIONS, _memory_bytes)}
        checks: list[tuple[Directive, Callable[[Directive], object]]] = [
            (directive, readers[directive.option]) for directive in self.directives if directive.option in readers
        ]
        found = self._gpu_directive()
        if found:
            checks.append((found, self._gpus_per_node))
        return [(directive.line, problem) for directive, read in checks if (problem := _malformed(directive, read))]

    def _partition_problems(self, offers: Sequence[PartitionOffer], default: str | None) -> list[tuple[int, str]]:
        by_name = {offer.name: offer for offer in offers}
        directive = self._last("partition")
        if not by_name or (directive is None and default not in by_name):
            return []
        names = directive.value.split(",") if directive and directive.value else [str(default)]
        unknown = [name for name in names if name not in by_name]
        if directive and unknown:
            choices = ", ".join(by_name)
            return [(directive.line, f"partition {name!r} does not exist; choose from {choices}") for name in unknown]
        chosen = [by_name[name] for name in names]
        return self._gpu_problems(chosen, offers) + self._time_problems(chosen)

    def _gpu_problems(self, chosen: list[PartitionOffer], offers: Sequence[PartitionOffer]) -> list[tuple[int, str]]:
        found = self._gpu_directive()
        if found is None or _malformed(found, self._gpus_per_node):
            return []
        request = self._gpus_per_node(found)
        if request is None:
            return []
        return _unless_one_fits(found.line, [_gpu_problem(offer, request, offers) for offer in chosen])

    def _time_problems(self, chosen: list[PartitionOffer]) -> list[tuple[int, str]]:
        directive = self._last("time")
        if directive is None or _malformed(directive, _time_minutes):
            return []
        minutes = _time_minutes(directive)
        return _unless_one_fits(directive.line, [_time_problem(offer, minutes, directive.value) for offer in chosen])

    def _gpu_directive(self) -> Directive | None:
        for option in ("gpus-per-node", "gres", "gpus"):
            directive = self._last(option)
            if directive:
                return directive
        return None

    def _gpus_per_node(self, directive: Directive) -> tuple[str | None, int] | None:
        value = directive.value or ""
        if directive.option == "gres":
            return _gpu_items(value.split(","), directive)
        request = _gpu_items([f"gpu:{item}" for item in value.split(",")], directive)
        if request is None or directive.option == "gpus-per-node":
            return request
        return request[0], math.ceil(request[1] / self._min_nodes())

    def _min_nodes(self) -> int:
        nodes = self.get("nodes") or "1"
        digits = re.match(r"\d+", nodes)
        return max(int(digits.group()), 1) if digits else 1


@dataclass(frozen=True)
class _Found:
    """What reading a script's lines found: directives with their places and misplaced ``#SBATCH`` lines."""

    directives: tuple[Directive, ...]
    places: tuple[_Place, ...]
    first_command: int | None  # 0-based line index
    last_directive_line: int  # 0-based index of the last #SBATCH line before the first command (0: the shebang)
    late: tuple[int, ...]  # 1-based lines of #SBATCH after the first command
    indented: tuple[int, ...]  # 1-based lines of indented #SBATCH before it

    @classmethod
    def read(cls, lines: list[str]) -> _Found:
        """Read the ``#SBATCH`` lines sbatch reads, noting the ones it would ignore."""
        found: list[tuple[Directive, _Place]] = []
        late: list[int] = []
        indented: list[int] = []
        first_command: int | None = None
        last_directive_line = 0
        for index, line in enumerate(lines):
            if first_command is not None:
                late += [index + 1] if line.startswith(_MAGIC) else []
            elif line.startswith(_MAGIC):
                found += _read_directive_line(index, line)
                last_directive_line = index
            elif _is_command(line):
                first_command = index
            elif line.lstrip(_SPACE).startswith(_MAGIC):
                indented.append(index + 1)
        directives = tuple(directive for directive, _ in found)
        places = tuple(place for _, place in found)
        return cls(directives, places, first_command, last_directive_line, tuple(late), tuple(indented))

    def groups(self) -> list[tuple[_Place, list[Directive]]]:
        """Directives grouped by the words they came from (``-Hk`` holds two), in script order."""
        grouped: dict[_Place, list[Directive]] = {}
        for directive, place in zip(self.directives, self.places):
            grouped.setdefault(place, []).append(directive)
        return list(grouped.items())


def _check_whole_script(text: str) -> None:
    if not text.startswith("#!"):
        raise ScriptError("line 1: a batch script must start with a shebang such as #!/bin/bash")
    if "\0" in text:
        line = _line_of(text, "\0")
        raise ScriptError(f"line {line}: the script holds a NUL character, which Slurm refuses; remove it")
    if "\r\n" in text:
        line = _line_of(text, "\r\n")
        raise ScriptError(
            f"line {line}: the script has DOS line breaks (\\r\\n), which sbatch refuses; "
            "save it with Unix line breaks (dos2unix)"
        )


def _line_of(text: str, needle: str) -> int:
    return text.count("\n", 0, text.index(needle)) + 1


def _is_command(line: str) -> bool:
    stripped = line.lstrip(_SPACE)
    return bool(stripped) and not stripped.startswith("#")


def _read_directive_line(index: int, line: str) -> list[tuple[Directive, _Place]]:
    """The directives on one ``#SBATCH`` line, each with the span of the words it came from."""
    try:
        words = _words(line, len(_MAGIC))
        found = []
        position = 0
        while position < len(words):
            options, last = _read_option(words, position)
            place = _Place(index, words[position].start, words[last].end)
            found += [(Directive(index + 1, option, value), place) for option, value in options]
            position = last + 1
        return found
    except _Malformed as exc:
        raise ScriptError(f"line {index + 1}: {exc}") from None


def _words(line: str, start: int) -> list[_Word]:
    """Split a directive line as sbatch's ``get_argument`` does; stop at a comment."""
    words: list[_Word] = []
    position = start
    while True:
        word, position = _next_word(line, position)
        if word is None:
            return words
        words.append(word)


def _next_word(line: str, position: int) -> tuple[_Word | None, int]:
    while position < len(line) and line[position] in _SPACE:
        position += 1
    if line.startswith(":", position):
        raise _Malformed("a word starts with ':', which sbatch refuses; remove it or quote the whole value")
    begin, chars, quote, escaped = position, [], "", False
    while position < len(line) and (quote or line[position] not in _SPACE):
        char = line[position]
        position += 1
        if escaped:
            escaped = False
        elif char == "\\":
            if line[position : position + 1] == " ":
                chars.append(" ")
                position += 1
            else:
                escaped = True
            continue
        elif quote and char == quote:
            quote = ""
            continue
        elif not quote and char in "\"'":
            quote = char
            continue
        elif not quote and char == "#":
            position -= 1
            break
        chars.append(char)
    if quote:
        raise _Malformed(f"unmatched {quote} quote; close it or escape it with a backslash")
    return (_Word("".join(chars), begin, position) if chars else None), position


def _read_option(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    """Read the option at ``position`` (getopt's way); return what it set and the last word it used."""
    text = words[position].text
    if text.lower() in ("hetjob", "packjob"):
        raise _Malformed("heterogeneous jobs (hetjob) are not supported here; submit them with sbatch yourself")
    if text == "--":
        raise _Malformed("'--' ends sbatch's options, so nothing after it is read; remove it")
    if not text.startswith("-") or text == "-" or text.startswith("--="):
        raise _Malformed(f"{text!r} is not an option; #SBATCH lines carry options such as --time=01:00:00")
    if text.startswith("--"):
        return _read_long(words, position)
    return _read_short(words, position)


def _read_long(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    name, equals, value = words[position].text[2:].partition("=")
    option = _long_name(name)
    following = words[position + 1].text if position + 1 < len(words) else None
    if equals:
        if option in _NO_VALUE:
            raise _Malformed(f"--{option} takes no value; write it without '='")
        return [(option, value)], position
    if option in _TAKES_VALUE:
        if following is None:
            raise _Malformed(f"--{option} needs a value on the same line, e.g. --{option}=VALUE")
        return [(option, following)], position + 1
    if option not in LONG_OPTIONS and following is not None and not following.startswith("-"):
        return [(option, following)], position + 1  # an option this table does not know, with its value
    return [(option, None)], position


def _long_name(name: str) -> str:
    """The long option ``name`` stands for: itself, or the one option it abbreviates (as getopt allows)."""
    if name in LONG_OPTIONS:
        return name
    matches = sorted(option for option in LONG_OPTIONS if option.startswith(name))
    if len(matches) > 1:
        raise _Malformed(f"--{name} is ambiguous ({', '.join(matches)}); write the option in full")
    return matches[0] if matches else name


def _read_short(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    text = words[position].text
    found: list[tuple[str, str | None]] = []
    for index, letter in enumerate(text[1:], start=2):
        option = SHORT_OPTIONS.get(letter)
        if option is None:
            raise _Malformed(f"sbatch has no option -{letter}")
        rest = text[index:]
        if option in _TAKES_VALUE:
            if rest:
                return [*found, (option, rest)], position
            if position + 1 >= len(words):
                raise _Malformed(f"-{letter} needs a value on the same line, e.g. -{letter} VALUE")
            return [*found, (option, words[position + 1].text)], position + 1
        if option in _OPTIONAL_VALUE:
            return [*found, (option, rest or None)], position
        found.append((option, None))
    return found, position


def _render(option: str, value: str | None) -> str:
    """One directive as words sbatch reads back to exactly ``option`` and ``value``."""
    if value is None:
        return f"--{option}"
    if value and not _UNSAFE_IN_VALUE.intersection(value):
        return f"--{option}={value}"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'--{option}="{escaped}"'


def _splice(line: str, place: _Place, words: str) -> str:
    if words:
        return line[: place.start] + words + line[place.end :]
    return line[: place.start].rstrip(_SPACE) + line[place.end :]


def _check_new_value(option: str, value: str | None) -> None:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9-]*$", option):
        raise ScriptError(f"{option!r} is not an sbatch option name; use names such as job_name or time")
    if value is not None and any(char in value for char in "\n\r\0"):
        raise ScriptError(f"the value for --{option} holds a line break or NUL; give it on one line")


def _time_minutes(directive: Directive) -> int | None:
    """Slurm's time formats, in minutes rounded up; None for no limit."""
    value = directive.value or ""
    if value.upper() in _UNLIMITED:
        return None
    match = _TIME.match(value)
    if not match:
        raise _Malformed(f"time {value!r} is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00")
    seconds = _time_seconds(value, [int(part) if part else 0 for part in match.groups()], "-" in value)
    return math.ceil(seconds / 60) or None


def _time_seconds(value: str, parts: list[int], has_days: bool) -> int:
    first, days_hours, second, third = parts
    if has_days:
        return first * 86400 + days_hours * 3600 + second * 60 + third
    if value.count(":") == 2:
        return first * 3600 + second * 60 + third
    return first * 60 + second


def _memory_bytes(directive: Directive) -> int:
    """A Slurm size in bytes, counted as Slurm does: whole megabytes, kilobytes rounded up."""
    value = directive.value or ""
    match = _MEMORY.match(value)
    if not match:
        raise _Malformed(
            f"memory {value!r} is not a Slurm size; write a whole number with an optional unit K, M, G or T "
            "(megabytes by default), e.g. 16G"
        )
    size = int(match.group(1)) * _MEMORY_UNITS[(match.group(2) or "").lower()]
    return math.ceil(size / 2**20) * 2**20


def _malformed(directive: Directive, read: Callable[[Directive], object]) -> str | None:
    """Why ``read`` cannot read ``directive``, or None when it can."""
    try:
        read(directive)
    except _Malformed as exc:
        return str(exc)
    return None


def _unless_one_fits(line: int, problems: list[str | None]) -> list[tuple[int, str]]:
    """The problems with each partition asked for, or none when at least one of them fits."""
    return [] if not all(problems) else [(line, problem) for problem in problems if problem]


def _gpu_items(items: list[str], directive: Directive) -> tuple[str | None, int] | None:
    """Sum the GPU items of a ``--gres``-style list; None when it asks for no GPU."""
    requests = [request for request in (_gpu_item(item, directive) for item in items) if request]
    total = sum(count for _, count in requests)
    if not total:
        return None
    kinds = {kind for kind, _ in requests}
    return (kinds.pop() if len(kinds) == 1 else None), total


def _gpu_item(item: str, directive: Directive) -> tuple[str | None, int] | None:
    name, *rest = item.split(":")
    if name.removeprefix("gres/") != "gpu":
        return None
    if len(rest) > 2 or any(not part for part in rest) or (len(rest) == 2 and not rest[1].isdigit()):
        form, example = ("gpu[:type][:count]", "gpu:a100:2") if directive.option == "gres" else ("[type:]count", "a100:2")
        raise _Malformed(f"GPU request {directive.value!r} is not {form}; write e.g. --{directive.option}={example}")
    if not rest:
        return None, 1
    if len(rest) == 1:
        return (None, int(rest[0])) if rest[0].isdigit() else (rest[0], 1)
    return rest[0], int(rest[1])


def _gpu_problem(offer: PartitionOffer, request: tuple[str | None, int], offers: Sequence[PartitionOffer]) -> str | None:
    kind, count = request
    if not offer.gpus:
        with_gpus = ", ".join(other.name for other in offers if other.gpus) or "none here"
        return f"partition {offer.name!r} has no GPUs; choose a partition with GPUs ({with_gpus}) or drop the GPU request"
    if kind is not None and kind not in offer.gpus:
        return f"partition {offer.name!r} has no {kind!r} GPUs; it offers {_gpu_text(offer)} per node"
    most = offer.gpus[kind] if kind is not None else max(offer.gpus.values())
    if count > most:
        return (
            f"{count} GPUs per node is more than partition {offer.name!r} has ({_gpu_text(offer)} per node); "
            f"ask for at most {most} per node or spread over more nodes"
        )
    return None


def _gpu_text(offer: PartitionOffer) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in offer.gpus.items())


def _time_problem(offer: PartitionOffer, minutes: int | None, value: str | None) -> str | None:
    limit = offer.max_time_minutes
    if limit is None or (minutes is not None and minutes <= limit):
        return None
    return f"time {value} is over partition {offer.name!r}'s limit of {format_minutes(limit)}; ask for at most that"


def format_minutes(minutes: int) -> str:
    """Minutes in Slurm's own form: ``HH:MM:SS``, or ``D-HH:MM:SS`` from a day on."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock
