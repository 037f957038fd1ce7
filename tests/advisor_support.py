"""The dev cluster made busy on purpose, for the advisor's tests: another user's jobs, a QOS limit, a reservation.

Everything is made with plain Slurm commands as the cluster's admin (the user the dev cluster runs as is its
SlurmUser) and undone when the test ends: jobs cancelled and gone, the QOS taken back and deleted, the reservation
deleted. The other user is :data:`OTHER_USER` (``sbatch --uid``, as root); their jobs carry :data:`HOSTILE_NAME`,
which no answer of Betty's may ever show.
"""

from __future__ import annotations

import getpass
import re
import subprocess
import time
import uuid
from typing import Callable

import pytest

from betty_jupyter.devcluster.configs import SECOND_USER
from betty_jupyter.devcluster.layout import GPUS

OTHER_USER = SECOND_USER
HOSTILE_NAME = "theirs-<img src=x onerror=alert(1)>-\x1b[31m-SECRET-PROJECT"
"""The name of every job of the other user's: markup, a terminal escape, and a word that must never be shown."""
HOSTILE_MARKER = "SECRET-PROJECT"


def names_job(text: str, ident: str) -> bool:
    """Whether ``text`` shows the number ``ident`` (a job id) on its own: not inside a date, a time of day, a
    duration or another number (job 59 is not in "08:59" or "~59 min")."""
    cleaned = re.sub(r"\d{4}-\d\d-\d\d|\d+:\d\d(:\d\d)?|~?\d+(\.\d+)?\s*(min|h|s|d)\b", " ", text)
    return re.search(rf"(?<![\w.]){re.escape(ident)}(?![0-9A-Za-z.%])", cleaned) is not None


class BusyCluster:
    """Load on the dev cluster for one test; :meth:`close` undoes all of it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {"SLURM_CONF": env["SLURM_CONF"], "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        self.user = getpass.getuser()
        self.jobs: list[str] = []
        self._undo: list[Callable[[], None]] = []

    def run(self, *argv: str, check: bool = True) -> str:
        """Run a Slurm command as the admin; its stdout."""
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=self.env,
                                stdin=subprocess.DEVNULL)
        if check:
            assert result.returncode == 0, f"{' '.join(argv[:3])}: {result.stderr.strip()}"
        return result.stdout

    def submit(self, *args: str, other: bool = False) -> str:
        """Submit a job (the other user's when ``other``), cancelled when the test ends; its id."""
        who = [f"--uid={OTHER_USER}", f"--job-name={HOSTILE_NAME}"] if other else []
        ident = self.run("sbatch", "--parsable", *who, "--chdir=/tmp", "--output=/dev/null", *args).strip()
        self.jobs.append(ident)
        return ident

    def fill_gpus(self, partition: str = "gpu") -> list[str]:
        """Every GPU of the node taken by the other user's running jobs (an hour each); their ids."""
        idents = [self.submit(f"--partition={partition}", f"--gres=gpu:{kind}:{count}", "--time=60",
                              "--wrap", "sleep 3600", other=True) for kind, count in GPUS.items()]
        for ident in idents:
            self.wait_for(ident, lambda state, reason: state == "RUNNING")
        return idents

    def qos_limit(self, limit: str = "gres/gpu=1") -> str:
        """A QOS allowing one person ``limit`` at once (MaxTRESPerUser), granted to the person; its name."""
        name = f"betty-test-{uuid.uuid4().hex[:6]}"
        self.run("sacctmgr", "-i", "add", "qos", name, f"MaxTRESPerUser={limit}")
        self._undo.append(lambda: self.run("sacctmgr", "-i", "delete", "qos", name, check=False))
        self.run("sacctmgr", "-i", "modify", "user", "where", f"name={self.user}", "set", f"qos+={name}")
        self._undo.append(lambda: self.run("sacctmgr", "-i", "modify", "user", "where", f"name={self.user}", "set",
                                           f"qos-={name}", check=False))
        return name

    def reservation(self, start: str = "now+60minutes", minutes: int = 30) -> str:
        """A reservation of every node for the person, starting at ``start``; its name."""
        name = f"betty-test-{uuid.uuid4().hex[:6]}"
        self.run("scontrol", "create", "reservation", f"ReservationName={name}", f"StartTime={start}",
                 f"Duration={minutes}", f"Users={self.user}", "Nodes=ALL", "Flags=IGNORE_JOBS")
        self._undo.append(lambda: self.run("scontrol", "delete", f"ReservationName={name}", check=False))
        return name

    def state(self, ident: str) -> tuple[str, str]:
        """The job's state and reason as squeue reports them (blank once it left the queue)."""
        text = self.run("squeue", "--noheader", f"--jobs={ident}", "--format=%T|%r", check=False).strip()
        state, _, reason = text.partition("|")
        return state, reason

    def wait_for(self, ident: str, until: Callable[[str, str], bool], timeout: float = 120) -> tuple[str, str]:
        """Poll squeue until ``until(state, reason)``; fails the test after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not until(*(seen := self.state(ident))):
            if time.monotonic() > deadline:
                pytest.fail(f"job {ident} did not get there within {timeout} s; last seen {seen}")
            time.sleep(0.3)
        return seen

    def close(self) -> None:
        """Cancel the jobs, wait until they left the queue, then undo the QOS and the reservation."""
        if self.jobs:
            self.run("scancel", *self.jobs, check=False)
            deadline = time.monotonic() + 120
            while any(self.state(ident)[0] for ident in self.jobs) and time.monotonic() < deadline:
                time.sleep(0.3)
        for undo in reversed(self._undo):
            undo()


@pytest.fixture
def busy(dev_cluster: dict[str, str]):
    """A :class:`BusyCluster` on the dev cluster, undone after the test."""
    cluster = BusyCluster(dev_cluster)
    yield cluster
    cluster.close()
