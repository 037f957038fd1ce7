"""A lab's own tools for Betty, as a package outside Betty registers them: one entry point, no fork.

``lab_quota`` reads the lab's storage quota report (tier 0: it changes nothing); ``lab_archive``
moves a dataset to the lab's archive (tier 2: every call waits for a person). The package's
``entry_points.txt`` names :data:`TOOLS` in Betty's ``betty_jupyter.tools`` group.
"""

from __future__ import annotations

from pydantic import Field

from betty_jupyter.agent.models import Preview, Tier, ToolOutcome
from betty_jupyter.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

REPORT = "lab-quota.tsv"
"""The quota report, in the project: ``group<TAB>used GiB<TAB>quota GiB`` a line."""
ARCHIVED = "lab-archive.log"
"""Where the archive mover writes what it moved, in the project."""
MAX_BYTES = 64 * 1024


class QuotaArgs(ToolArgs):
    """Whose quota."""

    group: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="the lab's Unix group")


class LabQuota(Tool[QuotaArgs]):
    """How much of its storage quota a lab uses."""

    name = "lab_quota"
    description = "How much of its storage quota the lab's Unix group uses, from the lab's quota report."
    Args = QuotaArgs
    tier = Tier.AUTO

    async def preview(self, ctx: ToolContext, args: QuotaArgs) -> Preview:
        """What it reads."""
        return Preview(kind="text", title=f"read the quota of {args.group}", text=str(ctx.workspace.root / REPORT))

    async def run(self, ctx: ToolContext, args: QuotaArgs) -> ToolOutcome:
        """The group's line of the report."""
        try:
            with open(ctx.workspace.root / REPORT, "rb") as report:
                text = report.read(MAX_BYTES).decode("utf-8", "replace")
        except OSError as error:
            raise ToolError(f"lab_quota: the quota report cannot be read ({error.strerror})") from None
        for line in text.splitlines():
            group, _, rest = line.partition("\t")
            if group == args.group:
                used, _, quota = rest.partition("\t")
                summary = f"{args.group} uses {used.strip()[:20]} of its {quota.strip()[:20]} GiB"
                return ToolOutcome(summary=summary, full=summary)
        raise ToolError(f"lab_quota: the report has no group {args.group}")


class ArchiveArgs(ToolArgs):
    """What to archive."""

    dataset: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", description="the dataset's name")


class LabArchive(Tool[ArchiveArgs]):
    """Move a dataset to the lab's archive."""

    name = "lab_archive"
    description = "Move one of the lab's datasets to the lab's tape archive, freeing its space on scratch."
    Args = ArchiveArgs
    tier = Tier.ALWAYS_ASK

    async def preview(self, ctx: ToolContext, args: ArchiveArgs) -> Preview:
        """The move, exactly."""
        return Preview(kind="text", title=f"archive {args.dataset}", text=f"move {args.dataset} to the lab archive",
                       inputs={"dataset": args.dataset})

    async def run(self, ctx: ToolContext, args: ArchiveArgs) -> ToolOutcome:
        """Record the move."""
        with open(ctx.workspace.root / ARCHIVED, "a", encoding="utf-8") as log:
            log.write(f"{args.dataset}\n")
        return ToolOutcome(summary=f"{args.dataset} is in the lab archive")


TOOLS = (LabQuota, LabArchive)
"""What the entry point registers, in the order they are listed."""
