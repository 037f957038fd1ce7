"""``%betty kernel`` in a real kernel on the dev cluster: one card, then the notebook's next cells run in the
allocation, each noted in its record, over the one SSH connection Betty holds (a dropped one is made again and the
next cell attaches again by itself); ``--back`` runs them here again, ``--stop`` cancels the allocation, and so does
the notebook's kernel shutting down; the notebook shows the time left, warns before the end, and a cell whose
allocation ends under it says so in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from kernel_driver import Kernel
from llm_server import ScriptedLLM
from notebook_support import betty_kernel, cell_run_project, llm  # noqa: F401 (a fixture)
from sshd_faults import kill_connection
from test_ssh_transport import dev_cluster_port

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project whose profiles of the dev cluster have an environment ``betty``: this test run's own venv."""
    return cell_run_project(tmp_path_factory.mktemp("node-kernel"), dev_cluster, llm, {"betty": {"venv": sys.prefix}})


@pytest.fixture(scope="module")
def kernel(project: dict[str, Any]) -> Iterator[Kernel]:
    with betty_kernel(project["root"], project["env"]) as driver:
        yield driver


def connections(pid: int, port: int) -> set[int]:
    """The local ports of the established TCP connections the process ``pid`` holds to ``port`` (from /proc)."""
    ours = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    found = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in ours:
                found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return found


@pytest.mark.parametrize("cluster", ["betty-dev", "betty-dev-local"])
def test_the_next_cells_run_in_the_allocation_until_back_and_stop_ends_it(kernel: Kernel, cluster: str,
                                                                          project: dict[str, Any],
                                                                          dev_cluster: dict[str, str]) -> None:
    assert kernel.run(f"%betty use {cluster}").status == "ok"
    assert kernel.run("here = 'the notebook'").status == "ok"
    started = kernel.run("node = %betty kernel --partition cpu --time 10 --env betty --grace 2 --warn 5")
    assert started.status == "ok" and not started.stderr, started.stderr
    shown = kernel.run("node")
    card = kernel.wait_for(lambda: kernel.find(shown.widgets[0], "betty-approve"), what="the card")
    assert "2 min after the notebook was last connected" in kernel.texts(shown.widgets[0])
    kernel.click(card[0])
    waited = kernel.run("node.wait(180); print(node.status)")
    assert waited.status == "ok" and "RUNNING" in waited.stdout and "ends at" in waited.stdout, waited.stderr
    job_id = waited.stdout.split()[1]
    clock = kernel.find(shown.widgets[0], "betty-node-clock")[0]
    kernel.wait_for(lambda: re.search(r"ends at \d\d:\d\d \((9|10) min left\)$", kernel.models[clock]["value"]),
                    what="the time left")
    on_node = kernel.run("import os\nprint(os.environ['SLURM_JOB_ID'], 'here' in dir())\nx = 41")
    assert on_node.stdout.split() == [job_id, "False"], (on_node.stdout, on_node.stderr)
    if cluster == "betty-dev":
        # the forwards are channels of the one connection Betty holds: no second login; after that connection
        # drops, the next cell logs in once more and attaches again by itself, and the node kept x
        pid, port = kernel.manager.provisioner.process.pid, dev_cluster_port(dev_cluster)
        held = connections(pid, port)
        assert len(held) == 1, f"the notebook's kernel holds {len(held)} connections to the cluster"
        assert kill_connection(port, next(iter(held)))
        kernel.wait_for(lambda: (now := connections(pid, port)) and not now & held, what="the link made again")
        again = kernel.run("print(x)")
        assert again.stdout.strip() == "41" and "attached again" in again.stderr, (again.stdout, again.stderr)
        assert len(connections(pid, port)) == 1
    raised = kernel.run("1 / 0")
    assert "ZeroDivisionError" in raised.stderr
    assert kernel.run("%betty kernel --back").status == "ok"
    local = kernel.run("import os\nprint(os.environ.get('SLURM_JOB_ID'), here)")
    assert local.stdout.split() == ["None", "the", "notebook"], (local.stdout, local.stderr)
    assert kernel.run("%betty kernel --here").status == "ok"
    assert kernel.run("print(x + 1)").stdout.strip() == "42"
    stopped = kernel.run("%betty kernel --stop\nprint(node.line)")
    assert f"cancelled job {job_id}" in stopped.stdout, (stopped.stdout, stopped.stderr)
    assert kernel.run("print(here)").stdout.strip() == "the notebook"
    assert kernel.models[clock]["value"].startswith(f"cancelled job {job_id}")

    # the record: the allocation, the cells that ran on it, its cost; its page once the watcher saw the end
    experiment = Ledger(Workspace.at(project["root"]).ledger_path).get(job_id)
    assert experiment is not None and experiment.experiment.node_cells is not None
    cells = experiment.experiment.node_cells
    lines = ["import os", *(["print(x)"] if cluster == "betty-dev" else []), "1 / 0", "print(x + 1)"]
    assert (cells["count"], cells["failed"]) == (len(lines), 1), cells
    assert [cell["line"] for cell in cells["cells"]] == lines
    page = Path(project["root"]) / "wiki" / experiment.experiment.page
    kernel.wait_for(lambda: "**CANCELLED**" in page.read_text(), timeout=120, what="the page of the ended job")
    text = page.read_text()
    assert f"{len(lines)} cells ran on this allocation, 1 raised" in text, text
    assert "Cost: 0.00 GPU-hours (0 GPUs × " in text, text


