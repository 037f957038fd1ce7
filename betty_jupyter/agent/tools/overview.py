"""``cluster_overview``: what the cluster is doing now, partitions × state, the queue and the person's share."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ...advisor.overview import OverviewReader, overview_table, sinfo_argv, waits_line
from ..models import Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, clip

if TYPE_CHECKING:
    from ...cluster.slurm import SlurmClient

_READERS: "weakref.WeakKeyDictionary[SlurmClient, OverviewReader]" = weakref.WeakKeyDictionary()
"""One reader per session's Slurm client: its login name is asked once, its answer kept a few seconds."""


def overview_reader(slurm: "SlurmClient") -> OverviewReader:
    """The :class:`OverviewReader` of ``slurm`` (made on first use)."""
    reader = _READERS.get(slurm)
    if reader is None:
        reader = _READERS[slurm] = OverviewReader(slurm)
    return reader


class OverviewArgs(ToolArgs):
    """This tool takes no arguments: its two commands are fixed by Betty."""


class ClusterOverview(Tool[OverviewArgs]):
    """What the cluster is doing now."""

    name = "cluster_overview"
    description = ("What the cluster is doing now, from one sinfo and one squeue: per partition the nodes idle/mixed/"
                   "allocated/down, CPUs and GPUs (by type) used, the jobs running and pending (array tasks counted), "
                   "the expected start of the next pending job where Slurm has one, and the person's own share.")
    Args = OverviewArgs
    tier = Tier.ONCE_PER_SESSION

    async def preview(self, ctx: ToolContext, args: OverviewArgs) -> Preview:
        """The two reads (their output formats are pinned by Betty)."""
        return Preview(kind="command", title=f"read what {ctx.profile.name} is doing",
                       text=f"{' '.join(sinfo_argv()[:3])}  and  squeue  (Betty's pinned --format)")

    async def run(self, ctx: ToolContext, args: OverviewArgs) -> ToolOutcome:
        """The overview as plain data in ``data``; the table and the waits for the model."""
        overview = await overview_reader(ctx.slurm).read()
        text = f"{overview_table(overview)}\nexpected waits: {waits_line(overview)}"
        return ToolOutcome(summary=clip(text), full=text, data=overview)
