"""The arguments of a job Betty writes the script of (``cell_run``, ``notebook_submit``): one model for both tools."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...cluster.job_request import CellEnvironment, JobRequest
from .base import ToolArgs

MAX_MINUTES = 7 * 24 * 60
"""The longest time limit a tool asks for: a week."""

Minutes = Annotated[int, Field(ge=1, le=MAX_MINUTES)]
"""A job's time limit in minutes."""


class JobRequestArgs(ToolArgs):
    """What the job asks for: a partition, GPUs, a time limit, a named environment, a name."""

    partition: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$",
                           description="the Slurm partition the job runs in")
    gpus: int = Field(0, ge=0, le=64, description="the GPUs the job asks for")
    time: Minutes = Field(description="the job's time limit in minutes")
    env: str | None = Field(None, max_length=63, description="a named environment of the cluster's profile")
    name: str | None = Field(None, max_length=80, description="a short name for the experiment")

    def job_request(self, environment: CellEnvironment, job_name: str) -> JobRequest:
        """The job these arguments ask for, in ``environment`` (the one :attr:`env` names, checked), as ``job_name``."""
        return JobRequest(self.partition, self.time, self.gpus, environment, job_name)
