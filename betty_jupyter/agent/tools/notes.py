"""The session's scratchpad: a markdown file of notes the agent keeps for itself across turns."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ...wiki.files import write_atomically
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError, clip
from .wiki import unified_diff

MAX_NOTES_CHARS = 64 * 1024


class NotesArgs(ToolArgs):
    """Read the notes, add to them, or replace them."""

    action: Literal["read", "append", "replace"] = Field("read", description="read, append or replace")
    text: str | None = Field(None, max_length=MAX_NOTES_CHARS, description="the text to append or the new notes")

    @model_validator(mode="after")
    def _text_when_writing(self) -> "NotesArgs":
        if self.action != "read" and self.text is None:
            raise ValueError(f"{self.action} needs text")
        if self.action == "read" and self.text is not None:
            raise ValueError("read takes no text")
        return self


class Scratchpad(Tool[NotesArgs]):
    """The session's own notes (plans, findings, what to check next)."""

    name = "scratchpad"
    description = ("Your notes for this session (a markdown file): read them, append a line or a section, or "
                   "replace them. Keep plans, findings and job ids here rather than repeating them.")
    Args = NotesArgs
    tier = Tier.AUTO
    chat_only = True

    async def preview(self, ctx: ToolContext, args: NotesArgs) -> Preview:
        """What is read, or the diff of the notes."""
        name = f".betty/scratchpads/{ctx.scratchpad.name}"
        if args.action == "read":
            return Preview(kind="text", title="read the session's notes", text=f"read {ctx.scratchpad}")
        before = _notes(ctx)
        return Preview(kind="diff", title=f"{args.action} the session's notes",
                       text=unified_diff(name, before, _changed(before, args)))

    async def run(self, ctx: ToolContext, args: NotesArgs) -> ToolOutcome:
        """The notes, or what was written."""
        before = _notes(ctx)
        if args.action == "read":
            return ToolOutcome(summary=clip(before, 200, MAX_NOTES_CHARS) or "(no notes yet)", full=before)
        after = _changed(before, args)
        if len(after) > MAX_NOTES_CHARS:
            raise ToolError(f"scratchpad: the notes would exceed {MAX_NOTES_CHARS} characters; replace them "
                            "with a shorter summary")
        try:
            write_atomically(ctx.scratchpad, after)
        except OSError as exc:
            raise ToolError(f"scratchpad: cannot write {ctx.scratchpad}: {exc.strerror or exc}") from exc
        done = "appended to" if args.action == "append" else "replaced"
        return ToolOutcome(summary=f"{done} the notes ({len(after)} characters)", full=after)


def _notes(ctx: ToolContext) -> str:
    try:
        return ctx.scratchpad.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"scratchpad: cannot read {ctx.scratchpad}: {exc}") from exc


def _changed(before: str, args: NotesArgs) -> str:
    text = args.text or ""
    if "\0" in text:
        raise ToolError("scratchpad: the text contains a NUL byte")
    ending = "" if not text or text.endswith("\n") else "\n"
    if args.action == "replace":
        return text + ending
    gap = "\n" if before and not before.endswith("\n") else ""
    return before + gap + text + ending
