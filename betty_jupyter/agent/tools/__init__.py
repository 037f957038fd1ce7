"""Every action the agent can take, as a small :class:`Tool` with a preview (see ``docs/agent-tools.md``)."""

from __future__ import annotations

from typing import Any

from .advise import ClusterAdvise
from .base import JobId, Tool, ToolArgs, ToolContext, ToolError
from .cell_run import CellRun, CellRunStatus
from .cluster import ClusterHistory, ClusterPartitions, ClusterQueue, ClusterRun, JobLogs
from .delegate import DelegateTasks
from .efficiency import ClusterEfficiency
from .gpu import GpuAdvise, GpuEstimate
from .jobs import ClusterCancel, ClusterStatus, ClusterSubmit
from .notebook import NotebookEdit, NotebookRead, NotebookRunCell
from .notes import Scratchpad
from .overview import ClusterOverview
from .plan import ProposePlan
from .notebook_job import NotebookCollect, NotebookSubmit
from .sweep import ClusterSweep, SweepCancel, SweepCompare, SweepRetry
from .why import ClusterWhy
from .wiki import WikiRead, WikiSearch, WikiWrite

ALL_TOOLS: tuple[type[Tool[Any]], ...] = (
    ClusterRun, ClusterQueue, ClusterPartitions, ClusterOverview, ClusterHistory, ClusterSubmit, ClusterSweep,
    SweepCompare, SweepRetry, SweepCancel, ClusterStatus, ClusterCancel, JobLogs, ClusterAdvise, ClusterWhy,
    ClusterEfficiency, GpuEstimate, GpuAdvise,
    WikiRead, WikiSearch, WikiWrite, Scratchpad, DelegateTasks, ProposePlan, CellRun, CellRunStatus,
    NotebookSubmit, NotebookCollect,
    NotebookRead, NotebookEdit, NotebookRunCell,
)
"""Every tool class, in the order the system prompt lists them."""

__all__ = [
    "ALL_TOOLS", "CellRun", "CellRunStatus", "ClusterAdvise", "ClusterCancel", "ClusterEfficiency", "ClusterHistory", "ClusterOverview",
    "ClusterPartitions", "ClusterQueue", "ClusterRun", "ClusterStatus", "ClusterSubmit", "ClusterSweep", "ClusterWhy",
    "DelegateTasks",
    "GpuAdvise", "GpuEstimate", "JobId", "JobLogs", "NotebookCollect", "NotebookEdit", "NotebookRead", "NotebookRunCell",
    "NotebookSubmit", "ProposePlan", "Scratchpad",
    "SweepCancel", "SweepCompare", "SweepRetry",
    "Tool", "ToolArgs", "ToolContext", "ToolError", "WikiRead", "WikiSearch", "WikiWrite",
]
