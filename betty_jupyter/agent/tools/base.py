"""The one base every tool stands on: parse arguments, preview, run, and turn failures into outcomes.

A tool is a small class: a ``name``, a ``description`` for the model, a pydantic ``Args``
model (its JSON schema is what the model sees), a ``tier`` (how much it may do without a
person), a :meth:`Tool.preview` that has no side effect at all, and a :meth:`Tool.run`.
:meth:`Tool.execute` is the template method the loop calls: it parses when needed, runs,
and turns every expected failure into a ``ToolOutcome(ok=False)`` with one line for the
person and the model, so a tool never raises for a mistake the model can correct.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Mapping, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ValidationError

from ...cluster.jobs import job_id
from ...cluster.shared import shared_cluster
from ...errors import BettyError, UsageError
from ...errors import ToolError as ToolError  # defined with the others, importable here too
from ...json_text import TooDeep, parse_json
from ..models import ADVANCED, Preview, Tier, ToolOutcome
from ..models import ToolArgs as ToolArgs  # defined beside the other shared models, importable here too

if TYPE_CHECKING:
    from ...cluster.allowlist import CommandPolicy
    from ...cluster.profiles import ClusterProfile
    from ...cluster.shared import Cluster
    from ...cluster.slurm import SlurmClient
    from ...experiments.workspace import Workspace
    from ..policy import Call
    from ..task_specs import Delegator

A = TypeVar("A", bound=BaseModel)
SUMMARY_LINES = 40
SUMMARY_CHARS = 4000
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ASKS = {Tier.AUTO: "", Tier.ONCE_PER_SESSION: "Asks the person once per session.",
         Tier.ALWAYS_ASK: "Always asks the person first."}


@dataclass(frozen=True)
class ToolContext:
    """What every tool may use; the host builds one per session."""

    profile: "ClusterProfile"
    slurm: "SlurmClient"
    workspace: "Workspace"
    session_id: str
    scratchpad: Path
    delegator: "Delegator | None" = field(default=None, repr=False, compare=False)
    """Where ``delegate_tasks`` hands its tasks: the session's, set as the session is built (None outside one)."""
    cluster: "Cluster | None" = field(default=None, repr=False, compare=False)
    """The cluster ``slurm`` belongs to: the process's shared one, or the session's own over a transport its host
    gave (None: ``slurm`` alone, the context's own)."""

    @classmethod
    def open(cls, profile: "ClusterProfile", workspace: "Workspace", session_id: str) -> "ToolContext":
        """A context on the process's shared cluster of ``profile`` (its link opens lazily) for session ``session_id``."""
        if not _SESSION_ID.match(session_id):
            raise ToolError(f"session id {session_id[:40]!r} must be letters, digits, . _ - (it names a file)")
        cluster = shared_cluster(profile)
        scratchpad = workspace.state / "scratchpads" / f"{session_id}.md"
        return cls(profile=profile, slurm=cluster.slurm, workspace=workspace, session_id=session_id,
                   scratchpad=scratchpad, cluster=cluster)

    def policy(self) -> "CommandPolicy":
        """The read-only allowlist of the session's cluster."""
        return self.profile.policy()

    async def close(self) -> None:
        """Close the link when it is the context's own (closing twice is fine); the shared cluster's is the process's."""
        if self.cluster is None or not self.cluster.shared:
            await self.slurm.transport.close()


