"""The read-only allowlist: the cluster commands a person or the agent may run without approval.

The policy works on argv, never on a shell string. A string is split with :func:`shlex.split`
only after every shell metacharacter, control character and non-ASCII character has been
refused, so what is checked is exactly what runs: ``shlex.join(argv)``.

Options are read with each program's real grammar (``options.py``: optional values,
abbreviations, short clusters), and each option is then allowed or refused by what it *is*,
however it was written: ``--iter``, ``--iterate=2`` and ``-ji2`` all reach squeue's ``-i``.

Three kinds of program are allowed:

* Slurm's read commands (``squeue``, ``sinfo``, ``sacct``, ``sprio``, ``sshare``, ``seff``,
  ``scontrol show …``, ``sacctmgr show|list …``), each with an explicit list of options;
  an option that is not listed is refused rather than guessed at.
* File readers (``cat``, ``head``, ``tail``, ``ls``, ``wc``, ``du``, ``df``), whose path
  arguments must lie under the configured readable roots and outside :data:`SECRET_PATHS`.
  Paths are normalised (``..`` folded away, ``~`` and relative paths resolved against
  ``home``) and written back into argv in that absolute form. Where a path *leads* (symlinks)
  cannot be seen from here: ``reads.py`` opens it on the cluster and checks the opened file
  against the same roots and secrets before anything reads it.
* Start estimates: ``sbatch --test-only --OPTION=VALUE … --wrap=true``, which asks the scheduler
  when and where a job would start and submits nothing. ``--test-only`` must come first, every
  other word is one ``--NAME=VALUE`` of :data:`TEST_ONLY_OPTIONS` (the value attached, so no word
  can stand for another) and the last is ``--wrap=true``: a plain ``sbatch`` is never a read.
* Site extras from configuration: program name -> allowed first arguments.

Every accepted command also has one canonical spelling (:attr:`AllowedCommand.canonical`), the
form the person's rules, grants and denials compare: each option under its own key whatever
its spelling (``--lin=5``, ``-n5``, ``-5`` are ``-n 5``), options sorted by key and never
repeated, no ``--`` unless an operand needs it, paths absolute and normalised. Two spellings of
one command read alike there; what runs is still the argv the card shows.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from betty_jupyter.errors import ConfigError, PolicyError

from .program_options import GRAMMARS, Arg, Given, Grammar, UnknownOption, read_argv

SHELL_METACHARACTERS = frozenset(";&|`$<>(){}!\\*?#")
"""Characters that mean something to a shell; any of them refuses a command."""

SECRET_PATHS: tuple[str, ...] = (
    "*/.ssh", "*/.ssh/*", "*/.gnupg", "*/.gnupg/*", "*/.netrc", "*/.pgpass", "*/.git-credentials",
    "*/.aws", "*/.aws/*", "*/.azure", "*/.azure/*", "*/.kube", "*/.kube/*", "*/.docker/config.json",
    "*/.config/gcloud", "*/.config/gcloud/*", "*/.config/gh/hosts.yml", "*/.vault-token", "*/.s3cfg",
    "*/.pypirc", "*/.npmrc", "*/.Xauthority", "*/.*_history",
    "*/.cache/huggingface/token", "*/.huggingface/token",
    "*/jupyter/runtime", "*/jupyter/runtime/*", "*/jpserver-*.json", "*/nbserver-*.json", "*/kernel-*.json",
    "*/jupyterhub_cookie_secret", "*/betty_notify", "*/betty_notify/*", "*/.munge", "*/.munge/*", "*/munge.key",
    "*/id_rsa*", "*/id_dsa*", "*/id_ecdsa*", "*/id_ed25519*", "*.pem", "*.key", "*.p12", "*.pfx",
)
"""Paths that hold a person's secrets (keys, tokens, Jupyter runtime files), refused even under a root.

