"""`betty submit-notebook` on the real dev cluster, over SSH and with the local transport: a notebook executed on a
compute node with its parameters injected, brought back as the experiment's notebook; a failing one with its error;
a grid as one job array with an executed notebook per task."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty

pytestmark = pytest.mark.cluster

CLUSTERS = ["devssh", "devlocal"]
"""The dev cluster over SSH, and the same cluster through local commands (as under Open OnDemand)."""
HOSTILE = '"); import os; os.system("touch PWNED") #\nsecond line \'quoted\''


@pytest.fixture
def project(dev_cluster: dict[str, str], tmp_path: Path) -> dict[str, object]:
    """A project and both profiles of the dev cluster, each with the environment ``betty``: this test run's venv."""
    environments = {"betty": {"venv": sys.prefix}, "bare": {"venv": str(tmp_path / "bare")}}
    profiles = [{"name": "devssh", "transport": "ssh", "host": dev_cluster["BETTY_DEV_SSH_HOST"],
                 "ssh_config": dev_cluster["BETTY_DEV_SSH_CONFIG"], "work_dir": str(tmp_path / "work-ssh"),
                 "environments": environments},
                {"name": "devlocal", "transport": "local", "env": {"SLURM_CONF": dev_cluster["SLURM_CONF"]},
                 "work_dir": str(tmp_path / "work-local"), "environments": environments}]
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": profiles}}))
    # a venv without nbclient: python3 is there, the imports are not
    (tmp_path / "bare" / "bin").mkdir(parents=True)
    (tmp_path / "bare" / "bin" / "python3").symlink_to("/usr/bin/python3")
    env = {**os.environ, "BETTY_CONFIG": str(config), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter")}
    root = tmp_path / "project"
    assert run_betty("init", str(root), env=env).returncode == 0
    return {"root": root, "env": env}


def cell(source: str, *tags: str) -> dict[str, object]:
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": source, "outputs": [],
            "execution_count": None}


def write_notebook(path: Path, *cells: dict[str, object]) -> Path:
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": list(cells)}))
    return path


