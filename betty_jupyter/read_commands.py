"""The read commands every face offers, declared once: ``betty jobs`` and ``%betty squeue`` are one command.

Each :class:`ReadCommand` names the tool it calls, its name on each face (every name it has
ever had), its one line of help and which tool argument is taken positionally. Its options are
never written here: :func:`add_tool_options` derives them from the tool's own arguments model
when that one command's parser is built (field ``all_users`` → ``--all-users``, a bool → a
switch, a list → repeatable, a ``Literal`` → choices, the field's description → the help).
What only one face has (``--json``, ``--cluster``, ``--follow``) is declared by that face.

Only the standard library is imported here: ``betty --help`` lists these commands without
loading pydantic or any tool.
"""

from __future__ import annotations

import argparse
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Mapping

from .errors import UsageError

MODEL_ONLY = ("offset",)
"""Tool arguments no face of a person offers: ``offset`` pages the model's bounded answer, while ``betty jobs`` and
``%betty squeue`` show every row (the notebook's table pages itself)."""

ME = "\x00me"
"""The value ``--me`` gives ``user``: each face puts the person's login name on the cluster in its place."""


@dataclass(frozen=True)
class Switch:
    """A switch both faces have that sets one tool argument to one value (``--err`` is ``stream='err'``)."""

    flag: str
    sets: str
    to: Any
    help: str


@dataclass(frozen=True)
class ReadCommand:
    """One read: the researcher's name for it, the tool it calls, and what each face calls it."""

    name: str
    tool: str
    cli: tuple[str, ...]
    """Its names in ``betty`` (the first is shown; the others keep older spellings working)."""
    magic: tuple[str, ...]
    """Its names in ``%betty``."""
    help: str
    """One line, as ``betty --help`` and ``%betty help`` list it."""
    description: str = ""
    """What ``--help`` of the command says (default: :attr:`help`)."""
    positional: str | None = None
    """The tool argument given without a flag (``JOBID``)."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """More spellings of a tool argument's flag (``states``: ``--state``)."""
    switches: tuple[Switch, ...] = ()
    advanced: bool = False
    """Offer the arguments the tool marks advanced too (they are hidden from a model, not from a person)."""


READS: tuple[ReadCommand, ...] = (
    ReadCommand("queue", "cluster_queue", ("jobs",), ("squeue",), "the jobs in the queue",
                aliases={"states": ("--state",)},
                switches=(Switch("--me", "user", ME, "only your own jobs"),)),
    ReadCommand("partitions", "cluster_partitions", ("partitions",), ("sinfo",), "partitions, nodes and GPUs"),
    ReadCommand("history", "cluster_history", ("history",), ("sacct",),
                "finished and running jobs from accounting, newest first", positional="job_ids"),
    ReadCommand("overview", "cluster_overview", ("overview",), ("overview",),
                "what the cluster is doing: partitions by state, the queue, expected waits, your share",
                "What the cluster is doing now, from one sinfo and one squeue: per partition the nodes idle/mixed/"
                "allocated/down, CPUs and GPUs (by type) in use, jobs running and pending (array tasks counted), the "
                "expected start of the next pending job where Slurm has one, and your share."),
    ReadCommand("why", "cluster_why", ("why",), ("why",),
                "why one of your pending jobs waits, and what would start it sooner",
                "Explain why one of your pending jobs waits: Slurm's reason in plain words, its priority factors "
                "(sprio) against the jobs ahead of it, your fair-share (sshare), the expected start (squeue --start), "
                "and what would change it. Every figure names the command it came from; other users' jobs are only "
                "counted.", positional="job_id"),
    ReadCommand("efficiency", "cluster_efficiency", ("efficiency",), ("efficiency",),
                "CPU, memory, time and GPUs used vs requested, for your finished jobs",
                "What your finished jobs used of what they asked for, as seff reports it: CPU efficiency (TotalCPU / "
                "(Elapsed x AllocCPUS)), peak memory (MaxRSS) against the request, elapsed time against the limit, "
                "and GPUs. One sacct call for all of them; with --experiment, that experiment's runs and its "
                "right-sized request.", positional="job_ids"),
    ReadCommand("status", "cluster_status", ("status",), ("status",), "one job's state now", positional="job_id"),
    ReadCommand("logs", "job_logs", ("logs",), ("logs",), "the end of a job's output", positional="job_id",
                aliases={"lines": ("-n",)}, switches=(Switch("--err", "stream", "err", "stderr instead of stdout"),)),
)
"""Every read the faces share, in the order ``betty --help`` lists them."""


