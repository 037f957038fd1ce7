"""A notebook kernel in an allocation (``%betty kernel``) on the dev cluster, over the real sshd and locally: its cells
run in the job, it outlives a dropped SSH link, a client without its key cannot run anything, and stop cancels it."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.agent.tools import ToolContext
from betty_jupyter.agent.tools.catalog import betty_tool
from betty_jupyter.compute.node_kernel import AttachedKernel, Ready, attach, connection, stage
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace
from sshd_faults import client_port, kill_connection

pytestmark = pytest.mark.cluster


class Session:
    """One project, one tool context, one event loop: the tools as the agent's gate runs them once approved."""

    def __init__(self, profile: Any, root: Path) -> None:
        init_workspace(root)
        self.workspace = Workspace.at(root)
        self.loop = asyncio.new_event_loop()
        self.context = ToolContext.open(profile, self.workspace, "s-kernel")

    def call(self, name: str, args: dict[str, Any]) -> Any:
        tool = betty_tool(name)()
        outcome = self.loop.run_until_complete(tool.execute(self.context, args))
        assert outcome.ok, outcome.summary
        return outcome

    def preview(self, name: str, args: dict[str, Any]) -> Any:
        return self.loop.run_until_complete(betty_tool(name)().dry_run(self.context, args))

    def close(self) -> None:
        self.loop.run_until_complete(self.context.close())
        self.loop.close()


@pytest.fixture(params=["ssh", "local"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    profile = request.getfixturevalue(f"{request.param}_profile")
    made = Session(dataclasses.replace(profile, environments={"betty": {"venv": sys.prefix}}), tmp_path / "project")
    yield made
    made.close()


def wait_for(condition: Any, what: str, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout  # a guard against a hang on a busy machine, not a measurement
    while not (found := condition()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.5)
    return found


def run_cell(kernel: AttachedKernel, code: str) -> str:
    """The cell's printed output; fails the test when the cell raised."""
    printed: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        if message["header"]["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    reply = kernel.client.execute_interactive(code, timeout=120, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(printed)


def test_a_kernel_in_an_allocation_runs_cells_survives_a_dropped_link_refuses_a_wrong_key_and_stops(
        session: Session, dev_cluster: dict[str, str]) -> None:
    token = stage(session.workspace.state)
    asked = {"kernel": token, "partition": "cpu", "time": 10, "env": "betty", "grace": 5}
    card = session.preview("node_kernel", asked)
    assert "ipykernel" not in card.text and "node_kernel_runner.py 300" in card.text and "#SBATCH --time=10" in card.text
    assert "5 min after the notebook was last connected" in card.details["ends"]
    started = session.call("node_kernel", asked)
    job_id = started.data["job_id"]
    recorded = [t.experiment for t in Ledger(session.workspace.ledger_path).all()]
    assert [e.job_id for e in recorded] == [job_id] and "node_kernel_runner.py" in recorded[0].script
    ref = {"kernel": token, "job_id": job_id}

    def ready() -> dict[str, Any] | None:
        look = session.call("node_kernel_status", ref).data
        assert not look["finished"], look
        return look["ready"]

    where = wait_for(ready, "the kernel's start")
    assert "owned by uid" in where["checked"]
    line = session.call("node_kernel_status", ref).summary
    assert f"job {job_id} RUNNING" in line and "ends at" in line and "left)" in line
    info = connection(session.workspace.state, token)
    kernel = attach(session.context.slurm.transport, info, Ready(where["ip"], where["ports"], where["host"], ""))
    try:
        if session.context.profile.transport == "ssh":
            assert len(kernel.forwards) == 5 and kernel.client.ip == "127.0.0.1"
            assert {f.local_port for f in kernel.forwards} == {kernel.client.shell_port, kernel.client.iopub_port,
                                                               kernel.client.stdin_port, kernel.client.control_port,
                                                               kernel.client.hb_port}
        shown = run_cell(kernel, "import os, socket\nx = 41\nprint(socket.gethostname(), os.environ['SLURM_JOB_ID'])")
        assert shown.split() == [where["host"], job_id]
        assert "secret" not in run_cell(kernel, "print(sorted(k for k in os.environ if 'TOKEN' in k or 'KEY' in k))"
                                        ).lower()

        # a client with another key: the kernel drops its messages (the log says so) and x stays as it was
        intruder = attach(session.context.slurm.transport, {**info, "key": "0" * 64},
                          Ready(where["ip"], where["ports"], where["host"], ""), wait=None)
        try:
            intruder.client.execute("x = 'taken over'")
            log = Path(started.data["run_dir"]) / "kernel.err"
            wait_for(lambda: log.exists() and "Invalid Signature" in log.read_text(), "the kernel's refusal", 60)
        finally:
            intruder.close()
        assert run_cell(kernel, "print(x)").strip() == "41"

        if session.context.profile.transport == "ssh":
            from test_ssh_transport import dev_cluster_port

            transport = session.context.slurm.transport.current()
            assert kill_connection(dev_cluster_port(dev_cluster), client_port(transport))
            kernel = kernel.reattach()
            assert run_cell(kernel, "x += 1\nprint(x)").strip() == "42"
    finally:
        kernel.close()
    assert "cancelled" in session.call("node_kernel_stop", ref).summary
    wait_for(lambda: session.call("node_kernel_status", ref).data["finished"], "the allocation's end", 120)


def test_a_kernel_nobody_comes_back_to_ends_its_job_after_the_grace_period(local_profile, tmp_path: Path) -> None:
    made = Session(dataclasses.replace(local_profile, environments={"betty": {"venv": sys.prefix}}), tmp_path / "p")
    try:
        token = stage(made.workspace.state)
        job_id = made.call("node_kernel", {"kernel": token, "partition": "cpu", "time": 10, "env": "betty",
                                           "grace": 1}).data["job_id"]
        ref = {"kernel": token, "job_id": job_id}
        where = wait_for(lambda: made.call("node_kernel_status", ref).data["ready"], "the kernel's start")
        kernel = attach(made.context.slurm.transport, connection(made.workspace.state, token),
                        Ready(where["ip"], where["ports"], where["host"], ""))
        assert run_cell(kernel, "print(6 * 7)").strip() == "42"
        kernel.close()
        # the runner sees no client any more; a minute later it stops the kernel, and the job ends on its own
        ended = wait_for(lambda: (look := made.call("node_kernel_status", ref).data)["finished"] and look, "the end",
                         240)
        assert ended["state"] == "COMPLETED", ended
    finally:
        made.close()
