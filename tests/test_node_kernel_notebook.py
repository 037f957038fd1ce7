"""``%betty kernel`` in a real kernel on the dev cluster: one card, then the notebook's next cells run in the
allocation; ``--back`` runs them here again, ``--stop`` cancels the allocation."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kernel_driver import Kernel
from llm_server import ScriptedLLM
from notebook_support import betty_kernel, cell_run_project, llm  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project whose profiles of the dev cluster have an environment ``betty``: this test run's own venv."""
    return cell_run_project(tmp_path_factory.mktemp("node-kernel"), dev_cluster, llm, {"betty": {"venv": sys.prefix}})


@pytest.fixture(scope="module")
def kernel(project: dict[str, Any]) -> Iterator[Kernel]:
    with betty_kernel(project["root"], project["env"]) as driver:
        yield driver


@pytest.mark.parametrize("cluster", ["betty-dev", "betty-dev-local"])
def test_the_next_cells_run_in_the_allocation_until_back_and_stop_ends_it(kernel: Kernel, cluster: str) -> None:
    assert kernel.run(f"%betty use {cluster}").status == "ok"
    assert kernel.run("here = 'the notebook'").status == "ok"
    started = kernel.run("node = %betty kernel --partition cpu --time 10 --env betty --grace 2")
    assert started.status == "ok" and not started.stderr, started.stderr
    shown = kernel.run("node")
    card = kernel.wait_for(lambda: kernel.find(shown.widgets[0], "betty-approve"), what="the card")
    assert "2 min after the notebook was last connected" in kernel.texts(shown.widgets[0])
    kernel.click(card[0])
    waited = kernel.run("node.wait(180); print(node.status)")
    assert waited.status == "ok" and "RUNNING" in waited.stdout and "ends at" in waited.stdout, waited.stderr
    job_id = waited.stdout.split()[1]
    on_node = kernel.run("import os\nprint(os.environ['SLURM_JOB_ID'], 'here' in dir())\nx = 41")
    assert on_node.stdout.split() == [job_id, "False"], (on_node.stdout, on_node.stderr)
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
