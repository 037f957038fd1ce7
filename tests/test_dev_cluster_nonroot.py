"""Without root the dev cluster runs every daemon as the user who starts it, as on Binder.

Root creates a fresh unprivileged user; that user brings up a second cluster under its own
home on its own ports, submits a job through the generated ssh alias, finds it COMPLETED in
accounting and stops everything. The session's root cluster (16817–16821) is left alone.

The user runs Debian's python3 on a world-readable copy of the package: the project's venv
may live where other users cannot enter (under /root), and the dev cluster needs only the
standard library.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import betty_jupyter
from betty_jupyter.cluster.job_env import JOB_NAMES, STEPS_EXPORT
from betty_jupyter.devcluster.packages import find_program
from betty_jupyter.devcluster.processes import wait_until
from conftest import REPO, free_port_base, require, run_betty

SYSTEM_PYTHON = "/usr/bin/python3"
SERVICES = ("munge", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sshd")

# Only root may create a user; the programs and Debian's python3 are then required, not optional.
needs_a_new_user = pytest.mark.skipif(os.geteuid() != 0, reason="creating an unprivileged user needs root")



@dataclass
class UnprivilegedUser:
    """A freshly created login with no privileges, and a way to run commands as it."""

    name: str
    uid: int
    home: Path
    betty_copy: Path

    def run(self, command: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``command`` with bash as this user, in its home, with a clean environment."""
        variables = {
            "PATH": f"{self.betty_copy}/bin:/usr/bin:/bin", "HOME": str(self.home), "USER": self.name,
            "LOGNAME": self.name, "PYTHONPATH": str(self.betty_copy), **(env or {}),
        }
        argv = [find_program("runuser") or "runuser", "-u", self.name, "--", "env", "-i",
                *(f"{key}={value}" for key, value in variables.items()), "bash", "-c", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.home,
                              stdin=subprocess.DEVNULL)

    def live_processes(self) -> list[int]:
        """Pids of this user's processes that have not exited (zombies count as gone)."""
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or entry.stat().st_uid != self.uid:
                    continue
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                pids.append(int(entry.name))
        return pids


def world_readable_betty(top: Path) -> None:
    """Copy the package, ``binder/`` and a ``bin/betty`` launcher under ``top``, readable by everyone."""
    shutil.copytree(Path(betty_jupyter.__file__).parent, top / "betty_jupyter",
                    ignore=shutil.ignore_patterns("labextension", "__pycache__"))
    shutil.copytree(REPO / "binder", top / "binder")
    (top / "bin").mkdir()
    (top / "bin" / "betty").write_text(f'#!/bin/sh\nexec {SYSTEM_PYTHON} -m betty_jupyter.cli "$@"\n')
    for path in [top, *top.rglob("*")]:
        executable = path.is_dir() or os.access(path, os.X_OK) or path.parent.name == "bin"
        path.chmod(0o755 if executable else 0o644)