Globs in the one dialect both Python's :mod:`fnmatch` and a shell ``case`` read alike (``*``
matches ``/`` too), matched in any case, checked on the path asked for and again, on the
cluster, on the real path of the file opened (``reads.py`` renders this list into its script).
"""

_WILDCARDS = frozenset("*?")
_PROGRAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_JOB_ID = re.compile(r"^\d+(_\d+)?$")
_SLURM_NAME = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")
_NUMBER = re.compile(r"^[+-]?\d+[A-Za-z]{0,3}$")


def secret_pattern(path: str) -> str | None:
    """The :data:`SECRET_PATHS` pattern ``path`` matches in any case (``backup.PEM``, ``ID_RSA``), or None."""
    folded = path.lower()
    return next((pattern for pattern in SECRET_PATHS if fnmatch.fnmatchcase(folded, pattern.lower())), None)


@dataclass(frozen=True)
class AllowedCommand:
    """A command the policy accepted: the argv that will run, its paths, and where in argv they stand."""

    argv: tuple[str, ...]
    paths: tuple[str, ...] = ()
    operands: tuple[int, ...] = ()  # positions in argv of the path operands
    spelling: tuple[str, ...] = ()  # the canonical argv, when it differs from argv

    @property
    def command_line(self) -> str:
        """The exact text that will run on the cluster: ``shlex.join(argv)``."""
        return shlex.join(self.argv)

    @property
    def canonical(self) -> str:
        """The one spelling of this command that rules, grants and denials compare (``cat -- x`` is ``cat x``)."""
        return shlex.join(self.spelling or self.argv)


@dataclass(frozen=True)
class _Rules:
    """What Betty allows of one program: option keys as its grammar names them, which take numbers."""

    program: str
    allowed: frozenset[str]
    numeric: frozenset[str] = frozenset()
    count_shorthand: bool = False  # head -20, tail -100

    @property
    def grammar(self) -> Grammar:
        """The program's whole option table."""
        return GRAMMARS[self.program]

    def describe(self) -> str:
        """The allowed options as one line of text, for the agent's system prompt."""
        groups: dict[Arg, list[str]] = {Arg.NONE: [], Arg.REQUIRED: [], Arg.OPTIONAL: []}
        for key in sorted(self.allowed, key=_option_order):
            groups[self.grammar.arg_of(key)].append("/".join(self.grammar.aliases(key)))
        words = {Arg.NONE: "flags", Arg.REQUIRED: "with a value", Arg.OPTIONAL: "with an optional =value"}
        parts = [f"{words[arg]} {' '.join(names)}" for arg, names in groups.items() if names]
        return "; ".join(parts) if parts else "no options"


def _option_order(option: str) -> tuple[int, str, str]:
    """Short options first, then long; case-insensitively, ``-o`` before ``-O`` (one order in every process)."""
    return (option.startswith("--"), option.lower(), option.swapcase())


def _rules(program: str, allowed: str, numeric: str = "", count_shorthand: bool = False) -> _Rules:
    return _Rules(program, frozenset(allowed.split()), frozenset(numeric.split()), count_shorthand)


# Options that would write, loop forever or read arbitrary files are simply absent:
# squeue/sinfo -i (iterate), sacct -f (reads an accounting file), tail -f/-F, du/ls -L, sacctmgr -i.
SLURM_LISTINGS: dict[str, _Rules] = {
    "squeue": _rules(
        "squeue",
        "-h -l --me -r --start -a -v --json --yaml -P --noconvert -u -p -t -j -o -O -A -n -w -S -q -M -L -R -s",
    ),
    "sinfo": _rules("sinfo", "-N -h -l -s -R -e -a -r -d -v --json --yaml --noconvert -p -o -O -t -n -S -M"),
    "sacct": _rules(
        "sacct",
        "-X -P -p -n -b -l -a -D -L -T -e -v --json --yaml --noconvert -j -u -S -E -s -o --delimiter -A -r -M -N "
        "--name -q --units -g",
    ),
    "sprio": _rules("sprio", "-h -l -n -w -v -j -u -p -o -M -S"),
    "sshare": _rules("sshare", "-a -h -n -l -p -P -U -v -A -u -o -M"),
    "seff": _rules("seff", "-d"),
}
"""Slurm's read commands and the options each may carry."""

