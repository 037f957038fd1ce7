"""The Binder configuration: valid scripts, the dev cluster's packages, and a cluster brought up by ``start``.

``binder/start`` is run for real as a fresh unprivileged user, which is what repo2docker does
at every container start with the notebook user.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from betty_jupyter.devcluster.packages import PROGRAMS
from conftest import REPO
from test_dev_cluster_nonroot import (  # noqa: F401 (a fixture, found by name)
    assert_nothing_left,
    free_port_base,
    needs_a_new_user,
    unprivileged_user,
)

BINDER = REPO / "binder"


@pytest.mark.parametrize("script", ["postBuild", "start"])
def test_scripts_are_executable_bash(script):
    path = BINDER / script
    assert os.access(path, os.X_OK), f"{path} is not executable"
    assert path.read_text().startswith("#!/usr/bin/env bash\n")
    checked = subprocess.run([shutil.which("bash") or "bash", "-n", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_apt_txt_lists_exactly_the_dev_cluster_packages():
    lines = (BINDER / "apt.txt").read_text().splitlines()
    packages = [line.partition("#")[0].strip() for line in lines]
    assert sorted(p for p in packages if p) == sorted(set(PROGRAMS.values()))


def test_the_python_version_is_one_betty_supports():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.(1[0-9])", runtime), runtime


@pytest.mark.cluster
@needs_a_new_user
def test_start_brings_the_cluster_up_as_the_notebook_user_then_runs_the_command(unprivileged_user):
    user = unprivileged_user
    state_dir = user.home / ".local" / "share" / "betty" / "dev-cluster"  # the default, as on Binder
    port_base = free_port_base()
    start = user.betty_copy / "binder" / "start"
    try:
        result = user.run(f"{start} bash -c 'betty dev-cluster status && echo \"SLURM_CONF=$SLURM_CONF\"'",
                          env={"BETTY_DEV_CLUSTER_PORT_BASE": str(port_base)})
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        for service in ("munge", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sshd"):
            assert any(line.startswith(f"{service:<10} running (pid") for line in lines), result.stdout
        assert "node       idle" in lines
        assert any(line.startswith("slurmctld ") and line.endswith(f"port {port_base}") for line in lines)
        assert f"SLURM_CONF={state_dir}/etc/slurm.conf" in lines
    finally:
        down = user.run("betty dev-cluster down --purge")
    assert down.returncode == 0, down.stderr
    assert_nothing_left(user)


def test_start_runs_the_command_even_when_the_cluster_cannot_come_up(tmp_path):
    """Without the cluster's programs ``start`` says so, and Jupyter (here: a command) still starts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A betty whose `up` fails the way a machine without Slurm does.
    (bin_dir / "betty").write_text(
        '#!/bin/sh\n[ "$2" = up ] && { echo "betty: error: slurmctld is missing" >&2; exit 1; }\n'
        'echo "export SLURM_CONF=/nowhere/slurm.conf"\n'
    )
    (bin_dir / "betty").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([str(BINDER / "start"), "sh", "-c", 'echo "jupyter with $SLURM_CONF"'],
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "jupyter with /nowhere/slurm.conf\n"
    assert result.stderr.splitlines() == [
        "betty: error: slurmctld is missing",
        "betty: the dev cluster did not come up (see above); Jupyter starts without it",
    ]


def test_postbuild_installs_betty_and_prepares_the_demo_project(tmp_path):
    """postBuild run for real, with pip stubbed: `pip install .` from the repo, the demo project, the tour opened."""
    repo, home, bin_dir = tmp_path / "repo", tmp_path / "home", tmp_path / "bin"
    shutil.copytree(REPO / "notebooks", repo / "notebooks")
    shutil.copytree(REPO / "scripts" / "demo-config", repo / "scripts" / "demo-config")
    shutil.copy(REPO / "scripts" / "demo_notebooks.py", repo / "scripts" / "demo_notebooks.py")
    home.mkdir()
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\necho "$PWD: python $*" >> {tmp_path}/pip.log\n')
    (bin_dir / "betty").write_text(f'#!/bin/sh\nexec {sys.executable} -m betty_jupyter.cli "$@"\n')
    for launcher in bin_dir.iterdir():
        launcher.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "REPO_DIR": str(repo)}
    result = subprocess.run([str(BINDER / "postBuild")], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "pip.log").read_text() == f"{repo}: python -m pip install --no-cache-dir .\n"
    demo = repo / "demo"
    assert (demo / "wiki").is_dir() and (demo / ".betty").is_dir()
    copied = sorted(path.name for path in (demo / "notebooks").glob("0*.ipynb"))
    assert copied == sorted(path.name for path in (REPO / "notebooks").glob("0[1-9]-*.ipynb"))
    assert "01-tour.ipynb" in copied
    tour = json.loads((demo / "notebooks" / "01-tour.ipynb").read_text())
    code = [cell for cell in tour["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code), (
        "the demo's tour starts without the outputs stored for the tests")
    config = (home / ".jupyter" / "jupyter_server_config.py").read_text()
    assert 'c.ServerApp.default_url = "/lab/tree/demo/notebooks/01-tour.ipynb"' in config
    # Betty's demo model answers unless a real model is set, the cluster's reads run without a card (submissions
    # still ask), as in scripts/demo.sh; JupyterLab's news question stays away.
    betty = json.loads((home / ".jupyter" / "jupyter_server_config.d" / "betty_demo_model.json").read_text())
    assert betty == json.loads((REPO / "scripts/demo-config/jupyter_server_config.d/betty_demo_model.json").read_text())
    assert betty["BettyConfig"]["llm"] == {"demo": True} and set(betty["BettyConfig"]["rules"]) == {"allow"}
    lab = home / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    assert json.loads(lab.read_text()) == {"fetchNews": "false", "checkForUpdates": False}
