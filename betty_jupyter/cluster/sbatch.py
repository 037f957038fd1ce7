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

from .sbatch_words import (
    LONG_OPTIONS,
    MAGIC,
    SHORT_OPTIONS,
    SPACE,
    TAKES_VALUE,
    Directive,
    Malformed,
    Place,
    read_directive_line,
    render_option,
    splice,
    split_words,
)

__all__ = ["LONG_OPTIONS", "SHORT_OPTIONS", "Directive", "PartitionOffer", "SbatchScript", "format_minutes"]

MEMORY_OPTIONS = ("mem", "mem-per-cpu", "mem-per-gpu")
_TIME = re.compile(r"^(\d+)(?:-(\d+))?(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+)(?:([KMGTkmgt])[Bb]?)?$")
_MEMORY_UNITS = {"": 1024**2, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_UNLIMITED = ("UNLIMITED", "INFINITE", "-1")
_T = TypeVar("_T")


@dataclass(frozen=True)
class PartitionOffer:
    """What one partition offers, as plain data the caller builds from ``sinfo``."""

    name: str
    gpus: Mapping[str, int]
    max_time_minutes: int | None = None
    max_memory_bytes: int | None = None
    """The memory of the partition's largest node (None: not known, nothing checked)."""


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

    @classmethod
    def written(cls, options: Sequence[tuple[str, str]], body: str, shebang: str = "#!/bin/bash") -> SbatchScript:
        """A new script: ``shebang``, one ``#SBATCH --option=value`` line per option in order, then ``body``.

        Each line is written as :meth:`with_options` writes one (a value quoted where sbatch needs it);
        an option name that is not one, or a value with a line break or NUL, is a :class:`ScriptError`.
        """
        lines = [shebang, *(_directive_line(option, value) for option, value in options)]
        return cls.parse("\n".join(lines) + "\n" + body)

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
            raise ScriptError.at(*sorted(problems))

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
        except Malformed as exc:
            raise ScriptError.at((directive.line, str(exc))) from None

    # -- edits -------------------------------------------------------------------------------

    def _with_option(self, option: str, value: str | None) -> SbatchScript:
        _check_new_value(option, value)
        if value is None:
            return self._remove(option)
        return self._set(option, None if value == "" and option not in TAKES_VALUE else value)

    def _set(self, option: str, value: str | None) -> SbatchScript:
        lines = self._text.split("\n")
        if any(directive.option == option for directive in self.directives):
            lines = self._rewrite(lines, option, value, remove=False)
        else:
            lines.insert(self._found.last_directive_line + 1, _directive_line(option, value))
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
                render_option(directive.option, value if directive.option == option else directive.value)
                for directive in group
                if not (remove and directive.option == option)
            ]
            lines[place.index] = splice(lines[place.index], place, " ".join(words))
            if not split_words(lines[place.index], len(MAGIC)):
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
            return [(directive.line, f"partition {name!r} does not exist; choose {one_of(list(by_name))}")
                    for name in unknown]
        chosen = [by_name[name] for name in names]
        return self._gpu_problems(chosen, offers) + self._time_problems(chosen) + self._memory_problems(chosen)

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

    def _memory_problems(self, chosen: list[PartitionOffer]) -> list[tuple[int, str]]:
        problems = []
        for option, count, unit in (("mem", 1, ""), ("mem-per-cpu", self._cpus_per_node(), "CPUs"),
                                    ("mem-per-gpu", self._gpu_count_per_node(), "GPUs")):
            directive = self._last(option)
            if directive is None or _malformed(directive, _memory_bytes):
                continue
            asked = _memory_bytes(directive) * count
            problems += _unless_one_fits(directive.line, [_memory_problem(offer, asked, directive, count, unit)
                                                          for offer in chosen])
        return problems

    def _gpu_count_per_node(self) -> int:
        """GPUs the script asks for on one node (1 when it asks for none, or in a form the GPU check refuses)."""
        found = self._gpu_directive()
        request = None if found is None or _malformed(found, self._gpus_per_node) else self._gpus_per_node(found)
        return request[1] if request else 1

    def _cpus_per_node(self) -> int:
        """CPUs the script asks for on one node: ``--cpus-per-task`` × ``--ntasks-per-node`` (1 each when unset)."""
        counts = [re.fullmatch(r"\d+", self.get(option) or "") for option in ("cpus-per-task", "ntasks-per-node")]
        return math.prod(max(int(count.group()), 1) if count else 1 for count in counts)

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
    places: tuple[Place, ...]
    first_command: int | None  # 0-based line index
    last_directive_line: int  # 0-based index of the last #SBATCH line before the first command (0: the shebang)
    late: tuple[int, ...]  # 1-based lines of #SBATCH after the first command
    indented: tuple[int, ...]  # 1-based lines of indented #SBATCH before it

    @classmethod
    def read(cls, lines: list[str]) -> _Found:
        """Read the ``#SBATCH`` lines sbatch reads, noting the ones it would ignore."""
        found: list[tuple[Directive, Place]] = []
        late: list[int] = []
        indented: list[int] = []
        first_command: int | None = None
        last_directive_line = 0
        for index, line in enumerate(lines):
            if first_command is not None:
                late += [index + 1] if line.startswith(MAGIC) else []
            elif line.startswith(MAGIC):
                found += read_directive_line(index, line)
                last_directive_line = index
            elif _is_command(line):
                first_command = index
            elif line.lstrip(SPACE).startswith(MAGIC):
                indented.append(index + 1)
        directives = tuple(directive for directive, _ in found)
        places = tuple(place for _, place in found)
        return cls(directives, places, first_command, last_directive_line, tuple(late), tuple(indented))

    def groups(self) -> list[tuple[Place, list[Directive]]]:
        """Directives grouped by the words they came from (``-Hk`` holds two), in script order."""
        grouped: dict[Place, list[Directive]] = {}
        for directive, place in zip(self.directives, self.places):
            grouped.setdefault(place, []).append(directive)
        return list(grouped.items())


