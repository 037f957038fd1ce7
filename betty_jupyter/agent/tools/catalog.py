"""Betty's own tools, in the order the system prompt lists them: the one table its entry point names, read lazily.

``pyproject.toml`` registers :data:`BETTY_TOOLS` in the ``betty_jupyter.tools`` entry-point group,
where another package registers its own; :mod:`betty_jupyter.agent.registry` discovers them all
there. Nothing in Betty imports this module: the entry point does (see ``docs/agent-tools.md``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Tool

TOOL_CLASSES: dict[str, str] = {
    "cluster_run": "cluster:ClusterRun", "cluster_queue": "cluster:ClusterQueue",
    "cluster_partitions": "cluster:ClusterPartitions", "cluster_overview": "overview:ClusterOverview",
    "cluster_history": "cluster:ClusterHistory", "cluster_submit": "jobs:ClusterSubmit",
    "cluster_sweep": "sweep:ClusterSweep", "sweep_compare": "sweep:SweepCompare", "sweep_retry": "sweep:SweepRetry",
    "sweep_round": "sweep:SweepRound",
    "sweep_cancel": "sweep:SweepCancel", "cluster_status": "jobs:ClusterStatus", "cluster_cancel": "jobs:ClusterCancel",
    "cluster_extend": "extend:ClusterExtend", "cluster_move": "move:ClusterMove",
    "cluster_pipeline": "pipeline:ClusterPipeline",
    "job_logs": "cluster:JobLogs", "cluster_advise": "advise:ClusterAdvise", "cluster_why": "why:ClusterWhy",
    "cluster_efficiency": "efficiency:ClusterEfficiency", "gpu_estimate": "gpu:GpuEstimate",
    "gpu_advise": "gpu:GpuAdvise", "wiki_read": "wiki:WikiRead", "wiki_search": "wiki:WikiSearch",
    "wiki_write": "wiki:WikiWrite", "scratchpad": "notes:Scratchpad", "delegate_tasks": "delegate:DelegateTasks",
    "propose_plan": "plan:ProposePlan", "cell_run": "cell_run:CellRun", "cell_run_status": "cell_run:CellRunStatus",
    "notebook_submit": "notebook_job:NotebookSubmit", "notebook_collect": "notebook_job:NotebookCollect",
    "notebook_read": "notebook:NotebookRead", "notebook_edit": "notebook:NotebookEdit",
    "notebook_run_cell": "notebook:NotebookRunCell", "node_kernel": "node_kernel:NodeKernel",
    "node_kernel_status": "node_kernel:NodeKernelStatus", "node_kernel_stop": "node_kernel:NodeKernelStop",
}
"""Each tool's name and where its class is (``module:Class`` in this package), in the order the system prompt lists
them: a face that runs one tool loads that tool's module alone (:func:`betty_tool`)."""


def betty_tool(name: str) -> "type[Tool[Any]]":
    """The class of Betty's own tool ``name`` (its module imported now); KeyError when Betty has none."""
    module, _, cls = TOOL_CLASSES[name].partition(":")
    tool: type[Tool[Any]] = getattr(import_module(f"{__package__}.{module}"), cls)
    return tool


def __getattr__(attribute: str) -> Any:
    """``BETTY_TOOLS``: every tool class, in order (loads every tool's module; the entry point reads it); a tool
    class by its class name (``from .catalog import ClusterQueue``) loads its module alone."""
    if attribute == "BETTY_TOOLS":
        return tuple(betty_tool(name) for name in TOOL_CLASSES)
    for name, place in TOOL_CLASSES.items():
        if place.endswith(f":{attribute}"):
            return betty_tool(name)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
