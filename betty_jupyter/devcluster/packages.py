"""The Debian packages the dev cluster needs, found by their programs, installed when root."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from typing import NamedTuple

from ..errors import DevClusterError, MissingPackagesError

# program -> the Debian package that ships it
PROGRAMS = {
    "munged": "munge",
    "mariadbd": "mariadb-server",
    "mariadb-install-db": "mariadb-server",
    "mariadb": "mariadb-client",
    "slurmdbd": "slurmdbd",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "sacctmgr": "slurm-client",
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}

# Daemons live in sbin, which a normal user's PATH often lacks.
_SBIN = ("/usr/sbin", "/sbin")


def search_path() -> str:
    """PATH plus the sbin directories where Debian installs daemons."""
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join([p for p in parts if p] + [d for d in _SBIN if d not in parts])


def find_program(name: str) -> str | None:
    """Absolute path of ``name``, or None."""
    return shutil.which(name, path=search_path())


class SlurmVersion(NamedTuple):
    """A Slurm release, compared as numbers: ``SlurmVersion(22, 5, 8)`` is 22.05.8."""

    major: int
    minor: int
    micro: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"


def parse_slurm_version(text: str) -> SlurmVersion:
    """The release in ``slurmd -V``'s answer: ``slurm-wlm 22.05.8`` (Debian) or ``slurm 24.11.5``."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if match is None:
        shown = text.strip().splitlines()[0][:80] if text.strip() else "nothing"
        raise DevClusterError(f"`slurmd -V` printed {shown!r}, not a Slurm version; reinstall the slurmd package")
    major, minor, micro = (int(part) for part in match.groups())
    return SlurmVersion(major, minor, micro)


def installed_slurm_version() -> SlurmVersion:
    """The release of the installed slurmd, which reads the dev cluster's ``cgroup.conf``."""
    slurmd = find_program("slurmd")
    if slurmd is None:
        raise MissingPackagesError(["slurmd"], "the dev cluster needs Debian packages that are not installed")
    try:
        result = subprocess.run([slurmd, "-V"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevClusterError(f"`slurmd -V` could not run: {exc}") from exc
    return parse_slurm_version(result.stdout or result.stderr)


def missing_packages() -> list[str]:
    """Debian packages whose programs are not found, sorted and without repeats."""
    return sorted({package for program, package in PROGRAMS.items() if find_program(program) is None})


def ensure_packages(install: bool = True) -> list[str]:
    """Install missing packages when root (returns what was installed); otherwise explain.

    Raises :class:`MissingPackagesError` naming the exact ``apt-get install`` line to run.
    """
    missing = missing_packages()
    if not missing:
        return []
    if not install:
        raise MissingPackagesError(missing, "the dev cluster needs Debian packages that are not installed")
    if os.geteuid() != 0:
        raise MissingPackagesError(
            missing, "the dev cluster needs Debian packages that are not installed, and installing them needs root"
        )
    if shutil.which("apt-get") is None:
        raise MissingPackagesError(missing, "the dev cluster needs Debian packages and this machine has no apt-get")
    print(f"Installing Debian packages: {' '.join(missing)}", file=sys.stderr, flush=True)
    _apt_install(missing)
    still = missing_packages()
    if still:
        raise MissingPackagesError(still, "apt-get finished but these packages' programs are still missing")
    return missing


# The locks apt and dpkg hold while they run.
APT_LOCKS = (
    "/var/lib/dpkg/lock-frontend",
    "/var/lib/dpkg/lock",
    "/var/lib/apt/lists/lock",
    "/var/cache/apt/archives/lock",
)


def apt_busy(locks: tuple[str, ...] = APT_LOCKS) -> bool:
    """True while another process (a fresh machine's unattended-upgrades, say) holds one of ``locks``."""
    for path in locks:
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing releases a lock this process took
    return False


def _apt_get(args: list[str], env: dict[str, str], wait_s: float = 600.0) -> int:
    """Run ``apt-get ARGS`` once no other apt holds its locks; again if one took a lock meanwhile."""
    deadline = time.monotonic() + wait_s
    said = False
    for _attempt in range(3):
        while apt_busy() and time.monotonic() < deadline:
            if not said:
                print("Waiting for another apt-get or dpkg to finish", file=sys.stderr, flush=True)
                said = True
            time.sleep(2)
        command = ["apt-get", "-o", f"DPkg::Lock::Timeout={int(wait_s)}", *args]
        returncode = subprocess.run(command, env=env, stdout=sys.stderr).returncode
        if returncode == 0 or not apt_busy():
            return returncode
    return returncode


def _apt_install(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["install", "-y", "-q", "--no-install-recommends", *packages]
    if _apt_get(install, env) == 0:
        return
    # A fresh machine often has no package lists yet: update once and try again.
    _apt_get(["update", "-q"], env)
    if _apt_get(install, env) != 0:
        raise MissingPackagesError(packages, "apt-get could not install the dev cluster's packages")
