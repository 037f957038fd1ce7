"""The read-only allowlist: the cluster commands a person or the agent may run without approval.

The policy works on argv, never on a shell string. A string is split with :func:`shlex.split`
only after every shell metacharacter, control character and non-ASCII character has been
refused, so what is checked is exactly what runs: ``shlex.join(argv)``.

Three kinds of program are allowed:

* Slurm's read commands (``squeue``, ``sinfo``, ``sacct``, ``sprio``, ``sshare``, ``seff``,
  ``scontrol show …``, ``sacctmgr show|list …``), each with an explicit list of options;
  an option that is not listed is refused rather than guessed at.
* File readers (``cat``, ``head``, ``tail``, ``ls``, ``wc``, ``du``, ``df``), whose path
  arguments must lie under the configured readable roots. Paths are normalised (``..``
  folded away, ``~`` and relative paths resolved against ``home``) and written back into argv
  in that absolute form. Symlinks cannot be seen from here: the caller resolves
  :attr:`AllowedCommand.paths` on the cluster (``realpath``) and hands the answers to
  :meth:`CommandPolicy.check_resolved`.
* Site extras from configuration: program name -> allowed first arguments.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from betty_jupyter.errors import ConfigError, PolicyError

SHELL_METACHARACTERS = frozenset(";&|`$<>(){}!\\*?#")
"""Characters that mean something to a shell; any of them refuses a command."""

_WILDCARDS = frozenset("*?")
_PROGRAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_JOB_ID = re.compile(r"^\d+(_\d+)?$")
_SLURM_NAME = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")
_NUMBER = re.compile(r"^[+-]?\d+[A-Za-z]{0,3}$")


@dataclass(frozen=True)
class AllowedCommand:
    """A command the policy accepted: the argv that will run and the paths to check for symlinks."""

    argv: tuple[str, ...]
    paths: tuple[str, ...] = ()

    @property
    def command_line(self) -> str:
        """The exact text that will run on the cluster: ``shlex.join(argv)``."""
        return shlex.join(self.argv)


@dataclass(frozen=True)
class _Options:
    """The options one program accepts: plain flags, options with a value, options with an optional value."""

    flags: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    numeric: frozenset[str] = frozenset()
    count_shorthand: bool = False  # head -20, tail -100

    def describe(self) -> str:
        """The options as one line of text, for the agent's system prompt."""
        parts = []
        if self.flags:
            parts.append("flags " + " ".join(sorted(self.flags, key=_option_order)))
        if self.valued:
            parts.append("with a value " + " ".join(sorted(self.valued, key=_option_order)))
        if self.optional:
            parts.append("with an optional =value " + " ".join(sorted(self.optional, key=_option_order)))
        return "; ".join(parts) if parts else "no options"


def _option_order(option: str) -> tuple[int, str]:
    return (option.startswith("--"), option.lower())


def _opts(
    flags: str = "", valued: str = "", optional: str = "", numeric: str = "", count_shorthand: bool = False
) -> _Options:
    return _Options(
        frozenset(flags.split()),
        frozenset(valued.split()),
        frozenset(optional.split()),
        frozenset(numeric.split()),
        count_shorthand,
    )