def _check_whole_script(text: str) -> None:
    if not text.startswith("#!"):
        if text.lstrip().startswith("#!"):
            raise ScriptError.at((1, "the shebang must be the very first characters of the script, with nothing "
                                     "before it (no blank line, no indent): #!/bin/bash"))
        raise ScriptError.at((1, "a batch script must start with a shebang such as #!/bin/bash"))
    if "\0" in text:
        line = _line_of(text, "\0")
        raise ScriptError.at((line, "the script holds a NUL character, which Slurm refuses; remove it"))
    if "\r\n" in text:
        line = _line_of(text, "\r\n")
        raise ScriptError.at((line, "the script has DOS line breaks (\\r\\n), which sbatch refuses; "
                                    "save it with Unix line breaks (dos2unix)"))


def _line_of(text: str, needle: str) -> int:
    return text.count("\n", 0, text.index(needle)) + 1


def _is_command(line: str) -> bool:
    stripped = line.lstrip(SPACE)
    return bool(stripped) and not stripped.startswith("#")


def _directive_line(option: str, value: str | None) -> str:
    """One ``#SBATCH`` line Betty writes, the option and its value checked first."""
    _check_new_value(option, value)
    return f"{MAGIC} {render_option(option, value)}"


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
        raise Malformed(f"time {value!r} is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00")
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
        raise Malformed(
            f"memory {value!r} is not a Slurm size; write a whole number with an optional unit K, M, G or T "
            "(megabytes by default), e.g. 16G"
        )
    size = int(match.group(1)) * _MEMORY_UNITS[(match.group(2) or "").lower()]
    return math.ceil(size / 2**20) * 2**20


def _malformed(directive: Directive, read: Callable[[Directive], object]) -> str | None:
    """Why ``read`` cannot read ``directive``, or None when it can."""
    try:
        read(directive)
    except Malformed as exc:
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
        raise Malformed(f"GPU request {directive.value!r} is not {form}; write e.g. --{directive.option}={example}")
    if not rest:
        return None, 1
    if len(rest) == 1:
        return (None, int(rest[0])) if rest[0].isdigit() else (rest[0], 1)
    return rest[0], int(rest[1])


def _gpu_problem(offer: PartitionOffer, request: tuple[str | None, int], offers: Sequence[PartitionOffer]) -> str | None:
    kind, count = request
    if not offer.gpus:
        with_gpus = one_of([other.name for other in offers if other.gpus]) or "none here"
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


def _memory_problem(offer: PartitionOffer, asked: int, directive: Directive, count: int, unit: str) -> str | None:
    largest = offer.max_memory_bytes
    if not largest or asked <= largest:
        return None
    times = f" × {count} {unit}" if count > 1 else ""
    return (f"--{directive.option}={directive.value}{times} is more than any node in partition {offer.name} has "
            f"(largest: {largest / 2**30:.1f} GiB = {largest // 2**20}M)")


def one_of(choices: Sequence[str]) -> str:
    """Choices as a person reads them: ``cpu``, ``cpu or gpu``, ``cpu, gpu or bigmem``."""
    names = list(choices)
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def format_minutes(minutes: int) -> str:
    """Minutes in Slurm's own form: ``HH:MM:SS``, or ``D-HH:MM:SS`` from a day on."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock
