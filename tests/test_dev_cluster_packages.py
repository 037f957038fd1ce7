"""Without its Debian packages the dev cluster says exactly what to install, and starts nothing.

The packages are hidden, not removed: a private mount namespace lays an empty directory
over /usr/sbin, where Debian puts munged, mariadbd, slurmdbd, slurmctld, slurmd and sshd.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import betty_jupyter
from conftest import require

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
HIDDEN_PACKAGES = "mariadb-server munge openssh-server slurmctld slurmd slurmdbd"

# Hiding packages in a private mount namespace needs root; unshare and setpriv (util-linux) and
# Debian's python3 are then required: a machine without them fails the test, never skips it.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hiding packages in a mount namespace needs root")


@pytest.fixture(scope="module")
def world_readable_copy() -> Iterator[Path]:
    """A copy of the package that an unprivileged user can import (the checkout may not be readable)."""
    require("unshare", "setpriv", "mount", files=(SYSTEM_PYTHON,))
    top = Path(tempfile.mkdtemp(prefix="betty-copy-", dir="/tmp"))
    shutil.copytree(
        Path(betty_jupyter.__file__).parent, top / "betty_jupyter",
        ignore=shutil.ignore_patterns("labextension", "__pycache__"),
    )
    for path in [top, *top.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield top
    shutil.rmtree(top)


def betty_without_sbin(copy: Path, state_dir: Path, *args: str, as_nobody: bool) -> subprocess.CompletedProcess[str]:
    empty = Path(tempfile.mkdtemp(prefix="betty-empty-", dir="/tmp"))
    user = f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups " if as_nobody else ""
    command = (
        f"mount --bind {empty} /usr/sbin && exec {user}env -i PATH=/usr/bin:/bin HOME={state_dir} "
        f"PYTHONPATH={copy} {SYSTEM_PYTHON} -m betty_jupyter.cli dev-cluster up --state-dir {state_dir} {' '.join(args)}"
    )
    try:
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )
    finally:
        empty.rmdir()


def test_without_root_it_names_the_apt_line_and_starts_nothing(world_readable_copy):
    state_dir = Path(tempfile.mkdtemp(prefix="betty-state-", dir="/tmp"))
    os.chown(state_dir, NOBODY, NOBODY)
    try:
        result = betty_without_sbin(world_readable_copy, state_dir / "cluster", as_nobody=True)
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip().splitlines() == [
            "betty: error: the dev cluster needs Debian packages that are not installed, and installing "
            f"them needs root: run `sudo apt-get install -y {HIDDEN_PACKAGES}` and try again"
        ]
        assert not (state_dir / "cluster").exists()
    finally:
        shutil.rmtree(state_dir)


def test_as_root_with_no_install_it_names_the_missing_packages(world_readable_copy, tmp_path):
    result = betty_without_sbin(world_readable_copy, tmp_path / "cluster", "--no-install", as_nobody=False)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "betty: error: the dev cluster needs Debian packages that are not installed: "
        f"run `sudo apt-get install -y {HIDDEN_PACKAGES}` and try again"
    ]
    assert not (tmp_path / "cluster").exists()