SLURM_PROGRAMS: frozenset[str] = frozenset({*SLURM_LISTINGS, "scontrol", "sacctmgr", "sbatch", "scancel"})
"""Slurm's own programs Betty runs: the read commands of this allowlist, and the submit and cancel of its client."""

TEST_ONLY_OPTIONS = frozenset(
    "partition nodes ntasks ntasks-per-node cpus-per-task cpus-per-gpu mem mem-per-cpu mem-per-gpu time time-min "
    "gres gpus gpus-per-node gpus-per-task constraint qos account reservation nodelist exclude begin".split()
)
"""What a job asks of the scheduler: the options ``sbatch --test-only`` may carry, each as ``--NAME=VALUE``."""
TEST_ONLY_FLAGS = frozenset({"--exclusive"})
"""The bare flags ``sbatch --test-only`` may carry."""
TEST_ONLY_SCRIPT = "--wrap=true"
"""The script a start estimate names: ``--test-only`` runs nothing, so it is the same word every time."""

_JOB_LIST_OPTIONS = {"squeue": ("-j", "-s"), "sprio": ("-j",)}  # their optional value may come as one operand

SCONTROL_OPTIONS = _rules("scontrol", "-d -o -a --json --yaml -M")
SCONTROL_OBJECTS = ("job", "node", "partition", "reservation", "config", "hostnames")
_SCONTROL_CHANGES = frozenset(
    "update delete create requeue requeuehold hold uhold release reconfigure shutdown suspend resume "
    "takeover notify reboot cancel_reboot power top setdebug setdebugflags schedloglevel write token abort".split()
)

SACCTMGR_OPTIONS = _rules("sacctmgr", "-n -p -P -s -r -Q --json --yaml")
SACCTMGR_ENTITIES = frozenset(
    "account accounts association associations assoc cluster clusters configuration config event events "
    "federation federations problem problems qos reservation reservations resource resources stats tres "
    "transaction transactions txn user users wckey wckeys".split()
)
_SACCTMGR_CHANGES = frozenset(
    "add create delete remove modify update set archive load dump clear reconfigure shutdown".split()
)

FILE_READERS: dict[str, _Rules] = {
    "cat": _rules("cat", "-n -b -s -A -E -T -v"),
    "head": _rules("head", "-q -v -c -n", numeric="-c -n", count_shorthand=True),
    "tail": _rules("tail", "-q -v -c -n", numeric="-c -n", count_shorthand=True),
    "ls": _rules("ls", "-l -a -A -h -t -r -1 -d -R -S -F -s -i -n -g -o -p -X -U -c -u --full-time --color"),
    "wc": _rules("wc", "-l -c -w -m -L"),
    "du": _rules("du", "-s -h -c -a -k -m -b -x --apparent-size --si -d", numeric="-d"),
    "df": _rules("df", "-h -H -T -i -P -k -l --total"),
}
"""File readers, the options each may carry; their path arguments must lie under the readable roots."""

_NEEDS_NO_PATH = frozenset({"df"})


def _reasons(programs: str, keys: str, reason: str) -> dict[tuple[str, str], str]:
    return {(program, key): reason for program in programs.split() for key in keys.split()}


