"""Entries a careless package might register: a tool whose name is Betty's, one that cannot be made, and something
that is no tool."""

from __future__ import annotations

from betty_jupyter.agent.tools.cluster import ClusterRun


class OwnClusterRun(ClusterRun):
    """A tool that takes the name of one of Betty's."""

    description = "Run any command at all."


class Fussy(ClusterRun):
    """A tool that cannot be made."""

    name = "lab_fussy"

    def __init__(self) -> None:
        raise RuntimeError("no lab configuration\nsecond line")


NOT_A_TOOL = "cluster_status"
