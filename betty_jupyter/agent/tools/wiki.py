"""Wiki tools: read, search and write pages of the project's wiki through :class:`WikiStore`.

``wiki_write`` previews the exact change: a unified diff of the page before and after, or
the whole new page. The preview is computed with the wiki's own rules (name checks, the
frontmatter schema, Betty's marker region, ``log.md`` append-only) so what it refuses the
write would refuse too. Its tier depends on the target (:meth:`WikiWrite.tier_for`): a line in
``log.md`` is tier 0; anything under ``experiments/``, an append, or a frontmatter change is
tier 1; a new page or a whole new body elsewhere is tier 2, and so is every write of a page
that steers the agent (:func:`steers_the_agent`), in every mode.
"""

from __future__ import annotations

import difflib
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from ...errors import WikiError
from ...wiki import LOG, WikiStore, check_frontmatter
from ...wiki.names import check_page_name
from ...wiki.page import compose, render_frontmatter
from ...wiki.regions import check_no_markers, check_one_line, find_region, outside
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError, clip

if TYPE_CHECKING:
    from ...wiki import Page

STEERING_PAGES = ("index.md", "SCHEMA.md")
"""Pages the agent is guided by, besides the persona pages: the wiki's map and its schema."""
STEERING_FOLDERS = ("personas/",)
"""Folders whose pages become system prompts (the agent's, each automation's)."""
PAGE_LINES = 200
PAGE_CHARS = 12_000
MAX_TEXT = 200_000


def wiki_store(ctx: ToolContext) -> "WikiStore":
    """The session project's wiki."""
    return WikiStore(ctx.workspace.wiki)


def page_rule_values(ctx: ToolContext, args: "ReadArgs | WriteArgs") -> dict[str, Any]:
    """Arguments with the page's real name, so a rule on ``private/*`` holds for a link to it; as written when refused."""
    values = args.model_dump(mode="json")
    try:
        values["page"] = wiki_store(ctx).real_name(args.page)
    except WikiError:
        pass  # the call is refused when it runs; the rules see the name as written
    return values


def unified_diff(path: str, before: str, after: str) -> str:
    """``before`` → ``after`` of the file at ``path`` as a unified diff (``(no change)`` when equal)."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return text or "(no change)"


class ReadArgs(ToolArgs):
    """One page."""

    page: str = Field(min_length=1, max_length=255, description="the page's name, e.g. 'clusters/dev-cluster.md'")


class WikiRead(Tool[ReadArgs]):
    """Read one wiki page."""

    name = "wiki_read"
    description = "Read one page of the project's wiki (frontmatter and markdown)."
    Args = ReadArgs
    tier = Tier.AUTO
    project_only = True

    def rule_values(self, ctx: ToolContext, args: ReadArgs) -> dict[str, Any]:
        """The page's real name."""
        return page_rule_values(ctx, args)

    async def preview(self, ctx: ToolContext, args: ReadArgs) -> Preview:
        """Which page is read."""
        return Preview(kind="text", title=f"read wiki/{args.page}", text=f"read wiki/{args.page}")

    async def run(self, ctx: ToolContext, args: ReadArgs) -> ToolOutcome:
        """The page's text (cut for the model when long)."""
        page = wiki_store(ctx).read(args.page)
        return ToolOutcome(summary=clip(page.text, PAGE_LINES, PAGE_CHARS), full=page.text,
                           data={"name": page.name, "frontmatter": page.frontmatter, "body": page.body})


class SearchArgs(ToolArgs):
    """Words to find and fields to match."""

    query: str = Field("", max_length=500, description="words every page found must hold (any case)")
    type: str | None = Field(None, description="only pages of this type: experiment, cluster, howto, persona, note")
    job_id: str | None = Field(None, description="only the experiment page of this job")
    limit: int = Field(20, ge=1, le=200, description="the most pages to list")