_FOLLOWS_LINKS = "follows symlinks out of the readable roots"
_SPECIAL_REFUSALS: dict[tuple[str, str], str] = {
    **_reasons("tail", "-f -F --follow --retry --pid -s", "would follow the file forever; read its end once with 'tail -n 100 PATH'"),
    **_reasons("squeue sinfo", "-i", "would repeat forever; run it once"),
    **_reasons("sacctmgr", "-i", "commits changes without asking; only 'sacctmgr show|list' is allowed"),
    **_reasons("sacct", "-f", "reads an arbitrary accounting file; ask Slurm's database instead"),
    **_reasons("du", "-L -H -D", _FOLLOWS_LINKS),
    **_reasons("ls", "-L -H --dereference-command-line-symlink-to-dir", _FOLLOWS_LINKS),
    **_reasons("wc du", "--files0-from", "reads a list of names from a file; name the paths on the command line"),
    **_reasons("du", "-X --exclude", "reads patterns from a file or skips what you asked for; list the directory instead"),
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


def _read_arguments(rules: _Rules, args: Sequence[str]) -> tuple[list[Given], list[int]]:
    """Read ``args`` with the program's grammar, refuse what is not allowed; the options and operand positions."""
    try:
        given, operands = read_argv(rules.grammar, args, rules.count_shorthand)
    except UnknownOption as unknown:
        raise _not_allowed(rules, unknown.written) from None
    for option in given:
        if option.key not in rules.allowed:
            raise _not_allowed(rules, option.shown, option.key)
        if option.key in rules.numeric and option.value is not None and not _NUMBER.match(option.value):
            raise _refuse(f"'{rules.program} {option.shown}' takes a number, not {option.value!r}; "
                          f"write e.g. '{rules.program} {option.written} 20'")
    return given, operands


def _canonical_options(rules: _Rules, given: Sequence[Given]) -> list[str]:
    """The options as one spelling: by key (stable, so a repeated key keeps its order), each once.

    A required value follows its key as its own word (``-n 5``), an optional one is attached
    (``-j123``, ``--name=x``), as getopt reads an optional value only when attached.
    """
    words: list[str] = []
    seen: set[tuple[str, str | None]] = set()
    for option in sorted(given, key=lambda option: _option_order(option.key)):
        if (option.key, option.value) in seen:
            continue
        seen.add((option.key, option.value))
        if option.value is None:
            words.append(option.key)
        elif len(option.key) == 2 and rules.grammar.arg_of(option.key) is Arg.REQUIRED:
            words += [option.key, option.value]
        else:
            words.append(option.key + ("" if len(option.key) == 2 else "=") + option.value)
    return words


def _canonical(rules: _Rules, given: Sequence[Given], operands: Sequence[str]) -> list[str]:
    """Options in their one spelling, then the operands (after ``--`` when one looks like an option)."""
    dashes = ["--"] if any(word.startswith("-") for word in operands) else []
    return [*_canonical_options(rules, given), *dashes, *operands]


def _not_allowed(rules: _Rules, shown: str, key: str | None = None) -> PolicyError:
    reason = _SPECIAL_REFUSALS.get((rules.program, key or ""))
    if reason:
        return _refuse(f"'{rules.program} {shown}' {reason}")
    return _refuse(f"'{rules.program} {shown}' is not an allowed option; {rules.program} takes {rules.describe()}")


class CommandPolicy:
    """The read-only allowlist for one cluster.

    ``readable_roots`` are absolute directories the file readers may read under (they may be
    links: the cluster resolves them before it compares). Paths matching :data:`SECRET_PATHS`
    are refused even under a root. Relative
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
        return (*SLURM_LISTINGS, "scontrol", "sacctmgr", "sbatch", *FILE_READERS, *self.extra_commands)

    def check(self, command: str | Sequence[str]) -> AllowedCommand:
        """Accept ``command`` as an :class:`AllowedCommand`, or raise :class:`PolicyError` naming the rule."""
        argv = split_command(command)
        program, args = argv[0], argv[1:]
        self._check_program(program)
        if program in FILE_READERS:
            return self._check_file_reader(program, args)
        spelling: list[str] = []
        if program == "scontrol":
            spelling = _check_scontrol(args)
        elif program == "sacctmgr":
            spelling = _check_sacctmgr(args)
        elif program == "sbatch":
            spelling = _check_test_only(args)
        elif program in SLURM_LISTINGS:
            spelling = _check_listing(program, args)
        else:
            self._check_extra(program, args)
        return AllowedCommand(tuple(argv), spelling=tuple(spelling and [program, *spelling]))

    def describe(self) -> str:
        """The allowlist as short text for the agent's system prompt."""
        lines = [
            "One plain command, no shell, ASCII only, none of " + " ".join(sorted(SHELL_METACHARACTERS))
            + ", options before names and paths:",
        ]
        lines += [f"- {name}: {options.describe()}" for name, options in SLURM_LISTINGS.items()]
        lines.append(f"- scontrol show {'|'.join(SCONTROL_OBJECTS)} [name or job id]: {SCONTROL_OPTIONS.describe()}")
        entities = "|".join(sorted(SACCTMGR_ENTITIES))
        lines.append(f"- sacctmgr show|list {entities} [filters]: {SACCTMGR_OPTIONS.describe()}")
        options = " ".join(f"--{name}=VALUE" for name in sorted(TEST_ONLY_OPTIONS))
        lines.append(f"- sbatch --test-only [options] {TEST_ONLY_SCRIPT}: when and where a job would start (nothing is "
                     f"submitted); options, each with its value attached: {options} --exclusive")
        if self.readable_roots:
            lines += [f"- {name} {_path_usage(name)}: {options.describe()}" for name, options in FILE_READERS.items()]
        lines += [f"- {name} {self._describe_extra(name)}" for name in self.extra_commands]
        lines.append(self._describe_roots())
        return "\n".join(lines)

    def _describe_roots(self) -> str:
        if not self.readable_roots:
            return "File readers are off: no readable roots are configured."
        where = f"; relative paths and ~/ resolve against {self.home}" if self.home else "; give absolute paths"
        return (f"File readers may read only under the readable roots: {self._roots_text()}{where}; "
                "never files that may hold secrets (.ssh/, .netrc, private keys, Jupyter runtime files); "
                "long output is cut.")

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
        rules = FILE_READERS[program]
        given, operands = _read_arguments(rules, args)
        if not operands and program not in _NEEDS_NO_PATH:
            raise _refuse(f"{program} needs a path under the readable roots ({self._roots_text()})")
        argv = [program, *args]
        for position in operands:
            argv[position + 1] = self._readable_path(args[position])
        paths = tuple(dict.fromkeys(argv[position + 1] for position in operands))
        spelling = [program, *_canonical_options(rules, given), *(argv[position + 1] for position in operands)]
        return AllowedCommand(tuple(argv), paths, tuple(position + 1 for position in operands), tuple(spelling))

    def _readable_path(self, path: str) -> str:
        """The normalised absolute form of ``path``, refused unless under a readable root and not a secret."""
        absolute = _normalise(self._absolute(path))
        if not self._is_readable(absolute):
            raise _refuse(f"{absolute} is outside the readable roots ({self._roots_text()})")
        secret = secret_pattern(absolute)
        if secret:
            raise _refuse(f"{absolute} may hold secrets (it matches {secret}); Betty never reads such files")
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
        if name in SLURM_LISTINGS or name in FILE_READERS or name in ("scontrol", "sacctmgr", "sbatch"):
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


def _check_listing(program: str, args: list[str]) -> list[str]:
    """Refuse what the listing may not carry; its options and operands in their one spelling."""
    rules = SLURM_LISTINGS[program]
    given, operands = _read_arguments(rules, args)
    words = [args[position] for position in operands]
    if program == "seff":
        if len(operands) != 1 or not _JOB_ID.match(words[0]):
            raise _refuse("seff takes exactly one job id, e.g. 'seff 12345'")
    elif len(operands) == 1 and (bare := next((option for option in given if option.value is None
                                               and option.key in _JOB_LIST_OPTIONS.get(program, ())), None)):
        # 'squeue -j 123': the optional value of -j/--jobs (or -s/--steps) given as one word after it
        given = [Given(bare.key, bare.written, words[0]) if option is bare else option for option in given]
        return _canonical(rules, given, [])
    elif operands:
        raise _refuse(f"{program} takes no plain arguments ({words[0]!r}); use its options, e.g. '{program} --user NAME'")
    return _canonical(rules, given, words)


def _check_test_only(args: list[str]) -> list[str]:
    """``sbatch --test-only --NAME=VALUE … --wrap=true`` and nothing else: a start estimate, never a submission."""
    shape = f"only 'sbatch --test-only --OPTION=VALUE ... {TEST_ONLY_SCRIPT}' (a start estimate) is a read"
    if not args or args[0] != "--test-only":
        raise _refuse(f"'sbatch' without --test-only first submits a job; {shape}")
    if args[-1] != TEST_ONLY_SCRIPT or args.count(TEST_ONLY_SCRIPT) != 1:
        raise _refuse(f"a start estimate ends with {TEST_ONLY_SCRIPT} and names no script; {shape}")
    for word in args[1:-1]:
        name, equals, value = word.partition("=")
        if word in TEST_ONLY_FLAGS:
            continue
        if not (name.startswith("--") and equals and value):
            raise _refuse(f"'sbatch --test-only' takes each option as --NAME=VALUE, not {word!r}; {shape}")
        if name[2:] not in TEST_ONLY_OPTIONS:
            raise _refuse(f"'sbatch {name}' is not an option of a start estimate; it takes "
                          + " ".join(f"--{option}" for option in sorted(TEST_ONLY_OPTIONS)))
    return [args[0], *sorted(dict.fromkeys(args[1:-1])), args[-1]]


def _check_scontrol(args: list[str]) -> list[str]:
    given, positions = _read_arguments(SCONTROL_OPTIONS, args)
    operands = [args[position] for position in positions]
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
    return _canonical(SCONTROL_OPTIONS, given, operands)


def _check_scontrol_name(kind: str, name: str) -> None:
    if kind == "config":
        raise _refuse(f"'scontrol show config' takes no name; drop {name!r}")
    if kind == "job" and not _JOB_ID.match(name):
        raise _refuse(f"{name!r} is not a job id; write digits such as 12345 or 12345_7")
    if not _SLURM_NAME.match(name):
        raise _refuse(f"{name!r} is not a Slurm name; use letters, digits and . _ , [ ] -")


def _check_sacctmgr(args: list[str]) -> list[str]:
    given, positions = _read_arguments(SACCTMGR_OPTIONS, args)
    operands = [args[position] for position in positions]
    if not operands:
        raise _refuse("sacctmgr needs a subcommand; only 'sacctmgr show|list ENTITY' is allowed")
    verb = operands[0].lower()
    if verb not in ("show", "list"):
        change = "changes the accounting database" if verb in _SACCTMGR_CHANGES else "is not on the read-only allowlist"
        written = shlex.join(["sacctmgr", operands[0]])
        raise _refuse(f"'{written}' {change}; only 'sacctmgr show|list ENTITY' is allowed")
    if len(operands) < 2 or operands[1].lower() not in SACCTMGR_ENTITIES:
        what = operands[1] if len(operands) > 1 else "nothing"
        raise _refuse(f"'sacctmgr {verb}' of {what!r} is not allowed; show one of {', '.join(sorted(SACCTMGR_ENTITIES))}")
    for word in operands[2:]:
        if word.split("=")[0].lower() in _SACCTMGR_CHANGES:
            raise _refuse(f"{word!r} asks sacctmgr to change something; only filters and format= may follow {verb!r}")
    return _canonical(SACCTMGR_OPTIONS, given, [verb, operands[1].lower(), *operands[2:]])
