"""The shape of a delegated task: what ``delegate_tasks`` is given and what a :class:`Delegator` answers.

These stand below every tool and the session machinery alike: :class:`~.tools.base.ToolContext`
names a :class:`Delegator`, :mod:`.tasks` reads a task's resources, :mod:`.delegation` runs them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, Sequence

from pydantic import Field, field_validator

from ..errors import SchemaError
from .models import ToolArgs

if TYPE_CHECKING:
    from .policy import Call

Strategy = Literal["fail_fast", "continue", "retry"]
MAX_TASKS = 32
MAX_PARALLEL = 16


class ResourceSpec(ToolArgs):
    """One thing a task is given to work on."""

    type: Literal["wiki", "job", "file", "experiment"] = Field(description="what the location names")
    location: str = Field(min_length=1, max_length=1000, description=(
        "wiki: a page name ('howto/x.md'); job: a job id; file: a path on the cluster under a readable root; "
        "experiment: its slug or job id"))


class TaskSpec(ToolArgs):
    """One task for one child session."""

    title: str = Field(min_length=1, max_length=120, description="a short title; it labels the task's approval cards")
    instructions: str = Field(min_length=1, max_length=20_000, description="what the helper must find out or do")
    resources: list[ResourceSpec] = Field(default_factory=list, max_length=20,
                                          description="what is loaded into the helper's first message")
    tools: list[str] = Field(default_factory=list, max_length=20,
                             description="the tools the helper may call: some of yours, none else")
    result_schema: dict[str, Any] | None = Field(
        None, description="JSON schema its answer must match; without one the answer is free text")

    @field_validator("title")
    @classmethod
    def _one_line(cls, title: str) -> str:
        if not title.strip() or "\n" in title or "\r" in title:
            raise ValueError("a title is one line of text")
        return title.strip()

    @field_validator("result_schema")
    @classmethod
    def _a_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        # lazy: jsonschema is heavy; only a task with a result schema needs it, never opening a session
        from ..json_schema import MAX_SCHEMA_CHARS, offline_validator

        if schema is not None:
            try:
                offline_validator(schema, MAX_SCHEMA_CHARS)
            except SchemaError as error:
                raise ValueError(str(error)) from None
        return schema


@dataclass
class TaskResult:
    """How one task ended: ``ok`` with its checked ``result``, ``failed`` with why, or ``cancelled``."""

    task_id: str
    title: str
    status: Literal["ok", "failed", "cancelled"] = "cancelled"
    result: Any = None
    error: str = ""
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)

    def line(self) -> str:
        """``task_… (title): {"oom": true}``, or what went wrong."""
        head = f"{self.task_id} ({self.title})"
        if self.status == "ok":
            return f"{head}: {json.dumps(self.result, ensure_ascii=False, default=str)}"
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{head}: {self.status}{tries} — {self.error}"


class Delegator(Protocol):
    """What ``delegate_tasks`` asks of the session it runs in; the session builder sets one in the tool context."""

    def check(self, tasks: Sequence[TaskSpec], read: "Callable[[ResourceSpec], Call]") -> None:
        """Refuse (ToolError) what no child may have; ``read`` names the direct call reading a resource."""
        ...

    async def run(self, tasks: Sequence[TaskSpec], on_error: Strategy = "continue",
                  max_parallel: int = 4) -> list[TaskResult]:
        """Run ``tasks`` and return how each ended, in order (the caller waits)."""
        ...

    def start(self, tasks: Sequence[TaskSpec], on_error: Strategy = "continue", max_parallel: int = 4) -> list[str]:
        """Start ``tasks`` in the background and return their ids."""
        ...