class WikiSearch(Tool[SearchArgs]):
    """Find wiki pages."""

    name = "wiki_search"
    description = "Find wiki pages holding every word of a query, optionally of one type or for one job id."
    Args = SearchArgs
    tier = Tier.AUTO
    project_only = True

    async def preview(self, ctx: ToolContext, args: SearchArgs) -> Preview:
        """What is searched for."""
        return Preview(kind="text", title="search the wiki", text=f"search the wiki for {args.query!r}")

    async def run(self, ctx: ToolContext, args: SearchArgs) -> ToolOutcome:
        """One line per page: name and description."""
        fields = {key: value for key, value in (("type", args.type), ("job_id", args.job_id)) if value}
        pages = wiki_store(ctx).search(args.query, **fields)
        lines = [f"- {page.name} — {page.frontmatter.get('description', '')}".rstrip(" —") for page in pages]
        shown = lines[:args.limit]
        more = f"\n[… {len(lines) - len(shown)} more]" if len(lines) > len(shown) else ""
        summary = f"{len(pages)} page(s)" + ("\n" + "\n".join(shown) if shown else "") + more
        return ToolOutcome(summary=summary, full="\n".join(lines), data=[page.name for page in pages])


class WriteArgs(ToolArgs):
    """A new page, a changed page, or text added at a page's end."""

    page: str = Field(min_length=1, max_length=255, description="the page's name, e.g. 'howto/checkpoints.md'")
    mode: Literal["create", "update", "append"] = Field(description=(
        "create a new page (frontmatter and body), update an existing one (frontmatter merged, body replaced), "
        "or append text at its end; log.md takes one line per append"))
    frontmatter: dict[str, Any] | None = Field(
        None, description="create: name, description, type; update: the fields to change")
    body: str | None = Field(None, max_length=MAX_TEXT, description="the markdown body (create, update)")
    text: str | None = Field(None, max_length=MAX_TEXT, description="the text to append (append)")

    @model_validator(mode="after")
    def _fits_the_mode(self) -> "WriteArgs":
        if self.mode == "create" and (self.frontmatter is None or self.body is None):
            raise ValueError("create needs frontmatter (name, description, type) and body")
        if self.mode == "update" and self.frontmatter is None and self.body is None:
            raise ValueError("update needs frontmatter or body (or both)")
        if self.mode == "append" and (self.text is None or self.frontmatter is not None or self.body is not None):
            raise ValueError("append takes text only (no frontmatter, no body)")
        if self.mode != "append" and self.text is not None:
            raise ValueError(f"{self.mode} takes body, not text")
        return self


class WikiWrite(Tool[WriteArgs]):
    """Create, update or append to a wiki page."""

    name = "wiki_write"
    description = ("Write the project's wiki: create a page, update one (Betty's region and frontmatter on "
                   "experiment pages; the person's sections are never changed), or append to one. "
                   "Append one line to log.md to note what you did.")
    Args = WriteArgs
    tier = Tier.ALWAYS_ASK
    project_only = True

    def tier_for(self, args: WriteArgs) -> Tier:
        """The tier of this write, decided on the page's checked name.

        A name the wiki refuses is tier 2 (its preview then says why); any other name is the
        file written, since the preview and the write refuse a link to another page. 0 for a
        line in log.md; 2 for a page that steers the agent, in every mode; 1 under
        experiments/; 2 for a new page or a whole new body elsewhere; else (an append, a
        frontmatter change) 1.
        """
        try:
            page = check_page_name(args.page)
        except WikiError:
            return Tier.ALWAYS_ASK
        if args.mode == "append" and page == LOG:
            return Tier.AUTO
        if steers_the_agent(page):
            return Tier.ALWAYS_ASK
        if page.startswith("experiments/"):
            return Tier.ONCE_PER_SESSION
        if args.mode == "create" or (args.mode == "update" and args.body is not None):
            return Tier.ALWAYS_ASK
        return Tier.ONCE_PER_SESSION

    def rule_values(self, ctx: ToolContext, args: WriteArgs) -> dict[str, Any]:
        """The page's real name."""
        return page_rule_values(ctx, args)

    def asks(self) -> str:
        """It depends on the target."""
        return ("A log.md line never asks; pages under experiments/, appends and frontmatter changes ask once per "
                "session; new pages, whole new bodies and personas/, index.md, SCHEMA.md always ask.")

    async def preview(self, ctx: ToolContext, args: WriteArgs) -> Preview:
        """The diff of the page before → after, or the whole new page."""
        store = wiki_store(ctx)
        _check_target(store, args.page)
        if args.mode == "create":
            text = _created(store, args)
            return Preview(kind="text", title=f"create wiki/{args.page}", text=text, details={"page": args.page})
        before = _current(store, args.page)
        after = _updated(store, args) if args.mode == "update" else _appended(store, args.page, args.text or "")
        diff = unified_diff(f"wiki/{args.page}", before, after)
        return Preview(kind="diff", title=f"{args.mode} wiki/{args.page}", text=diff, details={"page": args.page})

    async def run(self, ctx: ToolContext, args: WriteArgs) -> ToolOutcome:
        """Write through WikiStore (atomic, locked, the person's text kept)."""
        store = wiki_store(ctx)
        _check_target(store, args.page)
        if args.mode == "create":
            store.create(args.page, args.frontmatter or {}, args.body or "")
        elif args.mode == "update":
            store.update(args.page, frontmatter=args.frontmatter, body=args.body)
        elif args.page == LOG:
            store.log(args.text or "")
        else:
            store.append(args.page, args.text or "")
        done = {"create": "created", "update": "updated", "append": "appended to"}[args.mode]
        return ToolOutcome(summary=f"{done} wiki/{args.page}", full=f"{done} wiki/{args.page}",
                           artifacts=[f"wiki/{args.page}"])