@pytest.fixture(scope="module")
def unprivileged_user(dev_cluster: dict[str, str]) -> Iterator[UnprivilegedUser]:
    """A new user ``betty-nonroot-XXXXXX``; removed with its home and any process it left."""
    # dev_cluster: as root it installs the Debian packages, which a normal user cannot.
    require("useradd", "userdel", "runuser", files=(SYSTEM_PYTHON,))
    name = f"betty-nonroot-{secrets.token_hex(3)}"
    subprocess.run([find_program("useradd") or "useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name],
                   check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    copy = Path(tempfile.mkdtemp(prefix="betty-nonroot-", dir="/tmp"))
    user = UnprivilegedUser(name, entry.pw_uid, Path(entry.pw_dir), copy / "betty")
    try:
        copy.chmod(0o755)
        world_readable_betty(user.betty_copy)
        yield user
    finally:
        for pid in user.live_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not user.live_processes(), 10)
        subprocess.run([find_program("userdel") or "userdel", "--remove", name], capture_output=True)
        shutil.rmtree(copy, ignore_errors=True)


def wait_for_state(user: UnprivilegedUser, state_dir: Path, job_id: str, timeout: float = 120) -> str:
    """Poll ``sacct`` as the user, with SLURM_CONF from ``betty dev-cluster env``, until the job ends."""
    command = (f'eval "$(betty dev-cluster env --state-dir {state_dir})" && '
               f"sacct -X -n -P -j {job_id} -o State")
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        result = user.run(command, timeout=30)
        assert result.returncode == 0, result.stderr
        state = result.stdout.strip()
        if state and state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            return state
        time.sleep(0.5)
    pytest.fail(f"job {job_id} did not end within {timeout} s (last state: {state or 'none'})")


def assert_nothing_left(user: UnprivilegedUser) -> None:
    """Every daemon of the user's cluster has exited."""
    assert wait_until(lambda: not user.live_processes(), 15), [
        Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in user.live_processes()
    ]


@pytest.mark.cluster
@needs_a_new_user
def test_an_unprivileged_user_runs_a_job_on_its_own_cluster(unprivileged_user):
    user = unprivileged_user
    root_cluster_before = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]
    state_dir = user.home / "dc"
    base = free_port_base()

    up = user.run(f"betty dev-cluster up --state-dir {state_dir} --port-base {base}")
    assert up.returncode == 0, up.stderr
    status = json.loads(user.run(f"betty dev-cluster status --state-dir {state_dir} --json").stdout)
    assert status["up"] is True and status["node_state"] == "idle"
    assert status["memory_enforcement"] == "polling"  # no cgroups without root
    assert status["memory_enforcement_reason"] == "not root"
    for name in SERVICES:
        assert Path(f"/proc/{status['services'][name]['pid']}").stat().st_uid == user.uid, name
    assert (state_dir / "run" / "munge" / "munge.socket.2").is_socket()
    assert (state_dir / "run" / "mariadb.sock").is_socket()

    remote = "sbatch --parsable --wrap " + shlex.quote("echo hello from $(id -un)")
    submitted = user.run(f"ssh -F {state_dir}/ssh/config betty-dev {shlex.quote(remote)}")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    assert job_id.isdigit(), submitted.stdout
    assert wait_for_state(user, state_dir, job_id) == "COMPLETED"
    assert (user.home / f"slurm-{job_id}.out").read_text() == f"hello from {user.name}\n"

    # Submitted as Betty submits, with a list of names: Slurm then asks for the login environment too
    # (--get-user-env), which a slurmd without root cannot load; the job runs with the names it was given.
    export = "--export=" + ",".join((*JOB_NAMES, "BETTY_NAMED"))
    named = shlex.join([*STEPS_EXPORT, "sbatch", "--parsable", export, "--wrap", 'echo "named=$BETTY_NAMED"'])
    submitted = user.run(f"ssh -F {state_dir}/ssh/config betty-dev {shlex.quote('BETTY_NAMED=yes ' + named)}")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    assert wait_for_state(user, state_dir, job_id) == "COMPLETED"
    assert (user.home / f"slurm-{job_id}.out").read_text() == "named=yes\n"

    down = user.run(f"betty dev-cluster down --purge --state-dir {state_dir}")
    assert down.returncode == 0, down.stderr
    assert down.stderr.strip() == "stopped: sshd, slurmd, slurmctld, slurmdbd, mariadb, munge"
    assert not state_dir.exists()
    assert_nothing_left(user)
    root_cluster_after = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]
    assert root_cluster_after == root_cluster_before


def test_a_port_base_from_the_environment_that_is_not_a_number_is_one_line(tmp_path):
    result = run_betty("dev-cluster", "up", "--state-dir", str(tmp_path / "x"),
                       env={**os.environ, "BETTY_DEV_CLUSTER_PORT_BASE": "high"})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "betty: error: BETTY_DEV_CLUSTER_PORT_BASE='high' is not a port number; "
        "set it to one such as 16817 or unset it"
    )
    assert not (tmp_path / "x").exists()
