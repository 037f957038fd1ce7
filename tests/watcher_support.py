"""A cluster for the watcher's fast tests on which every watched job has completed.

The real cluster's tests are in ``tests/test_experiments.py`` and ``tests/test_notebook_status.py``.
"""

from __future__ import annotations

from datetime import timedelta

from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.cluster.slurm import Snapshot


class EndedSlurm:
    """Answers the watcher's two questions: every job COMPLETED with exit code 0:0 and no use recorded (accounting's
    text left empty: the pages show no Efficiency section), and an empty log."""

    async def snapshot(self, job_ids):
        return Snapshot({job_id: Job(job_id=job_id, name="lora", user="ada", partition="debug",
                                     state=JobState.COMPLETED, exit_code="0:0", elapsed=timedelta(seconds=3))
                         for job_id in job_ids}, "", ())

    async def tail(self, job_id, stream, lines):
        return ""