# Options that would write, loop forever or read arbitrary files are simply absent:
# squeue/sinfo -i (iterate), sacct -f (reads an accounting file), tail -f/-F, du -L, sacctmgr -i.
SLURM_LISTINGS: dict[str, _Options] = {
    "squeue": _opts(
        "-h --noheader -l --long --me -r --array --start -a --all -v --verbose --json --yaml -P --priority --noconvert",
        "-u --user -p --partition -t --states -j --jobs -o --format -O --Format -A --account -n --name "
        "-w --nodelist -S --sort -q --qos -M --clusters -L --licenses -R --reservation",
        "-s --steps",
    ),
    "sinfo": _opts(
        "-N --Node -h --noheader -l --long -s --summarize -R --list-reasons -e --exact -a --all "
        "-r --responding -d --dead -v --verbose --json --yaml --noconvert",
        "-p --partition -o --format -O --Format -t --states -n --nodes -S --sort -M --clusters",
    ),
    "sacct": _opts(
        "-X --allocations -P --parsable2 -p --parsable -n --noheader -b --brief -l --long -a --allusers "
        "-D --duplicates -L --allclusters -T --truncate -e --helpformat -v --verbose --json --yaml --noconvert",
        "-j --jobs -u --user -S --starttime -E --endtime -s --state -o --format --delimiter -A --account "
        "-r --partition -M --clusters -N --nodelist --name -q --qos --units -g --gid --group",
    ),
    "sprio": _opts(
        "-h --noheader -l --long -n --norm -w --weights -v --verbose",
        "-j --jobs -u --user -p --partition -o --format -M --clusters -S --sort",
    ),
    "sshare": _opts(
        "-a --all -h --noheader -l --long -p --parsable -P --parsable2 -U --Users -v --verbose",
        "-A --accounts -u --users -o --format -M --clusters",
    ),
    "seff": _opts("-d"),
}
"""Slurm's read commands and the options each may carry."""

SCONTROL_OPTIONS = _opts("-d --details -o --oneliner -a --all --json --yaml", "-M --clusters")
SCONTROL_OBJECTS = ("job", "node", "partition", "reservation", "config", "hostnames")
_SCONTROL_CHANGES = frozenset(
    "update delete create requeue requeuehold hold uhold release reconfigure shutdown suspend resume "
    "takeover notify reboot cancel_reboot power top setdebug setdebugflags schedloglevel write token abort".split()
)

SACCTMGR_OPTIONS = _opts(
    "-n --noheader -p --parsable -P --parsable2 -s --associations -r --readonly -Q --quiet --json --yaml"
)
SACCTMGR_ENTITIES = frozenset(
    "account accounts association associations assoc cluster clusters configuration config event events "
    "federation federations problem problems qos reservation reservations resource resources stats tres "
    "transaction transactions txn user users wckey wckeys".split()
)
_SACCTMGR_CHANGES = frozenset(
    "add create delete remove modify update set archive load dump clear reconfigure shutdown".split()
)

_COUNTS = "-n -c --lines --bytes"
FILE_READERS: dict[str, _Options] = {
    "cat": _opts(
        "-n -b -s -A -E -T -v --number --number-nonblank --squeeze-blank --show-all --show-ends --show-tabs "
        "--show-nonprinting"
    ),
    "head": _opts("-q -v --quiet --silent --verbose", _COUNTS, numeric=_COUNTS, count_shorthand=True),
    "tail": _opts("-q -v --quiet --silent --verbose", _COUNTS, numeric=_COUNTS, count_shorthand=True),
    "ls": _opts(
        "-l -a -A -h -t -r -1 -d -R -S -F -s -i -n -g -o -p -X -U -c -u --all --almost-all --human-readable "
        "--recursive --reverse --directory --classify --size --inode --full-time",
        optional="--color",
    ),
    "wc": _opts("-l -c -w -m -L --lines --bytes --words --chars --max-line-length"),
    "du": _opts(
        "-s -h -c -a -k -m -b -x --summarize --human-readable --total --all --apparent-size --one-file-system --si",
        "-d --max-depth",
        numeric="-d --max-depth",
    ),
    "df": _opts("-h -H -T -i -P -k -l --human-readable --si --print-type --inodes --portability --local --total"),
}
"""File readers, the options each may carry; their path arguments must lie under the readable roots."""

_NEEDS_NO_PATH = frozenset({"df"})


def _reasons(programs: str, options: str, reason: str) -> dict[tuple[str, str], str]:
    return {(program, option): reason for program in programs.split() for option in options.split()}


