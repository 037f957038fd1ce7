"""The Binder configuration: valid scripts, the dev cluster's packages, and a cluster brought up by ``start``.

``binder/start`` is run for real as a fresh unprivileged user, which is what repo2docker does
at every container start with the notebook user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

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


def test_jupyter_opens_on_a_tour_notebook_that_postbuild_copies():
    post_build = (BINDER / "postBuild").read_text()
    opened = re.search(r'default_url = "/lab/tree/demo/notebooks/([^"]+)"', post_build)
    assert opened, "postBuild sets no default_url"
    assert "cp notebooks/0[1-9]-*.ipynb" in post_build
    assert re.fullmatch(r"0[1-9]-.*\.ipynb", opened.group(1))
    assert (REPO / "notebooks" / opened.group(1)).is_file()


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
