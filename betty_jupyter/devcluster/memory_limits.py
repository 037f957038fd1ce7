"""How the dev cluster holds a job to its ``--mem``: a cgroup v1 or v2 memory limit, or polling.

With a cgroup the kernel stops a job at its limit and Slurm reports ``OUT_OF_MEMORY``. Without
one, slurmstepd polls the job's memory and kills it once over, and Slurm reports ``FAILED``.
Which one a machine allows is read from its cgroup file system (:func:`detect`, a function of
the cgroup root so it can be tried on small fake trees) and the installed Slurm's version
(:func:`for_slurm`); what a running cluster uses is read back from the files it was started
with (:func:`read_back`).
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .packages import SlurmVersion

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The cgroup/v2 plugin, and its IgnoreSystemd option with it, arrived in Slurm 22.05.0.
CGROUP_V2_SINCE = SlurmVersion(22, 5, 0)
# The line in slurm.conf that names the mode in words (with the reason, when polling).
_SUMMARY = "# --mem is enforced by "
_SUMMARY_LINE = re.compile(r"^# --mem is enforced by polling \((?P<reason>[^)\n]*)\)$", re.MULTILINE)


class Enforcement(str, enum.Enum):
    """What stops a job that uses more memory than it asked for."""

    CGROUP_V1 = "cgroup v1"
    CGROUP_V2 = "cgroup v2"
    POLLING = "polling"


@dataclass(frozen=True)
class MemoryEnforcement:
    """The enforcement in use, and, when it is polling, why no cgroup could be used."""

    mode: Enforcement
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.mode.value} ({self.reason})" if self.reason else self.mode.value

    @property
    def uses_cgroups(self) -> bool:
        """Whether slurmd confines jobs with ``task/cgroup``."""
        return self.mode is not Enforcement.POLLING


def polling(reason: str) -> MemoryEnforcement:
    """Polling, because of ``reason`` (a few words: ``not root``)."""
    return MemoryEnforcement(Enforcement.POLLING, reason)


def can_create_cgroup(directory: Path) -> bool:
    """Whether a child cgroup can be made (and removed) in ``directory``; leaves nothing behind."""
    probe = directory / f"betty-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def detect(cgroup_root: Path, as_root: bool,
           can_create: Callable[[Path], bool] = can_create_cgroup) -> MemoryEnforcement:
    """Which memory cgroup slurmd could use under ``cgroup_root`` (``/sys/fs/cgroup``), whatever Slurm it is.

    Version 1 needs a writable ``memory`` hierarchy. Version 2 needs the unified hierarchy at
    the root (Slurm refuses the hybrid layout), with ``memory`` available there and enabled for
    child cgroups (or the root being the real one, where slurmd may enable it), and a writable
    ``system.slice``, where slurmd puts its jobs. Both need root.
    """
    if not as_root:
        return polling("not root")
    if (cgroup_root / "cgroup.controllers").is_file():
        return _detect_v2(cgroup_root, can_create)
    memory = cgroup_root / "memory"
    if not (memory / "memory.limit_in_bytes").is_file():
        if (cgroup_root / "unified" / "cgroup.controllers").is_file():
            return polling("hybrid cgroups without a v1 memory hierarchy")
        return polling("no cgroup memory controller")
    if not can_create(memory):
        return polling("cgroup v1 memory hierarchy is read-only")
    return MemoryEnforcement(Enforcement.CGROUP_V1)


def _detect_v2(cgroup_root: Path, can_create: Callable[[Path], bool]) -> MemoryEnforcement:
    if "memory" not in _words(cgroup_root / "cgroup.controllers"):
        return polling("cgroup v2 memory controller not available")
    # cgroup.type exists in every cgroup but the real root: here the root is a container's, whose
    # parent must already have enabled memory for it, since processes in it forbid enabling it now.
    real_root = not (cgroup_root / "cgroup.type").exists()
    if not real_root and "memory" not in _words(cgroup_root / "cgroup.subtree_control"):
        return polling("cgroup v2 memory controller not delegated")
    system_slice = cgroup_root / "system.slice"
    if not system_slice.is_dir():
        return polling("no system.slice in the cgroup v2 tree")
    if not can_create(system_slice):
        return polling("cgroup v2 hierarchy is read-only")
    return MemoryEnforcement(Enforcement.CGROUP_V2)


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def for_slurm(detected: MemoryEnforcement, version: SlurmVersion) -> MemoryEnforcement:
    """``detected``, unless the installed Slurm cannot use it."""
    if detected.mode is Enforcement.CGROUP_V2 and version < CGROUP_V2_SINCE:
        return polling(f"Slurm {version} has no cgroup v2 support")
    return detected


def on_this_machine(version: SlurmVersion) -> MemoryEnforcement:
    """The enforcement a dev cluster started now, by this user, with Slurm ``version`` gets."""
    return for_slurm(detect(CGROUP_ROOT, os.geteuid() == 0), version)


def slurm_conf_lines(enforcement: MemoryEnforcement) -> str:
    """The lines of ``slurm.conf`` that choose the enforcement, the first naming it in words."""
    summary = f"{_SUMMARY}{enforcement}"
    if enforcement.uses_cgroups:
        # The kernel stops the job at its limit, and Slurm reports OUT_OF_MEMORY.
        return f"{summary}\nTaskPlugin=task/cgroup"
    # slurmstepd's polling kills the job once over its limit, and Slurm reports FAILED.
    return f"{summary}\nTaskPlugin=task/none\nJobAcctGatherParams=OverMemoryKill"


def read_back(slurm_conf: str, cgroup_conf: str) -> MemoryEnforcement:
    """The enforcement that ``slurm.conf`` and ``cgroup.conf`` (their text) put in force."""
    if "TaskPlugin=task/cgroup" not in slurm_conf.splitlines():
        match = _SUMMARY_LINE.search(slurm_conf)
        return polling(match.group("reason") if match else "")
    if "CgroupPlugin=cgroup/v2" in cgroup_conf.splitlines():
        return MemoryEnforcement(Enforcement.CGROUP_V2)
    return MemoryEnforcement(Enforcement.CGROUP_V1)