def test_a_cell_whose_allocation_ends_under_it_says_so_in_one_line_and_the_warning_shows(kernel: Kernel) -> None:
    assert kernel.run("%betty use betty-dev-local").status == "ok"
    started = kernel.run("node = %betty kernel --partition cpu --time 10 --env betty --grace 2 --warn 15")
    assert started.status == "ok" and not started.stderr, started.stderr
    shown = kernel.run("node")
    kernel.click(kernel.wait_for(lambda: kernel.find(shown.widgets[0], "betty-approve"), what="the card")[0])
    assert kernel.run("_ = node.wait(180)").status == "ok"
    clock = kernel.find(shown.widgets[0], "betty-node-clock")[0]
    kernel.wait_for(lambda: "betty-node-warning" in kernel.models[clock]["_dom_classes"], what="the warning")
    assert "the allocation ends soon" in kernel.models[clock]["value"]
    # the job is cancelled under a running cell: the cell ends with one line instead of hanging
    cancelled = kernel.run("import os, subprocess, time\nsubprocess.run(['scancel', os.environ['SLURM_JOB_ID']])\n"
                           "time.sleep(600)", timeout=120)
    job_id = kernel.run("print(node.job_id)").stdout.strip()
    lines = cancelled.stderr.strip().splitlines()
    assert lines[-1] == f"betty: job {job_id} ended (CANCELLED): the node kernel is gone; cells run in this " \
                       "notebook's kernel again", cancelled.stderr
    assert lines[0].startswith("betty: job") and "ends soon" in lines[0]  # the warning, once, before the cell
    assert kernel.run("import os\nprint(os.environ.get('SLURM_JOB_ID'))").stdout.strip() == "None"
    assert kernel.models[clock]["value"] == lines[-1].removeprefix("betty: ")


def test_the_allocation_is_cancelled_when_the_notebooks_kernel_shuts_down(project: dict[str, Any]) -> None:
    with betty_kernel(project["root"], project["env"]) as own:
        assert own.run("%betty use betty-dev-local").status == "ok"
        assert own.run("node = %betty kernel --partition cpu --time 10 --env betty --grace 5").status == "ok"
        shown = own.run("node")
        own.click(own.wait_for(lambda: own.find(shown.widgets[0], "betty-approve"), what="the card")[0])
        assert own.run("_ = node.wait(180)").status == "ok"
        job_id = own.run("%betty kernel --back\nprint(node.job_id)").stdout.strip()
        assert job_id.isdigit(), job_id
        own.client.stop_channels()
        own.manager.shutdown_kernel(now=False)  # as JupyterLab's "Shut Down Kernel" and the server's stop ask
        own.manager.shutdown_kernel = lambda now=False: None  # type: ignore[method-assign]  # already shut down

    def state() -> str:
        shown = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "State", "-j", job_id], capture_output=True,
                               text=True, env=project["env"], timeout=60)
        return shown.stdout.strip()

    deadline = time.monotonic() + 90  # well within the 5 min grace: the cancel, not the kernel's own end
    while not state().startswith(("CANCELLED", "COMPLETED")):
        assert time.monotonic() < deadline, f"job {job_id} is still {state()} after its notebook's kernel shut down"
        time.sleep(1)
    assert state().startswith("CANCELLED"), state()