def _checked_job_id(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("a Slurm job id is text such as '123' or '123_4'")
    try:
        checked = job_id(value)
    except UsageError as error:
        raise ValueError(str(error)) from None
    # Slurm reads 00123 as 123: the card, the rules and the command see the one spelling.
    return "_".join(str(int(part)) for part in checked.split("_"))


JobId = Annotated[str, BeforeValidator(_checked_job_id)]
"""A job id a command line may carry (``123``, ``123_4``), checked by the cluster layer, without leading zeros."""
OptionalJobId = Annotated[JobId | None, BeforeValidator(lambda value: None if value == "" else value)]
"""A job id that may be left out; ``""`` (as models fill every field) is left out too, since no job has it."""


class Tool(Generic[A]):
    """Base of every tool; subclasses set the class variables and write :meth:`preview` and :meth:`run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    tier: ClassVar[Tier]
    follows_progress: ClassVar[bool] = False
    """Its result follows something that changes while a turn goes on (a job's state, a growing log): the same call
    repeated runs again, where a repeat of any other call is answered from its first result."""
    title: ClassVar[str] = ""
    """A short name for people (an MCP host shows it); empty: its name, in words."""
    chat_only: ClassVar[bool] = False
    """It serves Betty's own chat only (its notes, its plan, its helpers, a cell or notebook the person has open
    there): never offered to another agent (an MCP client)."""
    person_only: ClassVar[bool] = False
    """Only the person's own faces call it (a magic, a panel button, what a notebook does when it closes): never
    offered to a model or another agent, and refused when one calls it."""
    changes_project: ClassVar[bool] = False
    """Below tier 2, it still writes into the project (brings results back): not a plain read."""
    only_adds: ClassVar[bool] = False
    """At tier 2, a call only adds something new (a job, a run) and never cancels, overwrites or deletes."""
    project_only: ClassVar[bool] = False
    """It reaches nothing beyond the project and Betty itself (the wiki, the GPU catalog): no cluster."""

    def tier_for(self, args: A) -> Tier:
        """The tier of this call; the class tier unless the target decides (``wiki_write``)."""
        return self.tier

    def summary(self) -> str:
        """What it does in one line: the first sentence of its description."""
        return self.description.split(". ")[0].rstrip(".")[:160]

    def asks(self) -> str:
        """When a call waits for the person, in one sentence at the end of the description the model is shown."""
        return _ASKS[self.tier]

    def bound(self, args: A, preview: Preview) -> A:
        """``args`` bound to what the approved ``preview`` showed, so the run does exactly that or refuses.

        The gate calls this after the person's answer, before the run: a tool whose preview shows
        text that can change under it (a notebook's cell, a notebook file) takes the digest of what
        was shown into its arguments and its run refuses anything else; ``args`` by default.
        """
        return args

    def rule_values(self, ctx: ToolContext, args: A) -> dict[str, Any]:
        """The arguments as the person's rules see them: the canonical form of what will run.

        By default the parsed arguments; a tool whose arguments can be spelt several ways
        (a command line, a page reached through a link) returns the one form that runs, and
        what was written when it has none (the call is then refused when it runs).
        """
        return args.model_dump(mode="json")

    def reads_for(self, ctx: ToolContext, args: A) -> "list[Call]":
        """The reads this call makes for the person besides its own work, each as the direct call reading the same.

        The person's deny and ask rules cover each of them (``delegate_tasks``' resources); none by default.
        """
        return []

    def parse(self, raw: Mapping[str, Any] | str | BaseModel | None) -> A:
        """Validate raw JSON arguments; ToolError naming each bad field, one line each."""
        if isinstance(raw, self.Args):
            return cast(A, raw)
        data = _decode(raw)
        try:
            return cast(A, self.Args.model_validate(data))
        except ValidationError as error:
            problems = validation_problems(error)
            raise ToolError(f"some values are missing or wrong — {'; '.join(problems)}; {self._takes()}",
                            problems) from None

    def _takes(self) -> str:
        """The arguments a model is shown, in one clause, so it can write the call again right."""
        fields = {name: info for name, info in self.Args.model_fields.items()
                  if not (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get(ADVANCED))}
        if not fields:
            return "it takes none: send {}"
        return "it takes " + ", ".join(f"{name} ({_when_left_out(info)})" if _when_left_out(info) else name
                                                 for name, info in fields.items())

    async def preview(self, ctx: ToolContext, args: A) -> Preview:
        """The dry run a person approves: exactly what would run or be written; no side effect."""
        raise NotImplementedError

    async def run(self, ctx: ToolContext, args: A) -> ToolOutcome:
        """Do it; ``summary`` is what the model sees, ``full`` goes to the action log."""
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        """This tool as an OpenAI ``tools=[…]`` entry."""
        parameters = self.Args.model_json_schema()
        parameters.pop("title", None)
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": parameters}}

    async def dry_run(self, ctx: ToolContext, args: A | Mapping[str, Any] | str) -> Preview:
        """Parse (when needed) and preview; any expected failure becomes a :class:`ToolError`."""
        parsed = self.parse(args)
        try:
            return await self.preview(ctx, parsed)
        except ToolError:
            raise
        except BettyError as error:
            raise ToolError(str(error)) from error

    async def execute(self, ctx: ToolContext, args: A | Mapping[str, Any] | str) -> ToolOutcome:
        """Parse (when needed) and run; expected failures come back as ``ToolOutcome(ok=False)``, never raised."""
        try:
            return await self.run(ctx, self.parse(args))
        except ToolError as error:
            return failure(str(error), "\n".join(error.details))
        except BettyError as error:
            return failure(str(error))
        except ValidationError as error:
            problems = validation_problems(error)
            return failure("; ".join(problems), "\n".join(problems))


def _when_left_out(info: Any) -> str:
    """``required``, or what an argument means when left out (its description's ``(default: …)``), or ""."""
    if info.is_required():
        return "required"
    found = re.search(r"\((default: [^()]*)\)", info.description or "")
    return found.group(1) if found else ""


def failure(summary: str, full: str = "") -> ToolOutcome:
    """An outcome for a call that did not do what was asked."""
    return ToolOutcome(ok=False, summary=summary, full=full or summary)


def validation_problems(error: ValidationError) -> list[str]:
    """One line per bad field: ``lines: Input should be less than or equal to 2000``."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "is not an argument of this tool"
        elif item["type"] == "missing":
            message = "is required"
        problems.append(f"{where}: {message}")
    return problems


def _decode(raw: Mapping[str, Any] | str | BaseModel | None) -> Any:
    if raw is None:
        return {}
    if isinstance(raw, BaseModel):
        return raw.model_dump()
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = parse_json(raw)
        except TooDeep:
            raise ToolError("the values are nested too deeply; send a flat JSON object") from None
        except ValueError as error:
            raise ToolError(f"the values are not valid JSON ({error}); send one JSON object") from None
    if not isinstance(raw, Mapping):
        raise ToolError(f"the values must be one JSON object, not {type(raw).__name__}")
    return dict(raw)


def clip(text: str, lines: int = SUMMARY_LINES, chars: int = SUMMARY_CHARS, keep: str = "head") -> str:
    """``text`` cut to what the model should see (the first or the last lines), saying what was left out."""
    rows = text.splitlines()
    kept = rows[:lines] if keep == "head" else rows[-lines:]
    shown = "\n".join(kept)
    cut = len(shown) > chars
    if cut:
        shown = shown[:chars] if keep == "head" else shown[-chars:]
    if len(kept) == len(rows) and not cut:
        return shown
    note = f"[… cut to {len(shown.splitlines())} of {len(rows)} lines; the action log has the whole output]"
    return f"{shown}\n{note}" if keep == "head" else f"{note}\n{shown}"


async def revalidated(tool: Tool[A], ctx: ToolContext, edited: Mapping[str, Any] | str) -> tuple[A, Preview]:
    """A person's edited arguments checked by ``tool`` and previewed again; ToolError when they are refused.

    Show the new preview (the edit approves what the person wrote, not what the model asked)
    and decide again with ``tool.tier_for(args)``: an edit may change the tier (``wiki_write``).
    """
    try:
        args = tool.parse(edited)
        preview = await tool.dry_run(ctx, args)
    except ToolError as error:
        raise ToolError(f"the edited call is refused: {error}", error.details) from error
    return args, preview
