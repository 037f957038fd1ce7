"""Betty's own tools, in the order the system prompt lists them: the one table its entry point names.

``pyproject.toml`` registers :data:`BETTY_TOOLS` in the ``betty_jupyter.tools`` entry-point group,
where another package registers its own; :mod:`betty_jupyter.agent.registry` discovers them all
there. Nothing in Betty imports this module: the entry point does (see ``docs/agent-tools.md``).
"""

from __future__ import annotations

from typing import Any

from .advise import ClusterAdvise
from .base import Tool
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

BETTY_TOOLS: tuple[type[Tool[Any]], ...] = (
    ClusterRun, ClusterQueue, ClusterPartitions, ClusterOverview, ClusterHistory, ClusterSubmit, ClusterSweep,
    SweepCompare, SweepRetry, SweepCancel, ClusterStatus, ClusterCancel, JobLogs, ClusterAdvise, ClusterWhy,
    ClusterEfficiency, GpuEstimate, GpuAdvise,
    WikiRead, WikiSearch, WikiWrite, Scratchpad, DelegateTasks, ProposePlan, CellRun, CellRunStatus,
    NotebookSubmit, NotebookCollect,
    NotebookRead, NotebookEdit, NotebookRunCell,
)
"""Every tool class, in the order the system prompt lists them."""
