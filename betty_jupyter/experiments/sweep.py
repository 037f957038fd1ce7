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
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

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
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Grid:
    """The parameters of a sweep and the values each takes, in the order given."""

    parameters: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def parse(cls, words: Sequence[str]) -> "Grid":
        """``["lr=1e-4,3e-4", "seed=0,1"]`` → a grid; a one-line UsageError for anything it cannot run."""
        if not words:
            raise UsageError("a sweep needs a grid: --grid NAME=V1,V2 … (e.g. --grid lr=1e-4,3e-4 seed=0,1)")
        parameters: dict[str, tuple[str, ...]] = {}
        for word in words:
            name, equals, values = word.partition("=")
            name = name.strip()
            if not equals or not _NAME.fullmatch(name):
                raise UsageError(f"grid: {word[:60]!r} is not NAME=V1,V2,…; a name is letters, digits and _, "
                                 "not starting with a digit")
            if name in _RESERVED or name.upper().startswith(_RESERVED_PREFIXES):
                raise UsageError(f"grid: {name} is a variable the shell or Slurm sets; call the parameter "
                                 "something else")
            if name in parameters:
                raise UsageError(f"grid: {name} is given twice; list all its values once: {name}=V1,V2")
            parameters[name] = tuple(_value(name, value) for value in values.split(","))
            if len(set(parameters[name])) != len(parameters[name]):
                raise UsageError(f"grid: {name} lists a value twice")
        grid = cls(tuple(parameters.items()))
        if len(grid) > MAX_TASKS:
            raise UsageError(f"grid: {len(grid)} points is more than one sweep runs ({MAX_TASKS}); split it")
        return grid

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters' names, in order."""
        return tuple(name for name, _ in self.parameters)

    def points(self) -> list[dict[str, str]]:
        """Every point, task 0 first; the first parameter changes slowest."""
        return [dict(zip(self.names, values)) for values in itertools.product(*(vs for _, vs in self.parameters))]

    def words(self) -> list[str]:
        """The grid as ``--grid`` takes it: ``["lr=1e-4,3e-4", "seed=0,1"]``."""
        return [f"{name}={','.join(values)}" for name, values in self.parameters]

    def __len__(self) -> int:
        size = 1
        for _, values in self.parameters:
            size *= len(values)
        return size


def _value(name: str, value: str) -> str:
    text = value.strip()
    if not text:
        raise UsageError(f"grid: {name} has an empty value (two commas, or one at the end)")
    if len(text) > MAX_VALUE_CHARS or _CONTROL.search(text):
        raise UsageError(f"grid: a value of {name} is longer than {MAX_VALUE_CHARS} characters or holds a control "
                         "character")
    return text


def sweep_script(script: "str | SbatchScript", grid: Grid, at_once: int | None = None) -> str:
    """The job array that runs ``script`` at every point of ``grid`` (at most ``at_once`` tasks at a time).

    Refused (one line) when the script has an ``--array`` of its own, runs no command, or writes every task's
    output to one file (an ``--output``/``--error`` without ``%a``). A script already read is not read again.
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
    last = len(grid) - 1
    arrayed = parsed.with_options(array=f"0-{last}" + (f"%{at_once}" if at_once else ""))
    header = arrayed.text[:len(arrayed.text) - len(arrayed.body)]
    return header + parameter_block(grid) + arrayed.body


def parameter_block(grid: Grid) -> str:
    """The lines that give task N the Nth point of ``grid`` as exported shell variables."""
    names = " ".join(grid.names)
    lines = ["# Betty's sweep: task N runs with the Nth point of the grid", 'case "$SLURM_ARRAY_TASK_ID" in']
    for index, point in enumerate(grid.points()):
        settings = " ".join(f"{name}={shlex.quote(value)}" for name, value in point.items())
        lines.append(f"  {index}) {settings} ;;")
    lines += ['  *) echo "betty sweep: task $SLURM_ARRAY_TASK_ID has no point in the grid" >&2; exit 2 ;;', "esac",
              f"export {names}",
              'echo "betty sweep: task $SLURM_ARRAY_TASK_ID: ' + " ".join(f"{n}=${{{n}}}" for n in grid.names) + '"',
              ""]
    return "\n".join(lines) + "\n"


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
