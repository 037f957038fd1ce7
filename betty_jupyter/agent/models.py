"""Small models every part of the agent shares: a tool's arguments, preview and outcome, tiers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .vocabulary import Tier as Tier  # importable here too, where tools have always found it


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are refused, so a misspelt one is named."""

    model_config = ConfigDict(extra="forbid")


class Preview(BaseModel):
    """The dry run a person approves: exactly what would run or be written."""

    kind: Literal["command", "script", "diff", "text"]
    title: str
    text: str
    details: dict[str, Any] = Field(default_factory=dict)


class ToolOutcome(BaseModel):
    """What a tool did: a full output for the action log, a condensed one for the model."""

    ok: bool = True
    summary: str
    full: str = ""
    data: Any = None
    artifacts: list[str] = Field(default_factory=list)
