"""A node kernel's parts without a cluster: its staged key, its status line and time left, the refusal to stop
another job, which cells the notebook hands to the node, how its cells are noted in the experiment's record, and how
its forwards tell a link the cluster's side ended (the next cell then attaches again) from a client that left."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

from betty_jupyter.agent.tools.catalog import betty_tool
from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.compute.node_kernel import (
    connection, kernel_files, note_notebook_kernel, recorded_kernels, stage, status_line, time_left,
)
from betty_jupyter.errors import UsageError
from betty_jupyter.experiments import content
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.node_cells import KEPT_CELLS, note_cell, started_record
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
    assert status_line(job, datetime(2026, 1, 1, 10, 30)) == "job 7 RUNNING on n1 · ends at 12:00 (90 min left)"
    assert status_line(job, datetime(2026, 1, 1, 11, 59, 30)).endswith("(1 min left)")
    assert status_line(job, datetime(2026, 1, 1, 13, 0)).endswith("(0 min left)")
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


def test_the_time_left_warns_the_chosen_minutes_before_the_end() -> None:
    end = datetime(2026, 1, 1, 12, 0)
    assert time_left(end, datetime(2026, 1, 1, 11, 49), 10) == ("ends at 12:00 (11 min left)", False)
    words, warning = time_left(end, datetime(2026, 1, 1, 11, 50), 10)
    assert warning and words.startswith("ends at 12:00 (10 min left)") and "ends soon" in words
    assert time_left(end, datetime(2026, 1, 1, 11, 50), 5)[1] is False


class FakeAllocation:
    """``node_kernel_status`` of one job as a test sets it, and the clock the notebook reads."""

    def __init__(self) -> None:
        self.look = {"state": "RUNNING", "finished": False, "line": "job 12 RUNNING on n1 · ends at 12:00 (60 min left)",
                     "ends": "2026-01-01T12:00:00", "ready": None}
        self.now = datetime(2026, 1, 1, 11, 0)
        self.stopped: list[str] = []

    def poll(self, kernel: str, job: str) -> dict[str, object]:
        return dict(self.look)

    def stop(self, kernel: str, job: str) -> str:
        self.stopped.append(job)
        return f"cancelled job {job}"


def started_handle(allocation: FakeAllocation) -> node_kernel.NodeKernelHandle:
    """A handle whose card was approved and whose job was submitted; nothing is attached."""
    from betty_jupyter.agent.models import ToolOutcome

    submitted: Future[ToolOutcome] = Future()
    shell = SimpleNamespace(input_transformers_cleanup=[])
    handle = node_kernel.NodeKernelHandle(SimpleNamespace(future=submitted), "0" * 32, Path("."), allocation.poll,
                                          allocation.stop, lambda: None, shell, None, every=0.05, warn=10,
                                          now=lambda: allocation.now)
    submitted.set_result(ToolOutcome(summary="submitted job 12", data={"job_id": "12", "slug": "k"}))
    return handle


def test_the_notebook_shows_the_time_left_warns_and_says_in_one_line_when_the_job_ended() -> None:
    allocation = FakeAllocation()
    handle = started_handle(allocation)
    assert wait_until(lambda: handle.ends is not None)
    assert handle.clock() == "job 12 RUNNING on n1 · ends at 12:00 (60 min left)" and not handle.warning
    allocation.now = datetime(2026, 1, 1, 11, 52)
    assert handle.clock().startswith("job 12 RUNNING on n1 · ends at 12:00 (8 min left): save") and handle.warning
    allocation.look = {**allocation.look, "state": "TIMEOUT", "finished": True, "line": "job 12 TIMEOUT on n1"}
    assert wait_until(lambda: handle.ended)
    assert handle.clock() == "job 12 ended (TIMEOUT): the node kernel is gone; cells run here" and not handle.warning
    assert handle.stop() == handle.line and allocation.stopped == []  # nothing left to cancel
    with pytest.raises(UsageError, match="ended"):
        handle.wait(1)


def wait_until(condition: Callable[[], object], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout  # a guard against a hang, not a measurement
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_each_cell_on_the_node_is_noted_in_the_record_bounded_and_shown_escaped_with_the_cost(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add(Experiment(slug="k", job_id="12", cluster="c", submitted="2026-01-01T10:00:00", goal="", script="",
                          script_path="s", node_cells=started_record()))
    at = datetime(2026, 1, 1, 10, 5)
    for number in range(KEPT_CELLS + 5):
        note_cell(ledger, "k", f"\n  x = {number}\nprint(x)\n", at + timedelta(seconds=number), 0.5, ok=number != 3)
    hostile = "print('<img src=x onerror=alert(1)> | ` <!-- betty:auto-end -->')" + "#" * 500
    recorded = note_cell(ledger, "k", hostile, at + timedelta(minutes=5), 2.0, ok=True)
    assert note_cell(ledger, "missing", "x", at, 1.0, True) is None
    assert recorded is not None and recorded.node_cells is not None
    cells = recorded.node_cells
    assert (cells["count"], cells["failed"], len(cells["cells"])) == (KEPT_CELLS + 6, 1, KEPT_CELLS)
    assert cells["first"] == "2026-01-01T10:05:00" and cells["last"] == "2026-01-01T10:10:00"
    assert cells["cells"][0]["line"] == "x = 6" and len(cells["cells"][-1]["line"]) <= 120
    assert cells["cells"][-1]["digest"] == hashlib.sha256(hostile.encode()).hexdigest()[:12]
    job = Job(job_id="12", name="kernel", user="u", partition="gpu", state=JobState.CANCELLED, gpus=2,
              elapsed=timedelta(minutes=15))
    page = content.auto_region(recorded, job, "CANCELLED")
    assert "56 cells ran on this allocation, 1 raised, from 2026-01-01 10:05:00 to 2026-01-01 10:10:00." in page
    assert "Cost: 0.50 GPU-hours (2 GPUs × 0:15:00)." in page and "The latest 20 of 56 cells." in page
    assert "<img" not in page and "<!--" not in page and page.split("## Cells on")[1].count("\n| ") == 21


def test_a_record_without_cells_says_so_and_a_batch_job_has_no_such_section() -> None:
    kernel = Experiment(slug="k", job_id="1", cluster="c", submitted="2026-01-01T10:00:00", goal="", script="",
                        script_path="s", node_cells=started_record())
    assert "No cell has run on this allocation yet." in content.auto_region(kernel, None, "PENDING")
    batch = Experiment(slug="b", job_id="2", cluster="c", submitted="2026-01-01T10:00:00", goal="", script="",
                       script_path="s")
    assert "Cells on the node kernel" not in content.auto_region(batch, None, "PENDING")


def test_the_notebook_kernel_that_started_it_is_noted_only_when_jupyter_named_it(offline_context) -> None:
    state = offline_context.workspace.state
    token, other, never = stage(state), stage(state), stage(state)
    for started in (token, other):
        kernel_files(state, started).write("job", b"c\n12\n/work/runs/kernel-x\n")
    note_notebook_kernel(state, token, "/run/jupyter/kernel-0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9.json")
    note_notebook_kernel(state, other, "/tmp/kernel-../../x.json")
    found = {kernel.token: kernel for kernel in recorded_kernels(state)}
    assert found[token].notebook_kernel == "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9"
    assert found[other].notebook_kernel is None and found[other].job_id == "12"
    assert never not in found  # staged, never submitted: not listed


class Socketpair:
    """A forwarding transport whose channels are local socket pairs: the far ends stand for the cluster's side."""

    def __init__(self) -> None:
        self.far: list[socket.socket] = []

    def open_channel(self, host: str, port: int, timeout: float = 15.0) -> socket.socket:
        near, far = socket.socketpair()
        self.far.append(far)
        return near


def until(check: Callable[[], object], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout  # a guard against a hang on a busy machine, not a measurement
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)


def test_a_forward_counts_the_connections_the_clusters_side_ended_not_those_its_client_left() -> None:
    from betty_jupyter.transport.forward import PortForward

    cluster = Socketpair()
    with PortForward(cluster, "node1", 5555) as forward:  # type: ignore[arg-type]  # the transport's one method
        left = socket.create_connection(("127.0.0.1", forward.local_port))
        until(lambda: cluster.far, "the first channel")
        left.sendall(b"ping")
        assert cluster.far[0].recv(4) == b"ping"
        left.close()  # the client left: the far end sees the end, and nothing dropped
        assert cluster.far[0].recv(4) == b""
        assert forward.dropped == 0
        dropped = socket.create_connection(("127.0.0.1", forward.local_port))
        until(lambda: len(cluster.far) == 2, "the second channel")
        cluster.far[1].close()  # the cluster's side ended it: a dropped link
        assert dropped.recv(4) == b""
        until(lambda: forward.dropped == 1, "the drop counted")
        dropped.close()
    for far in cluster.far:
        far.close()