_SPECIAL_REFUSALS: dict[tuple[str, str], str] = {
    **_reasons("tail", "-f -F --follow --retry", "would follow the file forever; read its end once with 'tail -n 100 PATH'"),
    **_reasons("squeue sinfo sprio", "-i --iterate", "would repeat forever; run it once"),
    **_reasons("sacctmgr", "-i --immediate", "commits changes without asking; only 'sacctmgr show|list' is allowed"),
    **_reasons("sacct", "-f --file", "reads an arbitrary accounting file; ask Slurm's database instead"),
    **_reasons("du ls", "-L -H --dereference", "follows symlinks out of the readable roots"),
}


def _refuse(message: str) -> PolicyError:
    return PolicyError(f"refused: {message}")


def check_characters(text: str) -> None:
    """Refuse ``text`` if it holds a shell metacharacter, a control character or a non-ASCII character."""
    for char in text:
        if char in _WILDCARDS:
            raise _refuse(f"{char!r} is a wildcard and no shell expands it; name the files, or list the directory with ls")
        if char in SHELL_METACHARACTERS:
            raise _refuse(f"{char!r} is a shell metacharacter; Betty runs one plain command, no shell")
        if ord(char) < 32 or ord(char) == 127:
            raise _refuse(f"the command holds a control character ({char!r}); Betty runs one plain command on one line")
        if ord(char) > 127:
            code = f"U+{ord(char):04X}"
            raise _refuse(f"{char!r} ({code}) is not plain ASCII; type the command in ASCII (lookalikes are refused)")


def split_command(command: str | Sequence[str]) -> list[str]:
    """Turn a command (text, or argv) into a checked argv: characters refused first, then ``shlex.split``."""
    if isinstance(command, str):
        check_characters(command)
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise _refuse(f"the command has an unbalanced quote ({exc}); close every ' and \"") from exc
    else:
        argv = list(command)
        for position, item in enumerate(argv):
            if not isinstance(item, str):
                raise _refuse(f"argument {position} is a {type(item).__name__}, not text; pass every argument as a string")
            check_characters(item)
    if not argv or not argv[0]:
        raise _refuse("the command is empty; name a program such as squeue")
    return argv


def _read_arguments(program: str, args: Sequence[str], options: _Options) -> list[int]:
    """Check ``args`` against ``options`` the way getopt reads them; return the positions of the operands.

    Options must come before operands (``--`` ends the options); anything not listed is refused.
    """
    operands: list[int] = []
    position = 0
    while position < len(args):
        arg = args[position]
        if arg == "--":
            operands.extend(range(position + 1, len(args)))
            break
        if arg.startswith("-") and arg != "-":
            if operands:
                raise _refuse(f"'{program} {arg}' comes after {args[operands[0]]!r}; put options before names and paths")
            position = _read_option(program, args, position, options)
        else:
            operands.append(position)
        position += 1
    return operands


def _read_option(program: str, args: Sequence[str], position: int, options: _Options) -> int:
    """Check the option at ``position`` (and its value); return the position of the last argument it used."""
    arg = args[position]
    if arg.startswith("--"):
        return _read_long_option(program, args, position, options)
    if options.count_shorthand and arg[1:].isdigit():
        return position
    for index, letter in enumerate(arg[1:], start=2):
        name = f"-{letter}"
        if name in options.flags:
            continue
        if name in options.valued:
            if arg[index:]:
                _check_value(program, name, arg[index:], options)
                return position
            return _take_next_value(program, args, position, name, options)
        if name in options.optional:
            return position
        raise _unknown_option(program, name, options)
    return position


def _read_long_option(program: str, args: Sequence[str], position: int, options: _Options) -> int:
    name, equals, value = args[position].partition("=")
    if name in options.flags:
        if equals:
            raise _refuse(f"'{program} {name}' takes no value; write it without '='")
        return position
    if name in options.optional:
        return position
    if name not in options.valued:
        raise _unknown_option(program, name, options)
    if equals:
        _check_value(program, name, value, options)
        return position
    return _take_next_value(program, args, position, name, options)


