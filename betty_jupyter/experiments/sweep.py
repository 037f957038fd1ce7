"""A sweep: one batch script run at every point of a grid of parameters, as one Slurm job array.

``--grid lr=1e-4,3e-4,1e-3 seed=0,1,2`` is nine points (the first parameter changes slowest).
:func:`sweep_script` makes the one script that runs them: the person's script with
``#SBATCH --array=0-8`` (``%N`` when at most N may run at once) among its directives, and
before its first command a ``case`` on ``$SLURM_ARRAY_TASK_ID`` that sets and exports each
parameter as a shell variable (``$lr``, ``$seed``), every value single-quoted, so task 4 runs
with ``lr=3e-4 seed=1``. One approval covers the whole array; it is recorded as one
experiment whose page lists every task's point (:func:`grid_table`).
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import UsageError
from ..safe_text import table_cell

if TYPE_CHECKING:
    from ..cluster.sbatch import SbatchScript

MAX_TASKS = 1000
"""The most points one sweep may have (Slurm's default ``MaxArraySize`` is 1001: task ids 0–1000)."""
MAX_VALUE_CHARS = 200

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_RESERVED = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "IFS", "PS4", "ENV", "BASH_ENV", "CDPATH", "TMPDIR",
             "PWD", "OLDPWD", "HOSTNAME", "LANG", "TERM", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"}
_RESERVED_PREFIXES = ("SLURM_", "SBATCH_", "BETTY_", "LD_", "BASH_", "LC_")
_BLOCK_START = "# Betty's sweep: task N runs with the Nth point of the grid"
_BLOCK_END = 'echo "betty sweep: task $SLURM_ARRAY_TASK_ID: '
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Grid:
    """The parameters of a sweep and the values each takes, in the order given."""

    parameters: tuple[tuple[str, tuple[str, ...]], ...]

    rows: tuple[tuple[str, ...], ...] | None = None
    """The points listed one by one (a search's trials, task N the Nth), instead of every combination."""

    @classmethod
    def parse(cls, words: Sequence[str]) -> "Grid":
        """``["lr=1e-4,3e-4", "seed=0,1"]`` → a grid; a one-line UsageError for anything it cannot run.

        A whole-number range (``layers=2..8``) is every number in it; a float range is for a search only."""
        return Space.parse(words).grid()

    @classmethod
    def listed(cls, names: Sequence[str], points: Sequence[dict[str, str]]) -> "Grid":
        """The points of a search, task N the Nth: each parameter's values are those its points took."""
        parameters = tuple((name, tuple(dict.fromkeys(point[name] for point in points))) for name in names)
        return cls(parameters, tuple(tuple(point[name] for name in names) for point in points))

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters' names, in order."""
        return tuple(name for name, _ in self.parameters)

    def points(self) -> list[dict[str, str]]:
        """Every point, task 0 first; the first parameter changes slowest."""
        if self.rows is not None:
            return [dict(zip(self.names, row)) for row in self.rows]
        return [dict(zip(self.names, values)) for values in itertools.product(*(vs for _, vs in self.parameters))]

    def words(self) -> list[str]:
        """The grid as ``--grid`` takes it: ``["lr=1e-4,3e-4", "seed=0,1"]``."""
        return [f"{name}={','.join(values)}" for name, values in self.parameters]

    def __len__(self) -> int:
        if self.rows is not None:
            return len(self.rows)
        size = 1
        for _, values in self.parameters:
            size *= len(values)
        return size


_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_RANGE = re.compile(rf"({_NUMBER})\.\.({_NUMBER})(?::(log))?")
_WHOLE = re.compile(r"[-+]?[0-9]+")


@dataclass(frozen=True)
class Parameter:
    """One parameter of a sweep: listed values (``opt=adam,sgd``), or a range a search draws from
    (``lr=1e-5..1e-2:log``: floats, evenly on a log scale; ``layers=2..8``: whole numbers, both ends in)."""

    name: str
    values: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 0.0
    whole: bool = False
    log: bool = False

    @property
    def is_range(self) -> bool:
        """Whether a search draws this parameter from a range rather than its listed values."""
        return not self.values

    def word(self) -> str:
        """The parameter as it is written: ``opt=adam,sgd``, ``lr=1e-05..0.01:log``, ``layers=2..8``."""
        if self.values:
            return f"{self.name}={','.join(self.values)}"
        low, high = (f"{int(self.low)}", f"{int(self.high)}") if self.whole else (f"{self.low:g}", f"{self.high:g}")
        return f"{self.name}={low}..{high}" + (":log" if self.log else "")


@dataclass(frozen=True)
class Space:
    """Every parameter of a sweep, in the order given: the one parser of ``--grid`` words, for a grid and a search."""

    parameters: tuple[Parameter, ...]

    @classmethod
    def parse(cls, words: Sequence[str]) -> "Space":
        """``["lr=1e-5..1e-2:log", "layers=2..8", "opt=adam,sgd"]`` → a space; a one-line UsageError otherwise."""
        if not words:
            raise UsageError("a sweep needs a grid: --grid NAME=V1,V2 … (e.g. --grid lr=1e-4,3e-4 seed=0,1)")
        parameters: dict[str, Parameter] = {}
        for word in words:
            name, equals, values = word.partition("=")
            name = name.strip()
            if not equals or not _NAME.fullmatch(name):
                raise UsageError(f"grid: {word[:60]!r} is not NAME=V1,V2,… or NAME=LOW..HIGH; a name is letters, "
                                 "digits and _, not starting with a digit")
            if name in _RESERVED or name.upper().startswith(_RESERVED_PREFIXES):
                raise UsageError(f"grid: {name} is a variable the shell or Slurm sets; call the parameter "
                                 "something else")
            if name in parameters:
                raise UsageError(f"grid: {name} is given twice; list all its values once: {name}=V1,V2")
            parameters[name] = _parameter(name, values.strip())
        return cls(tuple(parameters.values()))

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters' names, in order."""
        return tuple(parameter.name for parameter in self.parameters)

    def words(self) -> list[str]:
        """The space as ``--grid`` takes it."""
        return [parameter.word() for parameter in self.parameters]

    def grid(self) -> Grid:
        """Every combination of the listed values (a whole-number range lists each number); a float range refused."""
        listed = []
        for parameter in self.parameters:
            if parameter.is_range and not parameter.whole:
                raise UsageError(f"grid: {parameter.name} is a range of decimals; a grid lists its values "
                                 f"({parameter.name}=V1,V2), a search (--search bayes|random) draws from a range")
            if parameter.is_range and parameter.high - parameter.low >= MAX_TASKS:
                raise UsageError(f"grid: {parameter.name} spans more than {MAX_TASKS} numbers; list the values")
            values = parameter.values or tuple(str(n) for n in range(int(parameter.low), int(parameter.high) + 1))
            listed.append((parameter.name, values))
        grid = Grid(tuple(listed))
        if len(grid) > MAX_TASKS:
            raise UsageError(f"grid: {len(grid)} points is more than one sweep runs ({MAX_TASKS}); split it")
        return grid


def _parameter(name: str, text: str) -> Parameter:
    """One parameter from what follows its ``=``: a range, or listed values."""
    found = _RANGE.fullmatch(text)
    if found is None:
        values = tuple(_value(name, value) for value in text.split(","))
        if len(set(values)) != len(values):
            raise UsageError(f"grid: {name} lists a value twice")
        return Parameter(name, values)
    low_text, high_text, log = found.groups()
    low, high = float(low_text), float(high_text)
    whole = bool(_WHOLE.fullmatch(low_text) and _WHOLE.fullmatch(high_text))
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise UsageError(f"grid: {name}={text[:60]} is not a range LOW..HIGH with LOW below HIGH")
    if log and low <= 0:
        raise UsageError(f"grid: {name}={text[:60]}: a log range needs a LOW above 0")
    return Parameter(name, low=low, high=high, whole=whole, log=bool(log))


def _value(name: str, value: str) -> str:
    text = value.strip()
    if not text:
        raise UsageError(f"grid: {name} has an empty value (two commas, or one at the end)")
    if len(text) > MAX_VALUE_CHARS or _CONTROL.search(text):
        raise UsageError(f"grid: a value of {name} is longer than {MAX_VALUE_CHARS} characters or holds a control "
                         "character")
    return text


def sweep_script(script: "str | SbatchScript", grid: Grid, at_once: int | None = None, first: int = 0) -> str:
    """The job array that runs ``script`` at every point of ``grid`` (at most ``at_once`` tasks at a time).

    Refused (one line) when the script has an ``--array`` of its own, runs no command, or writes every task's
    output to one file (an ``--output``/``--error`` without ``%a``). A script already read is not read again.
    A search's later round numbers its tasks on from ``first``.
    """
    # lazy: the batch-script parser; the server's start loads the experiments package without it
    from ..cluster.sbatch import SbatchScript

    parsed = script if isinstance(script, SbatchScript) else SbatchScript.parse(script)
    if parsed.get("array") is not None:
        raise UsageError("the script has an #SBATCH --array of its own; a sweep makes the array from its grid: "
                         "remove that line")
    for option in ("output", "error"):
        path = parsed.get(option)
        if path is not None and "%a" not in path:
            raise UsageError(f"#SBATCH --{option}={path} would have every task write the same file: put %A_%a "
                             "in it (the array's id and the task's index)")
    if not parsed.body.strip():
        raise UsageError("the script runs no command; a sweep runs its commands once for every point of the grid")
    if at_once is not None and not 1 <= at_once <= MAX_TASKS:
        raise UsageError(f"at most {at_once} at once: give a number from 1 to {MAX_TASKS}")
    last = first + len(grid) - 1
    arrayed = parsed.with_options(array=f"{first}-{last}" + (f"%{at_once}" if at_once else ""))
    header = arrayed.text[:len(arrayed.text) - len(arrayed.body)]
    return header + parameter_block(grid, first) + arrayed.body


def parameter_block(grid: Grid, first: int = 0) -> str:
    """The lines that give task ``first`` + N the Nth point of ``grid`` as exported shell variables."""
    names = " ".join(grid.names)
    lines = [_BLOCK_START, 'case "$SLURM_ARRAY_TASK_ID" in']
    for index, point in enumerate(grid.points(), start=first):
        settings = " ".join(f"{name}={shlex.quote(value)}" for name, value in point.items())
        lines.append(f"  {index}) {settings} ;;")
    lines += ['  *) echo "betty sweep: task $SLURM_ARRAY_TASK_ID has no point in the grid" >&2; exit 2 ;;', "esac",
              f"export {names}",
              _BLOCK_END + " ".join(f"{n}=${{{n}}}" for n in grid.names) + '"',
              ""]
    return "\n".join(lines) + "\n"


def own_script(text: str) -> "SbatchScript":
    """A sweep's script as the person wrote it: its ``--array`` and the block that sets each task's point taken out
    (a search's later round puts its own in)."""
    # lazy: the batch-script parser
    from ..cluster.sbatch import SbatchScript

    start, end = text.find(_BLOCK_START), text.find(_BLOCK_END)
    if start >= 0 and end > start and text.find("\n", end) >= 0:
        text = text[:start] + text[text.index("\n", end) + 2:]
    return SbatchScript.parse(text).with_options(array=None)


def grid_table(grid: Grid) -> str:
    """The page's table of every task and its point (values escaped as any other text on a page)."""
    head = "| task | " + " | ".join(table_cell(name) for name in grid.names) + " |"
    rule = "|---|" + "---|" * len(grid.names)
    rows = [f"| {index} | " + " | ".join(table_cell(value) for value in point.values()) + " |"
            for index, point in enumerate(grid.points())]
    return "\n".join([head, rule, *rows])


def size_line(grid: Grid, at_once: int | None, gpus_per_task: int, minutes_per_task: int | None) -> str:
    """``9 tasks, at most 3 at once; each 1 GPU(s) for up to 02:00:00: at most 18 GPU-hours``."""
    line = f"{len(grid)} tasks" + (f", at most {at_once} at once" if at_once else ", all at once if the queue allows")
    if minutes_per_task is None:
        return line + "; each for up to the partition's time limit"
    # lazy: the batch-script helpers; the server's start loads the experiments package without them
    from ..cluster.sbatch import format_minutes

    if not gpus_per_task:
        return line + f"; each for up to {format_minutes(minutes_per_task)}"
    total = len(grid) * gpus_per_task * minutes_per_task / 60
    return line + (f"; each {gpus_per_task} GPU(s) for up to {format_minutes(minutes_per_task)}: at most "
                   f"{total:.4g} GPU-hours")


def recorded_grid(sweep: "Mapping[str, Any] | None") -> Grid:
    """A recorded sweep's points, task N the Nth: a search's trials as submitted, else its grid's combinations."""
    record = sweep or {}
    trials = [trial for trial in record.get("trials") or [] if isinstance(trial, dict)]
    if not trials and record.get("search"):
        return Grid((), ())
    if trials:
        names = Space.parse(record.get("grid") or []).names
        return Grid.listed(names, [{name: str((trial.get("point") or {}).get(name, "")) for name in names}
                                   for trial in trials])
    return Grid.parse(record.get("grid") or [])