def submit(project: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    return run_betty("submit-notebook", *args, "--partition", "cpu", "--time", "5", "--yes", "--json",
                     "--dir", str(project["root"]), env=project["env"], timeout=400)  # type: ignore[arg-type]


def joined(text: str | list[str]) -> str:
    """A notebook's multi-line string, stored as one string or as its lines."""
    return text if isinstance(text, str) else "".join(text)


def source(book: dict, index: int) -> str:
    return joined(book["cells"][index]["source"])


def outputs(book: dict, index: int) -> str:
    return "".join(joined(o.get("text", "")) for o in book["cells"][index]["outputs"])


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_parameterised_notebook_runs_with_its_parameters_and_comes_back_executed(project, cluster):
    root: Path = project["root"]  # type: ignore[assignment]
    notebook = write_notebook(root / "train.ipynb", cell("import math"), cell("lr = 0.1\nmsg = 'default'", "parameters"),
                              cell("print(f'loss={lr * 4}')\nprint(repr(msg))"))
    done = submit(project, str(notebook), "--cluster", cluster, "--env", "betty", "--param", "lr=0.25",
                  f"msg={HOSTILE}", "--slug", "train")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    # the card, as the person saw it: the script and the exact cell of parameters
    assert "parameters cell:" in done.stderr and "lr = 0.25" in done.stderr
    [record] = ActionLog(root).read()
    assert (record.tool, record.decision, record.approver, record.ok) == (
        "notebook_submit", "approved", f"{getpass.getuser()} (betty submit-notebook)", True)
    assert "notebook_runner.py" in record.preview.text and record.preview.details["page"] == answer["page"]
    assert answer["slug"].endswith("-train")
    assert record.preview.details["parameters"] == f"# Parameters (injected by Betty)\nlr = 0.25\nmsg = {HOSTILE!r}\n"
    # the executed notebook is the experiment's notebook: the injected cell after the parameters cell, its outputs
    assert answer["executed"] == [answer["notebook"]] and answer["state"] == "COMPLETED"
    book = json.loads((root / answer["notebook"]).read_text())
    assert book["cells"][2]["metadata"]["tags"] == ["injected-parameters"]
    assert source(book, 2) == record.preview.details["parameters"]
    assert outputs(book, 3) == f"loss=1.0\n{HOSTILE!r}\n"
    assert not list(Path(record.preview.details["run directory"]).glob("PWNED")) and not (root / "PWNED").exists()
    workspace = Workspace.at(root)
    assert f"the executed notebook of {answer['slug']} came back" in (workspace.wiki / "log.md").read_text()


def test_a_bad_parameter_name_is_refused_in_one_line_and_nothing_is_sent(project):
    root: Path = project["root"]  # type: ignore[assignment]
    notebook = write_notebook(root / "nb.ipynb", cell("print(1)"))
    refused = submit(project, str(notebook), "--env", "betty", "--param", "os.system=1")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1 and "not a Python variable's name" in lines[0], refused.stderr
    missing = submit(project, str(notebook), "--env", "bare", "--param", "x=1")
    lines = missing.stderr.strip().splitlines()
    assert missing.returncode == 1 and len(lines) == 1 and "cannot import nbclient, ipykernel" in lines[0], lines
    assert [(r.tool, r.ok) for r in ActionLog(root).read()] == [("notebook_submit", False)] * 2  # refused, logged
    assert not list((root / "notebooks").rglob("*.ipynb"))


def test_a_failing_notebook_comes_back_executed_up_to_the_failing_cell(project):
    root: Path = project["root"]  # type: ignore[assignment]
    notebook = write_notebook(root / "fails.ipynb", cell("print('before', n)"),
                              cell("raise ValueError(f'<b>bad</b> {n}')"), cell("print('never')"))
    done = submit(project, str(notebook), "--cluster", "devssh", "--env", "betty", "--param", "n=7")
    assert done.returncode == 0, done.stderr
    # no cell is tagged parameters: the card says the cell goes at the top
    assert "injected: no cell is tagged parameters: the injected-parameters cell is inserted at the top" in done.stderr
    answer = json.loads(done.stdout)
    assert answer["state"] == "FAILED"
    book = json.loads((root / answer["notebook"]).read_text())
    assert source(book, 0).endswith("n = 7\n") and outputs(book, 1) == "before 7\n"
    [error] = book["cells"][2]["outputs"]
    assert (error["output_type"], error["ename"], error["evalue"]) == ("error", "ValueError", "<b>bad</b> 7")
    assert book["cells"][3]["outputs"] == [] and book["cells"][3]["execution_count"] is None


def test_a_grid_is_one_job_array_with_an_executed_notebook_per_task(project, dev_cluster):
    root: Path = project["root"]  # type: ignore[assignment]
    notebook = write_notebook(root / "sweep.ipynb", cell("lr = 0.1\nseed = 0", "parameters"),
                              cell("print(f'loss={lr * 10 + seed}')"))
    done = submit(project, str(notebook), "--cluster", "devlocal", "--env", "betty", "--param", "seed=5",
                  "--grid", "lr=1,2", "--slug", "lrs")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    [record] = ActionLog(root).read()
    assert "#SBATCH --array=0-1" in record.preview.text and record.preview.details["tasks"] == 2
    assert record.preview.details["page"] == answer["page"]
    assert record.preview.details["parameters"] == ("# task 0\n# Parameters (injected by Betty)\nseed = 5\nlr = 1\n\n"
                                                    "# task 1\n# Parameters (injected by Betty)\nseed = 5\nlr = 2\n")
    assert answer["executed"] == [answer["notebook"].replace(".ipynb", f".task-{n}.ipynb") for n in (0, 1)]
    for index, loss in ((0, "15"), (1, "25")):
        book = json.loads((root / answer["executed"][index]).read_text())
        assert source(book, 1) == f"# Parameters (injected by Betty)\nseed = 5\nlr = {index + 1}\n"
        assert outputs(book, 2) == f"loss={loss}\n"
    # one job array in Slurm's record, once accounting has caught up with both tasks
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    deadline = time.monotonic() + 120  # a guard against a hang on a busy machine, not a measurement
    while (tasks := sorted(subprocess.run(["sacct", "-n", "-X", "-P", "-j", answer["job_id"], "-o", "JobID"],
                                          capture_output=True, text=True, env=env).stdout.split())) != [
            f"{answer['job_id']}_0", f"{answer['job_id']}_1"]:
        assert time.monotonic() < deadline, tasks
        time.sleep(0.5)
    # the sweep's comparison reads each task's metrics as for a script's sweep: the runner echoes what cells print
    shown = run_betty("sweeps", "show", answer["slug"], "--json", "--dir", str(root),
                      env=project["env"])  # type: ignore[arg-type]
    assert shown.returncode == 0, shown.stderr
    series = {task["index"]: task["series"] for task in json.loads(shown.stdout)["tasks"]}
    assert series == {0: {"loss": [[1.0, 15.0]]}, 1: {"loss": [[1.0, 25.0]]}}


def test_the_agents_tools_submit_a_notebook_and_bring_it_back_once_the_job_has_ended(local_profile, tmp_path):
    """The same run through the agent's tools (as under the server): ``notebook_submit``, then ``notebook_collect``."""
    import asyncio
    import dataclasses

    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.agent.tools.catalog import NotebookCollect, NotebookSubmit
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    root = tmp_path / "project"
    write_notebook(root / "nb.ipynb", cell("k = 1", "parameters"), cell("print('k squared', k * k)"))
    profile = dataclasses.replace(local_profile, environments={"betty": {"venv": sys.prefix}})

    async def scenario() -> tuple[str, dict]:
        context = ToolContext.open(profile, Workspace.at(root), "s-nb")
        try:
            original = (root / "nb.ipynb").read_bytes()
            asked = {"notebook": "nb.ipynb", "params": ["k=12"], "partition": "cpu", "time": 5, "env": "betty",
                     "sha256": hashlib.sha256(original).hexdigest()}
            preview = await NotebookSubmit().dry_run(context, asked)
            assert preview.details["parameters"].endswith("k = 12\n") and "at the top" not in preview.details["injected"]
            # a notebook changed after the card was shown is refused, and nothing is sent
            write_notebook(root / "nb.ipynb", cell("import os", "parameters"))
            changed = await NotebookSubmit().execute(context, asked)
            assert not changed.ok and "nb.ipynb is not the notebook shown for this run" in changed.summary
            unbound = await NotebookSubmit().execute(context, {**asked, "sha256": None})
            assert not unbound.ok and "no card's digest came with this call; nothing was sent" in unbound.summary
            assert not (tmp_path / "betty-work" / "runs").exists()
            (root / "nb.ipynb").write_bytes(original)
            submitted = await NotebookSubmit().execute(context, asked)
            assert submitted.ok, submitted.summary
            early = await NotebookCollect().execute(context, {"experiment": submitted.data["slug"]})
            deadline = time.monotonic() + 240  # a guard against a hang on a busy machine, not a measurement
            while not (back := await NotebookCollect().execute(context, {"experiment": submitted.data["slug"]})).ok:
                assert "comes back once it has ended" in back.summary and time.monotonic() < deadline, back.summary
                await asyncio.sleep(0.5)
            return early.summary, {**submitted.data, **back.data}
        finally:
            await context.close()

    early, data = asyncio.run(scenario())
    assert data["written"] == [data["notebook"]] and data["state"] == "COMPLETED"
    assert "comes back once it has ended" in early or "ended COMPLETED" in early
    book = json.loads((root / data["notebook"]).read_text())
    assert outputs(book, 2) == "k squared 144\n"
