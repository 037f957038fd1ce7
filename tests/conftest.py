"""Shared fixtures: a clean environment for every test and the real dev cluster, once per session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytest_jupyter.jupyter_server"]

REPO = Path(__file__).resolve().parents[1]
BETTY = [sys.executable, "-m", "betty_jupyter.cli"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the dev cluster (directly or through another fixture) is marked ``cluster``,
    so ``pytest -m "not cluster"`` is the fast tier: the loop, policy, approvals, parsers and renderers
    over Betty's scripted transport and the scripted model, with no Slurm and no sshd."""
    for item in items:
        if "dev_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the person's Slurm allocation, API keys and Jupyter/Betty config out of every test."""
    for name in list(os.environ):
        if name.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SACCT_")) or name.endswith("_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("BETTY_CONFIG", raising=False)
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path_factory.mktemp("jupyter-config")))


@pytest.fixture(autouse=True)
def own_clusters():
    """Each test starts without the process's shared clusters and closes the ones it opened, as a process would."""
    yield
    shared = sys.modules.get("betty_jupyter.cluster.shared")
    if shared is not None and shared.shared_clusters():
        import asyncio

        asyncio.run(shared.close_clusters())


def require(*programs: str, files: tuple[str, ...] = ()) -> None:
    """Fail (never skip) when this Debian machine lacks a program or file the test relies on."""
    found = [p for p in programs if shutil.which(p) or shutil.which(p, path="/usr/sbin:/sbin")]
    missing = [p for p in programs if p not in found] + [f for f in files if not os.path.exists(f)]
    assert not missing, f"missing on this Debian machine: {', '.join(missing)}"


def free_port_base() -> int:
    """Five consecutive free ports below the ephemeral range, for a test's own extra cluster."""
    import random

    from betty_jupyter.devcluster.processes import port_is_free

    for _ in range(200):
        base = random.randrange(20000, 32000)
        if all(port_is_free(port) for port in range(base, base + 5)):
            return base
    pytest.fail("found no five consecutive free ports between 20000 and 32000")


def run_betty(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the ``betty`` command line as a person would, capturing its output."""
    return subprocess.run(
        [*BETTY, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="session")
def dev_cluster() -> dict[str, str]:
    """Bring the dev cluster up (a no-op when it already runs) and return its environment."""
    up = run_betty("dev-cluster", "up", timeout=600)
    assert up.returncode == 0, f"betty dev-cluster up failed: {up.stderr}"
    env = run_betty("dev-cluster", "env", "--json")
    assert env.returncode == 0, env.stderr
    return json.loads(env.stdout)


@pytest.fixture
def cluster_env(dev_cluster: dict[str, str]) -> dict[str, str]:
    """A process environment that reaches the dev cluster (and nothing of the person's Slurm)."""
    return {**os.environ, **dev_cluster}


def ssh(cluster: dict[str, str], command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``command`` on the dev cluster with plain OpenSSH through the ``betty-dev`` alias."""
    ssh_program = shutil.which("ssh")
    assert ssh_program, "openssh-client is not installed"
    return subprocess.run(
        [ssh_program, "-F", cluster["BETTY_DEV_SSH_CONFIG"], cluster["BETTY_DEV_SSH_HOST"], command],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def ssh_profile_in(dev_cluster: dict[str, str], folder: Path):
    """A cluster profile reaching the dev cluster over SSH, reading only under ``folder`` (its work dir there)."""
    from betty_jupyter.cluster.profiles import ClusterProfile

    return ClusterProfile(
        name="betty-dev", transport="ssh", host=dev_cluster["BETTY_DEV_SSH_HOST"],
        ssh_config=dev_cluster["BETTY_DEV_SSH_CONFIG"], readable_roots=(str(folder),),
        work_dir=str(folder / "betty-work"),
    )


@pytest.fixture
def ssh_profile(dev_cluster: dict[str, str], tmp_path: Path):
    """A cluster profile reaching the dev cluster over SSH, reading only under a test directory."""
    return ssh_profile_in(dev_cluster, tmp_path)


@pytest.fixture
def local_profile(dev_cluster: dict[str, str], tmp_path: Path):
    """A cluster profile reaching the dev cluster with local subprocesses (as on Open OnDemand)."""
    from betty_jupyter.cluster.profiles import ClusterProfile

    return ClusterProfile(
        name="betty-dev-local", transport="local", env={"SLURM_CONF": dev_cluster["SLURM_CONF"]},
        readable_roots=(str(tmp_path),), work_dir=str(tmp_path / "betty-work"),
    )


@pytest.fixture
def openssh_profile(dev_cluster: dict[str, str], tmp_path: Path):
    """A cluster profile reaching the dev cluster through the system ``ssh`` and a master it opens.

    The master's socket lives in a private directory of this test's and is ended afterwards.
    """
    import tempfile

    from betty_jupyter.cluster.profiles import ClusterProfile

    sockets = Path(tempfile.mkdtemp(prefix="bcm-"))  # short: a socket name has at most 104 bytes
    config = sockets / "config"
    config.write_text(Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text() + f"    ControlPath {sockets}/%C\n")
    yield ClusterProfile(
        name="betty-dev-openssh", transport="openssh", host=dev_cluster["BETTY_DEV_SSH_HOST"],
        ssh_config=str(config), readable_roots=(str(tmp_path),), work_dir=str(tmp_path / "betty-work"),
    )
    for master in sockets.glob("[0-9a-f]*"):
        subprocess.run(["ssh", "-o", f"ControlPath={master}", "-O", "exit", "betty-dev"], capture_output=True)
    shutil.rmtree(sockets, ignore_errors=True)


@pytest.fixture(params=["local", "ssh", "openssh"])
def profile(request: pytest.FixtureRequest):
    """Each test that takes it runs through every transport."""
    return request.getfixturevalue(f"{request.param}_profile")


@pytest.fixture
def slurm(profile):
    """A blocking SlurmClient on ``profile``'s transport, closed after the test."""
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking, run_sync

    transport = profile.open_transport()
    client = SlurmClient(transport, work_dir=profile.work_dir, readable_roots=profile.readable_roots)
    client.lookup_interval = 0.5
    yield Blocking(client)
    run_sync(transport.close())


def wait_for_job(slurm, job_id: str, until=lambda job: job.state.finished, timeout: float = 180):
    """Poll ``slurm.job`` until ``until(job)``; fails the test after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    job = slurm.job(job_id)
    while not until(job):
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} did not get there within {timeout} s; last seen {job.state.value}")
        time.sleep(0.5)
        job = slurm.job(job_id)
    return job


def betty_in_process(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``betty`` in this process; (exit code, stdout, stderr)."""
    from betty_jupyter.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def offline_context(tmp_path: Path):
    """An agent tool context in a fresh project whose cluster is never reached (transports open lazily)."""
    import asyncio

    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.cluster.profiles import ClusterProfile
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    context = ToolContext.open(ClusterProfile(name="nowhere", transport="local"), Workspace.at(tmp_path / "project"),
                               "s-1")
    yield context
    asyncio.run(context.close())


@pytest.fixture
def attacker_host():
    """Another host on 127.0.0.1 that records every request (:class:`hostile.AttackerHost`); leak tests point payloads at it."""
    from hostile import AttackerHost

    host = AttackerHost()
    try:
        yield host
    finally:
        host.close()
