"""The words of ``#SBATCH`` lines, read as sbatch reads them (``src/sbatch/opt.c``), and written back.

On a directive line, words split at whitespace, quotes group and are removed, a backslash
escapes the next character (``\\ `` is a space, as in Slurm 24.05 and later) and an unquoted
``#`` starts a comment. Short options map to long ones; values Betty writes are double-quoted
when needed, which every Slurm version reads back the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from betty_jupyter.errors import ScriptError

MAGIC = "#SBATCH"
SPACE = " \t\n\v\f\r"  # C isspace(), which sbatch uses
_UNSAFE_IN_VALUE = frozenset(SPACE + "\"'\\#")

# sbatch's long options (Slurm's src/common/slurm_opt.c), by whether they take a value.
TAKES_VALUE = frozenset(
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
LONG_OPTIONS = TAKES_VALUE | _OPTIONAL_VALUE | _NO_VALUE
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

@dataclass(frozen=True)
class Directive:
    """One option from an ``#SBATCH`` line: where it is, its long name, its value (None for a flag)."""

    line: int
    option: str
    value: str | None


@dataclass(frozen=True)
class Place:
    """Where a directive's words sit: 0-based line index and the span within that line."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int


class Malformed(ValueError):
    """A value or a line sbatch would not accept; the message lacks only the line number."""


def read_directive_line(index: int, line: str) -> list[tuple[Directive, Place]]:
    """The directives on one ``#SBATCH`` line, each with the span of the words it came from."""
    try:
        words = split_words(line, len(MAGIC))
        found = []
        position = 0
        while position < len(words):
            options, last = _read_option(words, position)
            place = Place(index, words[position].start, words[last].end)
            found += [(Directive(index + 1, option, value), place) for option, value in options]
            position = last + 1
        return found
    except Malformed as exc:
        raise ScriptError.at((index + 1, str(exc))) from None


def split_words(line: str, start: int) -> list[_Word]:
    """Split a directive line as sbatch's ``get_argument`` does; stop at a comment."""
    words: list[_Word] = []
    position = start
    while True:
        word, position = _next_word(line, position)
        if word is None:
            return words
        words.append(word)


def _next_word(line: str, position: int) -> tuple[_Word | None, int]:
    while position < len(line) and line[position] in SPACE:
        position += 1
    if line.startswith(":", position):
        raise Malformed("a word starts with ':', which sbatch refuses; remove it or quote the whole value")
    begin, chars, quote, escaped = position, [], "", False
    while position < len(line) and (quote or line[position] not in SPACE):
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
        raise Malformed(f"unmatched {quote} quote; close it or escape it with a backslash")
    return (_Word("".join(chars), begin, position) if chars else None), position


def _read_option(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    """Read the option at ``position`` (getopt's way); return what it set and the last word it used."""
    text = words[position].text
    if text.lower() in ("hetjob", "packjob"):
        raise Malformed("heterogeneous jobs (hetjob) are not supported here; submit them with sbatch yourself")
    if text == "--":
        raise Malformed("'--' ends sbatch's options, so nothing after it is read; remove it")
    if not text.startswith("-") or text == "-" or text.startswith("--="):
        raise Malformed(f"{text!r} is not an option; #SBATCH lines carry options such as --time=01:00:00")
    if text.startswith("--"):
        return _read_long(words, position)
    return _read_short(words, position)


def _read_long(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    name, equals, value = words[position].text[2:].partition("=")
    option = _long_name(name)
    following = words[position + 1].text if position + 1 < len(words) else None
    if equals:
        if option in _NO_VALUE:
            raise Malformed(f"--{option} takes no value; write it without '='")
        return [(option, value)], position
    if option in TAKES_VALUE:
        if following is None:
            raise Malformed(f"--{option} needs a value on the same line, e.g. --{option}=VALUE")
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
        raise Malformed(f"--{name} is ambiguous ({', '.join(matches)}); write the option in full")
    return matches[0] if matches else name


def _read_short(words: list[_Word], position: int) -> tuple[list[tuple[str, str | None]], int]:
    text = words[position].text
    found: list[tuple[str, str | None]] = []
    for index, letter in enumerate(text[1:], start=2):
        option = SHORT_OPTIONS.get(letter)
        if option is None:
            raise Malformed(f"sbatch has no option -{letter}")
        rest = text[index:]
        if option in TAKES_VALUE:
            if rest:
                return [*found, (option, rest)], position
            if position + 1 >= len(words):
                raise Malformed(f"-{letter} needs a value on the same line, e.g. -{letter} VALUE")
            return [*found, (option, words[position + 1].text)], position + 1
        if option in _OPTIONAL_VALUE:
            return [*found, (option, rest or None)], position
        found.append((option, None))
    return found, position


def render_option(option: str, value: str | None) -> str:
    """One directive as words sbatch reads back to exactly ``option`` and ``value``."""
    if value is None:
        return f"--{option}"
    if value and not _UNSAFE_IN_VALUE.intersection(value):
        return f"--{option}={value}"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'--{option}="{escaped}"'


def splice(line: str, place: Place, words: str) -> str:
    if words:
        return line[: place.start] + words + line[place.end :]
    return line[: place.start].rstrip(SPACE) + line[place.end :]
