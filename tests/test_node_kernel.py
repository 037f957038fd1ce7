"""A node kernel's parts without a cluster: its staged key, its status line, the refusal to stop another job, and
which cells the notebook hands to the node."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from betty_jupyter.agent.tools.catalog import betty_tool
from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.compute.node_kernel import connection, kernel_files, stage, status_line
from betty_jupyter.errors import UsageError
from betty_jupyter.notebook import node_kernel


def test_a_staged_kernel_has_a_fresh_key_in_a_folder_of_its_owner_alone(offline_context) -> None:
    state = offline_context.workspace.state
    first, second = stage(state), stage(state)
    keys = {connection(state, token)["key"] for token in (first, second)}
    assert len(keys) == 2 and all(len(bytes.fromhex(key)) == 32 for key in keys)
    folder = state / "node-kernels" / first
    assert (folder.stat().st_mode & 0o777) == 0o700 and ((folder / "kernel.json").stat().st_mode & 0o777) == 0o600
    with pytest.raises(UsageError, match="is not a node kernel"):
        kernel_files(state, "../../etc")


def test_stop_cancels_only_the_job_recorded_for_that_kernel(offline_context) -> None:
    token = stage(offline_context.workspace.state)
    stop = betty_tool("node_kernel_stop")()
    refused = asyncio.run(stop.execute(offline_context, {"kernel": token, "job_id": "1"}))
    assert not refused.ok and f"no node kernel {token} was started" in refused.summary
    kernel_files(offline_context.workspace.state, token).write("job", b"nowhere\n12\n/work/runs/kernel-x\n")
    other = asyncio.run(stop.execute(offline_context, {"kernel": token, "job_id": "13"}))
    assert not other.ok and "is not node kernel" in other.summary


def test_the_status_line_says_when_the_allocation_ends_and_what_is_left() -> None:
    job = Job(job_id="7", name="kernel", user="u", partition="gpu", state=JobState.RUNNING,
              started=datetime(2026, 1, 1, 10, 0), time_limit=timedelta(hours=2), nodelist="n1")
    assert status_line(job, datetime(2026, 1, 1, 10, 30)) == "job 7 RUNNING on n1 · ends at 12:00 (1:30:00 left)"
    assert status_line(job, datetime(2026, 1, 1, 13, 0)).endswith("(0:00:00 left)")
    waiting = Job(job_id="8", name="kernel", user="u", partition="gpu", state=JobState.PENDING)
    assert status_line(waiting) == "job 8 PENDING"


def test_only_cells_that_are_not_betty_commands_go_to_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    assert node_kernel.to_node(["print(1)\n"]) == ["print(1)\n"]  # no node kernel in use: unchanged
    monkeypatch.setattr(node_kernel, "_ACTIVE", object())
    assert node_kernel.to_node(["%betty kernel --back\n"]) == ["%betty kernel --back\n"]
    assert node_kernel.to_node(["%%betty run --partition cpu --time 5\n", "x = 1\n"])[0].startswith("%%betty")
    code = "x = '''\\n'''\nprint(x)  # ')\n"
    handed = node_kernel.to_node(code.splitlines(keepends=True))
    assert len(handed) == 1 and handed[0].endswith(f".run_on_node({code!r})\n")
