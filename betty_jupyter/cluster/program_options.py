"""How each allowlisted program reads its own arguments: getopt_long's grammar, modelled exactly.

A command is only as safe as Betty's reading of it matches the program's. The tables here list
*every* option each program knows, allowed or not: the union of Slurm 22.05 to 24.11 and GNU
coreutils 8.32 to 9.7, read from their sources (``long_options[]`` and the ``getopt_long``
option string). With the whole table, Betty reads argv the way glibc's ``getopt_long`` will:

* an abbreviation resolves to the option the program will use (``--iter`` is ``--iterate``);
  one that several options share is refused, as getopt refuses it (``--no`` in squeue);
* an option with an *optional* value takes it only when attached (``--jobs=1``, ``-j1``): it
  never swallows the next word, so ``squeue --jobs --iterate=2`` is ``--jobs`` then ``--iterate``;
* a required value is the rest of a short cluster or the next word, whatever it looks like
  (``-ji2`` is ``-j`` with ``i2``; ``-u -i`` is ``-u`` with ``-i``).

Across those versions no prefix resolves to two different options (checked when the tables were
built), so one table per program serves every version. Options must come before operands; the
policy refuses the rest, so getopt's permutation never matters.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..errors import PolicyError


class Arg(enum.Enum):
    """Whether an option takes a value (getopt's ``has_arg``)."""

    NONE = ""
    REQUIRED = ":"
    OPTIONAL = "?"


@dataclass(frozen=True)
class Option:
    """One option as the program understands it: ``key`` names it whichever way it was written."""

    key: str  # "-j" when a short letter means the same, else the long name: "--me"
    arg: Arg


@dataclass(frozen=True)
class Given:
    """An option found in argv: its key, how it was written, its full name, its value (None: none)."""

    key: str
    written: str
    value: str | None = None
    full: str = ""  # the long name an abbreviation stands for ("--iterate" for "--iter")

    @property
    def shown(self) -> str:
        """How it was written, with the full name when it was abbreviated: ``--iter (--iterate)``."""
        return self.written if self.full in ("", self.written) else f"{self.written} ({self.full})"


class UnknownOption(PolicyError):
    """The program does not know this option (``written`` as typed)."""

    def __init__(self, written: str) -> None:
        self.written = written
        super().__init__(f"refused: {written!r} is not an option of this program")


@dataclass(frozen=True)
class Grammar:
    """Every option one program knows: short letters and long names, each with its kind of value."""

    short: Mapping[str, Arg]
    long: Mapping[str, Option]

    @classmethod
    def of(cls, optstring: str, longs: str) -> "Grammar":
        """Build from getopt's option string and words ``NAME[:|?][=KEY]``.

        ``:`` marks a required value and ``?`` an optional one; ``=j`` says the long name means
        the short ``-j``, ``=other`` that it means the long ``--other`` (``sib=sibling``).
        """
        short = dict(_short_letters(optstring))
        table: dict[str, Option] = {}
        for word in longs.split():
            written, _, key = word.partition("=")
            arg = Arg(written[-1]) if written[-1] in ":?" else Arg.NONE
            name = written.rstrip(":?")
            table[name] = Option(f"-{key}" if len(key) == 1 else f"--{key or name}", arg)
        return cls(short, table)

    def aliases(self, key: str) -> list[str]:
        """Every way of writing ``key``: the short letter first, then the long names."""
        found = [key] if len(key) == 2 and key[1:] in self.short else []
        return found + [f"--{name}" for name, option in self.long.items() if option.key == key]

    def arg_of(self, key: str) -> Arg:
        """The kind of value ``key`` takes when written short (or, for a long-only key, long)."""
        if len(key) == 2:
            return self.short[key[1:]]
        return next(option.arg for name, option in self.long.items() if option.key == key)

    def long_option(self, name: str) -> tuple[str, Option]:
        """The option ``--name`` means and its full name: an exact name, else what every prefix match shares.

        glibc treats matches as one option when they agree on value kind and meaning
        (``--nodel`` in squeue, whose ``--node``/``--nodes``/``--nodelist`` all mean ``-w``).
        """
        if name in self.long:
            return name, self.long[name]
        candidates = [candidate for candidate in self.long if candidate.startswith(name)]
        if name and len({self.long[candidate] for candidate in candidates}) == 1:
            return candidates[0], self.long[candidates[0]]
        if not candidates or not name:
            raise UnknownOption(f"--{name}")
        names = ", ".join(f"--{candidate}" for candidate in sorted(candidates))
        raise PolicyError(f"refused: '--{name}' is ambiguous (it could be {names}); write the option in full")


def _short_letters(optstring: str) -> Iterator[tuple[str, Arg]]:
    position = 0
    while position < len(optstring):
        letter = optstring[position]
        colons = len(optstring[position + 1:]) - len(optstring[position + 1:].lstrip(":"))
        yield letter, (Arg.NONE, Arg.REQUIRED, Arg.OPTIONAL)[min(colons, 2)]
        position += 1 + colons


def read_argv(grammar: Grammar, args: Sequence[str], count_shorthand: bool = False) -> tuple[list[Given], list[int]]:
    """Read ``args`` as getopt_long would: the options given, and the positions of the operands.

    ``count_shorthand`` accepts head's and tail's ``-20``. Raises :class:`PolicyError` for what
    the program itself would reject (unknown, ambiguous, a missing or unwanted value) and for an
    option after an operand (getopt would permute it; Betty asks for a plain order).
    """
    given: list[Given] = []
    operands: list[int] = []
    position = 0
    while position < len(args):
        arg = args[position]
        if arg == "--":
            operands.extend(range(position + 1, len(args)))
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(position)
        elif operands:
            raise PolicyError(f"refused: {arg!r} comes after {args[operands[0]]!r}; put options before names and paths")
        elif count_shorthand and arg[1:].isdigit():
            given.append(Given("-n", arg, arg[1:]))
        elif arg.startswith("--"):
            position = _read_long(grammar, args, position, given)
        else:
            position = _read_short(grammar, args, position, given)
        position += 1
    return given, operands


def _read_long(grammar: Grammar, args: Sequence[str], position: int, given: list[Given]) -> int:
    written, equals, value = args[position][2:].partition("=")
    name, option = grammar.long_option(written)
    shown, full = f"--{written}", f"--{name}"
    if option.arg is Arg.NONE:
        if equals:
            raise PolicyError(f"refused: '{shown}' takes no value; write it without '='")
        given.append(Given(option.key, shown, None, full))
    elif equals or option.arg is Arg.OPTIONAL:
        given.append(Given(option.key, shown, value if equals else None, full))
    else:
        given.append(Given(option.key, shown, _next_value(args, position, shown), full))
        return position + 1
    return position


def _read_short(grammar: Grammar, args: Sequence[str], position: int, given: list[Given]) -> int:
    cluster = args[position]
    for index, letter in enumerate(cluster[1:], start=2):
        arg = grammar.short.get(letter) if letter != ":" else None
        if arg is None:
            raise UnknownOption(f"-{letter}")
        rest = cluster[index:]
        if arg is Arg.NONE:
            given.append(Given(f"-{letter}", f"-{letter}"))
            continue
        if rest or arg is Arg.OPTIONAL:
            given.append(Given(f"-{letter}", f"-{letter}", rest or None))
            return position
        given.append(Given(f"-{letter}", f"-{letter}", _next_value(args, position, f"-{letter}")))
        return position + 1
    return position


def _next_value(args: Sequence[str], position: int, shown: str) -> str:
    if position + 1 >= len(args):
        raise PolicyError(f"refused: '{shown}' needs a value; write e.g. '{shown} VALUE'")
    return args[position + 1]


# Every option of every allowlisted program (see the module docstring for where they come from).
GRAMMARS: dict[str, Grammar] = {
    "squeue": Grammar.of(
        "A:ahi:j::lL:n:M:O:o:p:Pq:R:rs::S:t:u:U:vVw:",
        "accounts:=A all=a array=r array-unique Format:=O format:=o federation help hide iterate:=i jobs?=j local "
        "long=l licenses:=L cluster:=M clusters:=M me name:=n noconvert node:=w nodes:=w nodelist:=w noheader=h "
        "partitions:=p priority=P qos:=q reservation:=R sib=sibling sibling sort:=S start steps?=s states:=t usage "
        "user:=u users:=u verbose=v version=V json? yaml? autocomplete: only-job-state expand-patterns helpstate "
        "helpformat helpFormat notme",
    ),
    "sinfo": Grammar.of(
        "adehi:lM:n:No:O:p:rRsS:t:TvVF",
        "all=a dead=d exact=e federation help hide iterate:=i local long=l cluster:=M clusters:=M nodes:=n noconvert "
        "noheader=h Node=N format:=o Format:=O partition:=p responding=r list-reasons=R summarize=s sort:=S "
        "states:=t reservation=T usage verbose=v version=V json? yaml? autocomplete: future=F helpformat helpFormat "
        "helpstate",
    ),
    "sacct": Grammar.of(
        "aA:bBcC:DeE:f:F:g:hi:I:j:k:K:lLM:nN:o:pPq:r:s:S:Ttu:UvVW:x:X",
        "allusers=a accounts:=A allocations=X brief=b batch-script=B completion=c constraints:=C delimiter: "
        "duplicates=D federation helpformat=e help-fields=e endtime:=E env-vars file:=f flags:=F gid:=g group:=g "
        "help=h local name: nnodes:=i ncpus:=I jobs:=j timelimit-min:=k timelimit-max:=K long=l allclusters=L "
        "cluster:=M clusters:=M nodelist:=N noconvert units: noheader=n fields:=o format:=o parsable=p parsable2=P "
        "qos:=q partition:=r reason: state:=s starttime:=S truncate=T uid:=u use-local-uid usage=U user:=u "
        "verbose=v version=V wckeys:=W whole-hetjob? associations:=x json? yaml? autocomplete: array helpreason "
        "helpstate expand-patterns",
    ),
    "sprio": Grammar.of(
        "hj::lM:no:S:p:u:vVw",
        "noheader=h jobs?=j long=l cluster:=M clusters:=M norm=n format:=o sort:=S partition:=p user:=u users:=u "
        "verbose=v version=V weights=w federation help local sib=sibling sibling usage autocomplete: helpformat",
    ),
    "sshare": Grammar.of(
        "aA:ehlM:no:pPqUu:t:vVm",
        "accounts:=A all=a helpformat=e long=l partition=m cluster:=M clusters:=M noheader=n format:=o parsable=p "
        "parsable2=P users:=u Users=U verbose=v version=V help usage autocomplete: json? yaml?",
    ),
    "scontrol": Grammar.of(
        "adhM:FoQu:vV",
        "all=a cluster:=M clusters:=M details=d federation future=F help=h hide local oneliner=o quiet=Q sibling "
        "uid:=u usage=h verbose=v version=V autocomplete: json? yaml?",
    ),
    "sacctmgr": Grammar.of(
        "hionpPQrsvV",
        "help=h usage=h immediate=i noheader=n oneliner=o parsable=p parsable2=P quiet=Q readonly=r associations=s "
        "verbose=v version=V autocomplete: json? yaml?",
    ),
    "seff": Grammar.of("hvdf:", ""),  # a Perl script: Getopt::Std, short options only
    "cat": Grammar.of(
        "benstuvAET",
        "number-nonblank=b number=n squeeze-blank=s show-nonprinting=v show-ends=E show-tabs=T show-all=A help "
        "version",
    ),
    "head": Grammar.of(
        "c:n:qvz0123456789",
        "bytes:=c lines:=n quiet=q silent=q verbose=v zero-terminated=z help version",
    ),
    "tail": Grammar.of(
        "c:n:fFqs:vz0123456789",
        "bytes:=c follow? lines:=n max-unchanged-stats: pid: quiet=q retry silent=q sleep-interval:=s verbose=v "
        "zero-terminated=z help version",
    ),
    "ls": Grammar.of(
        "abcdfghiklmnopqrstuvw:xABCDFGHI:LNQRST:UXZ1",
        "all=a escape=b directory=d dired=D full-time group-directories-first human-readable=h inode=i kibibytes=k "
        "numeric-uid-gid=n no-group=G hide-control-chars=q reverse=r size=s width:=w almost-all=A "
        "ignore-backups=B classify?=F file-type si dereference-command-line=H "
        "dereference-command-line-symlink-to-dir hide: ignore:=I indicator-style: dereference=L literal=N "
        "quote-name=Q quoting-style: recursive=R format: show-control-chars sort: tabsize:=T time: time-style: "
        "color? hyperlink? block-size: context=Z author help version zero",
    ),
    "wc": Grammar.of(
        "clLmw",
        "bytes=c chars=m lines=l words=w files0-from: max-line-length=L help version debug total:",
    ),
    "du": Grammar.of(
        "0abd:chHklmst:xB:DLPSX:",
        "all=a apparent-size block-size:=B bytes=b count-links=l dereference=L dereference-args=D exclude: "
        "exclude-from:=X files0-from: human-readable=h inodes si max-depth:=d null=0 no-dereference=P "
        "one-file-system=x separate-dirs=S summarize=s total=c threshold:=t time? time-style: help version",
    ),
    "df": Grammar.of(
        "aB:iF:hHklmPTt:vx:",
        "all=a block-size:=B inodes=i human-readable=h si=H local=l output? portability=P print-type=T sync "
        "no-sync total type:=t exclude-type:=x help version",
    ),
}
"""Each allowlisted program's whole option table, keyed by program name."""
