"""A cluster for the watcher's fast tests on which every watched job has completed.

The real cluster's tests are in ``tests/test_experiments.py`` and ``tests/test_notebook_status.py``.
"""

from __future__ import annotations

from datetime import timedelta

from betty_jupyter.cluster.jobs import Job, JobState


class EndedSlurm:
    """Answers the watcher's three questions: every job COMPLETED with exit code 0:0, no use recorded, and an empty log."""

    async def snapshot(self, job_ids):
        return {job_id: Job(job_id=job_id, name="lora", user="ada", partition="debug", state=JobState.COMPLETED,
                            exit_code="0:0", elapsed=timedelta(seconds=3)) for job_id in job_ids}

    async def efficiency(self, job_ids=None, since=None):
        return []  # accounting recorded no use: the pages show no Efficiency section

    async def tail(self, job_id, stream, lines):
        return ""
