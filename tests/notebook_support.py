"""What the notebook tests share: a project on the dev cluster, a kernel in it, submitting through a card."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from jupyter_server_proc import JupyterServer
from kernel_driver import Kernel
from llm_server import ScriptedLLM

SCRIPT = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --time=00:05:00
#SBATCH --mem=100M
echo started; sleep {seconds}; echo finished
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project made by ``betty init``, with the dev cluster and the scripted model configured."""
    return new_project(tmp_path_factory.mktemp("notebook-project"), dev_cluster, llm)


@pytest.fixture(scope="module")
def server(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """A real ``jupyter server`` with Betty's extension serving the project, stopped after the module."""
    running = JupyterServer(project["root"], project["env"], tmp_path_factory.mktemp("runtime"))
    try:
        yield running
    finally:
        running.stop()


def new_project(root: Path, dev_cluster: dict[str, str], llm: ScriptedLLM,
                more_clusters: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    """``betty init`` in ``root``, configured with the dev cluster (first, the default), ``more_clusters`` and
    the scripted model; its root and the environment that runs it."""
    made = run_betty("init", str(root))
    assert made.returncode == 0, made.stderr
    cluster = json.loads(Path(dev_cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]
    config = root / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {
        **cluster, "clusters": [*cluster["clusters"], *more_clusters],
        "llm": {"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1}}}))
    env = {**os.environ, **dev_cluster, "BETTY_CONFIG": str(config)}
    return {"root": root, "env": env}


def cell_run_project(base: Path, dev_cluster: dict[str, str], llm: ScriptedLLM,
                     environments: dict[str, Any]) -> dict[str, Any]:
    """A project in ``base/project`` (:func:`new_project`) whose two profiles of the dev cluster, over SSH and with
    local commands (as under Open OnDemand), have ``environments`` and work directories ``base/work-ssh`` and
    ``base/work-local``."""
    made = new_project(base / "project", dev_cluster, llm, (
        {"name": "betty-dev-local", "transport": "local", "env": {"SLURM_CONF": dev_cluster["SLURM_CONF"]},
         "work_dir": str(base / "work-local"), "environments": environments},))
    config = Path(made["env"]["BETTY_CONFIG"])
    settings = json.loads(config.read_text())
    settings["BettyConfig"]["clusters"][0].update(work_dir=str(base / "work-ssh"), environments=environments)
    config.write_text(json.dumps(settings))
    return made


@pytest.fixture(scope="module")
def kernel(project: dict[str, Any]) -> Iterator[Kernel]:
    with betty_kernel(project["root"], project["env"]) as driver:
        yield driver


@contextmanager
def betty_kernel(root: Path, env: dict[str, str]) -> Iterator[Kernel]:
    """A kernel in ``root`` with ``env`` and Betty's extension loaded; stopped afterwards."""
    driver = Kernel(root, env)
    try:
        loaded = driver.run("%load_ext betty_jupyter")
        assert loaded.status == "ok" and not loaded.stderr, loaded.stderr
        yield driver
    finally:
        driver.close()


def one_error_line(cell: Any) -> str:
    """The cell failed the way a person should see it: one ``betty:`` line on stderr, no traceback."""
    assert cell.errors == [] and cell.status == "ok", cell.errors
    lines = cell.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("betty: "), cell.stderr
    return lines[0]


def lists_job(kernel: Kernel, root: str, job_id: str) -> bool:
    """Whether a job table under ``root`` has a row for ``job_id`` (a cell holding just the id, never
    a digit of another number: job 8 is not in a table that shows 18 or 8 CPUs)."""
    return re.search(rf">\s*{re.escape(job_id)}\s*</td>", kernel.texts(root)) is not None


def submit(kernel: Kernel, name: str, seconds: int = 60) -> str:
    """Submit a job through ``%%betty submit`` and approve its card; the job id."""
    cell = kernel.run(f"%%betty submit --slug {name} --goal 'test the notebook'\n{SCRIPT.format(name=name, seconds=seconds)}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the approval card")[0])
    text = kernel.wait_for(lambda: re.search(r"submitted job (\d+)", kernel.texts(root)), what="the job id")
    return str(text.group(1))
