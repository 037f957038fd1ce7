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
"""One reader per Slurm client (one per cluster, shared by its sessions): its answer kept a few seconds."""


def overview_reader(ctx: ToolContext) -> OverviewReader:
    """The :class:`OverviewReader` of the context's Slurm client (made on first use), its login name the cluster's."""
    reader = _READERS.get(ctx.slurm)
    if reader is None:
        login = ctx.cluster.user if ctx.cluster is not None else None
        reader = _READERS[ctx.slurm] = OverviewReader(ctx.slurm, login=login)
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
        overview = await overview_reader(ctx).read()
        text = f"{overview_table(overview)}\nexpected waits: {waits_line(overview)}"
        return ToolOutcome(summary=clip(text), full=text, data=overview)