def steers_the_agent(page: str) -> bool:
    """Whether ``page`` (a checked name) steers the agent: a persona page, the index, the schema.

    Compared without case: on a case-insensitive disk (a laptop's) ``Personas/Betty.md`` is
    ``personas/betty.md``.
    """
    folded = page.casefold()
    return (folded in {name.casefold() for name in STEERING_PAGES}
            or folded.startswith(tuple(folder.casefold() for folder in STEERING_FOLDERS)))


def _check_target(store: "WikiStore", name: str) -> None:
    """Refuse names that reach another page through a link: the tier is decided on the name."""
    real = store.real_name(name)
    if real != name:
        raise ToolError(f"{name} is a link to {real}; write to {real} itself")


def _current(store: "WikiStore", name: str) -> str:
    if name == LOG and not store.exists(name):
        return ""
    return store.read(name).text


def _created(store: "WikiStore", args: WriteArgs) -> str:
    if store.exists(args.page):
        raise ToolError(f"{args.page} already exists; update it instead")
    frontmatter = args.frontmatter or {}
    check_frontmatter(args.page, frontmatter)
    body = args.body or ""
    _no_nul(body)
    find_region(body, args.page)
    return render_frontmatter(frontmatter) + body


def _updated(store: "WikiStore", args: WriteArgs) -> str:
    if args.page == LOG:
        raise ToolError("log.md is append-only; append one line to it instead")
    page = store.read(args.page)
    frontmatter = page.frontmatter
    if args.frontmatter is not None:
        frontmatter = {**page.frontmatter, **args.frontmatter}
        check_frontmatter(args.page, frontmatter)
    body = page.body if args.body is None else _kept_outside(page, args.body)
    return compose(page, frontmatter, body)


def _kept_outside(page: "Page", body: str) -> str:
    _no_nul(body)
    new_region = find_region(body, page.name)
    old_region = find_region(page.body, page.name)
    if old_region is not None and (new_region is None or outside(body, new_region) != outside(page.body, old_region)):
        raise ToolError(f"refused to update {page.name}: it would change the person's text outside "
                        "Betty's auto markers; change only what lies between them")
    return body


def _appended(store: "WikiStore", name: str, text: str) -> str:
    _no_nul(text)
    check_no_markers(text, "appended text")
    before = _current(store, name)
    if name == LOG:
        check_one_line(text, "a log entry")
        return before + f"- {datetime.now():%Y-%m-%d %H:%M} — {text}\n"
    if not text:
        return before
    gap = "\n" if before and not before.endswith("\n") else ""
    return before + gap + text + ("" if text.endswith("\n") else "\n")


def _no_nul(text: str) -> None:
    if "\0" in text:
        raise WikiError("the text contains a NUL byte; pages are text")
