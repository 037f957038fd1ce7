"""Wire models of Betty's REST API; ``labextension/src/models.ts`` mirrors them one to one."""

from __future__ import annotations

from typing import Literal, TypedDict


class Health(TypedDict):
    """Answer of ``GET /betty/api/health``."""

    status: Literal["ok"]
    version: str
    clusters: list[str]
    default_cluster: str | None