# ----- options, derived from the tool's arguments model -----------------------------------------------------------
def tool_args_model(tool: str) -> Any:
    """The pydantic model of ``tool``'s arguments (that tool loads here, on the first call)."""
    from .agent.registry import tool_class  # lazy: pydantic and the tool; `betty --help` never needs them

    return tool_class(tool).Args


def add_tool_options(parser: argparse.ArgumentParser, command: ReadCommand) -> None:
    """Add ``command``'s options to ``parser``, each from a field of its tool's arguments model.

    Nothing is defaulted here: an option not given is left out of the call (:func:`tool_args`), so the
    tool's own default applies.
    """
    from .agent.models import ADVANCED  # lazy: pydantic; only a parser that is used needs it

    model = tool_args_model(command.tool)
    for name, info in model.model_fields.items():
        if name in MODEL_ONLY or not command.advanced and (info.json_schema_extra or {}).get(ADVANCED):
            continue
        kind, choices, many = _kind(info.annotation)
        shown = (info.description or "").rstrip(".")
        if not info.is_required() and info.default not in (None, False, [], ""):
            shown += f" (default {info.default})"
        spec: dict[str, Any] = {"dest": name, "help": shown or None, "default": None}
        if name == command.positional:
            del spec["dest"]
            parser.add_argument(name, nargs="*" if many else None if info.is_required() else "?",
                                metavar=_metavar(name, many), **spec, **({"type": kind} if kind is not bool else {}))
            continue
        flags = [f"--{name.replace('_', '-')}", *command.aliases.get(name, ())]
        if kind is bool:
            action = argparse.BooleanOptionalAction if info.default is True else "store_true"
            parser.add_argument(*flags, action=action, **spec)
        else:
            parser.add_argument(*flags, type=kind, choices=choices, action="append" if many else "store",
                                metavar=None if choices else _metavar(name, many), **spec)
    for switch in command.switches:
        parser.add_argument(switch.flag, dest=switch.sets, action="store_const", const=switch.to, help=switch.help)


def option_names(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string and positional of ``parser`` (what a face offers), ``--help`` left out."""
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names.update(action.option_strings or [action.dest])
    return names


def tool_args(command: ReadCommand, parsed: argparse.Namespace) -> dict[str, Any]:
    """The tool's arguments a parsed command line gave (each option left out stays the tool's default)."""
    model = tool_args_model(command.tool)
    values = {name: getattr(parsed, name, None) for name in model.model_fields}
    return {name: value for name, value in values.items() if value not in (None, [])}


def check(command: ReadCommand, values: Mapping[str, Any]) -> None:
    """Refuse arguments the tool would refuse, before anything connects (a UsageError naming the field)."""
    from pydantic import ValidationError  # lazy: only a command that runs needs it

    try:
        tool_args_model(command.tool).model_validate(dict(values))
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "value_error":  # the tool's own check says what is wrong, in its words
            raise UsageError(str(first["msg"]).removeprefix("Value error, ")) from None
        where = ".".join(str(part) for part in first["loc"]) or command.tool
        raise UsageError(f"{where}: {first['msg']}") from None


def _kind(annotation: Any) -> tuple[Any, list[Any] | None, bool]:
    """``(argparse type, choices, repeatable)`` of a field's type: ``list[JobId] | None`` → ``(str, None, True)``."""
    many = False
    for _ in range(4):  # Optional, Annotated and list wrap each other at most this deep
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
        elif origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is list:
            many, annotation = True, typing.get_args(annotation)[0]
        else:
            break
    if typing.get_origin(annotation) is Literal:
        choices = list(typing.get_args(annotation))
        return type(choices[0]), choices, many
    if annotation in (int, float, bool):
        return annotation, None, many
    return str, None, many


def _metavar(name: str, many: bool) -> str:
    """``JOBID`` for a job, ``STATE`` for each of ``states``."""
    if name in ("job_id", "job_ids"):
        return "JOBID"
    return (name[:-1] if many and name.endswith("s") else name).upper()


def names(face: Literal["cli", "magic"]) -> Iterator[str]:
    """Every name the reads have on ``face``."""
    for command in READS:
        yield from getattr(command, face)
