"""Small models every part of the agent shares: a tool's arguments, preview and outcome, tiers."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer,
                      model_validator)

from .card_words import detail_facts, summary_lines

from .vocabulary import Tier as Tier  # importable here too, where tools have always found it


ADVANCED = "x-betty-advanced"
"""The key that marks an argument a model need not see (see :data:`ADVANCED_FIELD`)."""
ADVANCED_FIELD: dict[str, Any] = {ADVANCED: True}
"""``json_schema_extra`` of an argument left out of the schema a model is shown: its default applies unless a
person's call (a magic, the panel, an MCP client) sets it."""


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are refused, so a misspelt one is named."""

    model_config = ConfigDict(extra="forbid")


class Fact(BaseModel):
    """One detail of a card in words: its label, its value as text (one item a line), or a table's rows."""

    label: str
    text: str = ""
    table: list[list[str]] | None = Field(None, description="a table's rows, its header first; text is '' then")


class Preview(BaseModel):
    """The dry run a person approves: exactly what would run or be written."""

    kind: Literal["command", "script", "diff", "text"]
    title: str
    text: str
    details: dict[str, Any] = Field(default_factory=dict)
    summary: list[str] = Field(default_factory=list, exclude_if=lambda lines: not lines, description=(
        "what a person decides on, in at most three lines (what runs where, for how long, what it replaces, "
        "what it sends); a face shows these first and the exact text and facts one click away"))
    facts: list[Fact] = Field(default_factory=list, exclude_if=lambda facts: not facts, description=(
        "the details in words, each with its label, as every face shows them"))
    inputs: dict[str, str] = Field(default_factory=dict, exclude=True)
    """What the call will read when it runs beyond ``text`` (a staged cell, a notebook's bytes), each by its
    SHA-256: part of the card's digest, so a change after the card was shown stops the call. Kept on this side
    only (the card shows what they are in ``details``; the digest covers them)."""

    @model_validator(mode="after")
    def _in_words(self) -> "Preview":
        """The summary and facts from the title, text and details, unless given (neither is in the digest)."""
        if not self.summary:
            self.summary = summary_lines(self.kind, self.title, self.text, self.details)
        if not self.facts:
            self.facts = [Fact(label=name, text=text, table=table) for name, text, table in detail_facts(self.details)]
        return self

    def say_again(self) -> None:
        """The summary and facts said again from the details, after something was added to them."""
        self.summary = summary_lines(self.kind, self.title, self.text, self.details)
        self.facts = [Fact(label=name, text=text, table=table) for name, text, table in detail_facts(self.details)]

    @model_serializer(mode="wrap")
    def _said_now(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """Written out, the summary and facts say what the title, text and details say now (a copy with a secret
        blanked, say), never what they said when the preview was made."""
        data = handler(self)
        if isinstance(data, dict) and "summary" in data:
            data["summary"] = summary_lines(self.kind, self.title, self.text, self.details)
        if isinstance(data, dict) and "facts" in data:
            data["facts"] = [{"label": name, "text": text, "table": table}
                             for name, text, table in detail_facts(self.details)]
        return data


def card_digest(tool: str, args: dict[str, Any], preview: Preview) -> str:
    """The digest a card is bound by: the tool, its checked arguments, and exactly what runs (the preview's kind,
    text and inputs; not its title or details, which may say how things stand now, such as a job's state)."""
    bound = {"tool": tool, "args": args, "kind": preview.kind, "text": preview.text, "inputs": preview.inputs}
    canonical = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def sha256_of(data: bytes | str) -> str:
    """``sha256:<hex>`` of ``data`` (text as UTF-8): how a preview names an input it binds."""
    raw = data.encode() if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class ToolOutcome(BaseModel):
    """What a tool did: a full output for the action log, a condensed one for the model.

    A table's ``data`` is rendered only for the face that asks: the model's text once per asking person
    (:attr:`told`), the panel's JSON when the panel asks; ``full`` is left empty then, and the action log keeps
    the model's bounded text (:mod:`.budget`)."""

    ok: bool = True
    summary: str
    full: str = ""
    data: Any = None
    artifacts: list[str] = Field(default_factory=list)
    paging: Any = None
    """A table's :class:`~.budget.Paging`: where the rows shown start and the filters that narrow them."""
    _told: dict[str | None, str] = PrivateAttr(default_factory=dict)
    _table: Any = PrivateAttr(default=None)

    @classmethod
    def of_table(cls, table: Any, summary: str, paging: Any = None) -> "ToolOutcome":
        """An outcome whose ``data`` is ``table``'s DataFrame (a :class:`~betty_jupyter.cluster.queue_table.QueueTable`),
        made the first time a face reads ``data``; a face that prints text reads :attr:`table` instead."""
        outcome = cls(summary=summary, paging=paging)
        outcome._table = table
        del outcome.__dict__["data"]  # read through __getattr__ until a face asks
        return outcome

    @property
    def table(self) -> Any:
        """The lazily parsed table behind ``data``, when the tool read one (None otherwise)."""
        return self._table

    def __getattr__(self, name: str) -> Any:
        if name == "data" and self._table is not None:
            self.__dict__["data"] = frame = self._table.frame
            return frame
        return super().__getattr__(name)  # type: ignore[misc]

    @property
    def told(self) -> dict[str | None, str]:
        """What a model was told of this outcome, by asking person, once condensed (see :func:`.condense.condense`)."""
        return self._told