def _take_next_value(program: str, args: Sequence[str], position: int, name: str, options: _Options) -> int:
    if position + 1 >= len(args):
        raise _refuse(f"'{program} {name}' needs a value; write e.g. '{program} {name} VALUE'")
    _check_value(program, name, args[position + 1], options)
    return position + 1


def _check_value(program: str, name: str, value: str, options: _Options) -> None:
    if name in options.numeric and not _NUMBER.match(value):
        raise _refuse(f"'{program} {name}' takes a number, not {value!r}; write e.g. '{program} {name} 20'")


def _unknown_option(program: str, name: str, options: _Options) -> PolicyError:
    if (program, name) in _SPECIAL_REFUSALS:
        return _refuse(f"'{program} {name}' {_SPECIAL_REFUSALS[program, name]}")
    return _refuse(f"'{program} {name}' is not an allowed option; {program} takes {options.describe()}")


class CommandPolicy:
    """The read-only allowlist for one cluster.

    ``readable_roots`` are absolute directories the file readers may read under (give them as
    real paths: symlinked roots make :meth:`check_resolved` refuse their contents). Relative
    paths and ``~/…`` are resolved against ``home`` when it is given and refused otherwise;
    ``~user`` is always refused. ``extra_commands`` maps site programs to their allowed first
    arguments (``{"myquota": []}`` allows ``myquota`` with no arguments, ``{"lfs": ["quota"]}``
    allows ``lfs quota …`` with any further plain arguments).
    """

    def __init__(
        self,
        readable_roots: Sequence[str] = (),
        home: str | None = None,
        extra_commands: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.readable_roots: tuple[str, ...] = tuple(_config_path(root, "readable root") for root in readable_roots)
        self.home: str | None = _config_path(home, "home") if home is not None else None
        self.extra_commands: dict[str, tuple[str, ...]] = _config_extras(extra_commands or {})

    @property
    def programs(self) -> tuple[str, ...]:
        """Every program name the policy allows, built-in and site extras."""
        return (*SLURM_LISTINGS, "scontrol", "sacctmgr", *FILE_READERS, *self.extra_commands)

    def check(self, command: str | Sequence[str]) -> AllowedCommand:
        """Accept ``command`` as an :class:`AllowedCommand`, or raise :class:`PolicyError` naming the rule."""
        argv = split_command(command)
        program, args = argv[0], argv[1:]
        self._check_program(program)
        if program in FILE_READERS:
            return self._check_file_reader(program, args)
        if program == "scontrol":
            _check_scontrol(args)
        elif program == "sacctmgr":
            _check_sacctmgr(args)
        elif program in SLURM_LISTINGS:
            _check_listing(program, args)
        else:
            self._check_extra(program, args)
        return AllowedCommand(tuple(argv))

    def check_resolved(self, allowed: AllowedCommand, resolved: Mapping[str, str]) -> None:
        """Refuse ``allowed`` if any of its paths resolves (``realpath`` on the cluster) outside the roots."""
        for path in allowed.paths:
            real = resolved.get(path)
            if real is None:
                raise _refuse(f"{path} was not resolved on the cluster; run realpath on it before reading it")
            if not self._is_readable(_normalise(real)):
                raise _refuse(f"{path} leads to {real}, which is outside the readable roots ({self._roots_text()})")

    def describe(self) -> str:
        """The allowlist as short text for the agent's system prompt."""
        lines = [
            "Read-only cluster commands you may run without approval: one plain command, no shell, "
            "ASCII only, none of " + " ".join(sorted(SHELL_METACHARACTERS)) + ", options before names and paths.",
        ]
        lines += [f"- {name}: {options.describe()}" for name, options in SLURM_LISTINGS.items()]
        lines.append(f"- scontrol show {'|'.join(SCONTROL_OBJECTS)} [name or job id]: {SCONTROL_OPTIONS.describe()}")
        entities = "|".join(sorted(SACCTMGR_ENTITIES))
        lines.append(f"- sacctmgr show|list {entities} [filters]: {SACCTMGR_OPTIONS.describe()}")
        lines += [f"- {name} {_path_usage(name)}: {options.describe()}" for name, options in FILE_READERS.items()]
        lines += [f"- {name} {self._describe_extra(name)}" for name in self.extra_commands]
        lines.append(self._describe_roots())
        return "\n".join(lines)

    def _describe_roots(self) -> str:
        if not self.readable_roots:
            return "File readers are off: no readable roots are configured."
        where = f"; relative paths and ~/ resolve against {self.home}" if self.home else "; give absolute paths"
        return f"File readers may read only under the readable roots: {self._roots_text()}{where}."

    def _describe_extra(self, name: str) -> str:
        allowed = self.extra_commands[name]
        return f"{'|'.join(allowed)} [plain arguments] (site extra)" if allowed else "(site extra, no arguments)"

    def _check_program(self, program: str) -> None:
        if "/" in program:
            name = posixpath.basename(program)
            raise _refuse(f"{program!r} is a path; name the program alone (e.g. {name!r}), the cluster's PATH finds it")
        if program not in self.programs:
            allowed = ", ".join(self.programs)
            raise _refuse(f"{program!r} is not on the read-only allowlist; allowed programs: {allowed}")

    def _check_file_reader(self, program: str, args: list[str]) -> AllowedCommand:
        if not self.readable_roots:
            raise _refuse(
                f"{program} reads files, and no readable roots are configured; add directories to the "
                "cluster profile's readable_roots to allow it"
            )
        operands = _read_arguments(program, args, FILE_READERS[program])
        if not operands and program not in _NEEDS_NO_PATH:
            raise _refuse(f"{program} needs a path under the readable roots ({self._roots_text()})")
        argv = [program, *args]
        for position in operands:
            argv[position + 1] = self._readable_path(args[position])
        paths = tuple(dict.fromkeys(argv[position + 1] for position in operands))
        return AllowedCommand(tuple(argv), paths)

    def _readable_path(self, path: str) -> str:
        """The normalised absolute form of ``path``, refused unless it lies under a readable root."""
        absolute = _normalise(self._absolute(path))
        if not self._is_readable(absolute):
            raise _refuse(f"{absolute} is outside the readable roots ({self._roots_text()})")
        return absolute

    def _absolute(self, path: str) -> str:
        if not path:
            raise _refuse("an empty path names nothing; give a path under the readable roots")
        if path.startswith("~"):
            user, _, rest = path[1:].partition("/")
            if user:
                raise _refuse(f"{path!r} points into another user's home; write the full path under the readable roots")
            path = rest or "."
        if path.startswith("/"):
            return path
        if self.home is None:
            raise _refuse(f"{path!r} is relative and no home is known; write the full path under the readable roots")
        return posixpath.join(self.home, path)

    def _is_readable(self, path: str) -> bool:
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in self.readable_roots)

    def _roots_text(self) -> str:
        return ", ".join(self.readable_roots) or "none configured"

    def _check_extra(self, program: str, args: list[str]) -> None:
        allowed = self.extra_commands[program]
        if not allowed:
            if args:
                raise _refuse(f"{program} is allowed only without arguments (site configuration); drop {args[0]!r}")
            return
        if not args or args[0] not in allowed:
            given = shlex.join([program, *args[:1]])
            raise _refuse(f"'{given}' is not allowed; this site allows only {program} {'|'.join(allowed)}")


def _path_usage(program: str) -> str:
    return "[PATH...]" if program in _NEEDS_NO_PATH else "PATH..."


def _normalise(path: str) -> str:
    """``posixpath.normpath``, also folding the leading ``//`` POSIX keeps."""
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("/") else normal


def _config_path(path: str, what: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(f"{what} {path!r} is not an absolute path; give it in full, e.g. /home/you/project")
    return _normalise(path)


def _config_extras(extras: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    checked: dict[str, tuple[str, ...]] = {}
    for name, first_arguments in extras.items():
        if not _PROGRAM_NAME.match(name):
            raise ConfigError(f"extra command {name!r} is not a plain program name; use letters, digits, . _ + -")
        if name in SLURM_LISTINGS or name in FILE_READERS or name in ("scontrol", "sacctmgr"):
            raise ConfigError(f"extra command {name!r} is built in; remove it from extra_commands")
        if isinstance(first_arguments, str):
            raise ConfigError(f"extra command {name!r} needs a list of allowed first arguments, not a string")
        for argument in first_arguments:
            try:
                check_characters(argument)
            except PolicyError as exc:
                raise ConfigError(f"extra command {name!r}: argument {argument!r} {exc}") from exc
        checked[name] = tuple(first_arguments)
    return checked


def _check_listing(program: str, args: list[str]) -> None:
    operands = _read_arguments(program, args, SLURM_LISTINGS[program])
    if program == "seff":
        if len(operands) != 1 or not _JOB_ID.match(args[operands[0]]):
            raise _refuse("seff takes exactly one job id, e.g. 'seff 12345'")
    elif operands:
        word = args[operands[0]]
        raise _refuse(f"{program} takes no plain arguments ({word!r}); use its options, e.g. '{program} --user NAME'")


def _check_scontrol(args: list[str]) -> None:
    operands = [args[position] for position in _read_arguments("scontrol", args, SCONTROL_OPTIONS)]
    shown = "|".join(SCONTROL_OBJECTS)
    if not operands:
        raise _refuse(f"scontrol needs a subcommand; only 'scontrol show {shown}' is allowed")
    verb = operands[0]
    if verb != "show":
        change = "changes the cluster" if verb.lower() in _SCONTROL_CHANGES else "is not on the read-only allowlist"
        raise _refuse(f"'{shlex.join(['scontrol', verb])}' {change}; only 'scontrol show {shown}' is allowed")
    if len(operands) < 2 or operands[1] not in SCONTROL_OBJECTS:
        what = operands[1] if len(operands) > 1 else "nothing"
        raise _refuse(f"'scontrol show' of {what!r} is not allowed; show one of {shown}")
    if len(operands) > 3:
        raise _refuse(f"'scontrol show {operands[1]}' takes at most one name; drop {operands[3]!r}")
    if len(operands) == 3:
        _check_scontrol_name(operands[1], operands[2])


def _check_scontrol_name(kind: str, name: str) -> None:
    if kind == "config":
        raise _refuse(f"'scontrol show config' takes no name; drop {name!r}")
    if kind == "job" and not _JOB_ID.match(name):
        raise _refuse(f"{name!r} is not a job id; write digits such as 12345 or 12345_7")
    if not _SLURM_NAME.match(name):
        raise _refuse(f"{name!r} is not a Slurm name; use letters, digits and . _ , [ ] -")


def _check_sacctmgr(args: list[str]) -> None:
    operands = [args[position] for position in _read_arguments("sacctmgr", args, SACCTMGR_OPTIONS)]
    if not operands:
        raise _refuse("sacctmgr needs a subcommand; only 'sacctmgr show|list ENTITY' is allowed")
    verb = operands[0].lower()
    if verb not in ("show", "list"):
        change = "changes the accounting database" if verb in _SACCTMGR_CHANGES else "is not on the read-only allowlist"
        given = shlex.join(["sacctmgr", operands[0]])
        raise _refuse(f"'{given}' {change}; only 'sacctmgr show|list ENTITY' is allowed")
    if len(operands) < 2 or operands[1].lower() not in SACCTMGR_ENTITIES:
        what = operands[1] if len(operands) > 1 else "nothing"
        raise _refuse(f"'sacctmgr {verb}' of {what!r} is not allowed; show one of {', '.join(sorted(SACCTMGR_ENTITIES))}")
    for word in operands[2:]:
        if word.split("=")[0].lower() in _SACCTMGR_CHANGES:
            raise _refuse(f"{word!r} asks sacctmgr to change something; only filters and format= may follow {verb!r}")
