"""Start, find and stop the dev cluster's daemons by the pid files it keeps for them.

A pid file records the pid and the resolved executable, so ``down`` stops exactly the
processes ``up`` started and never a stranger that reused the pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import DevClusterError, PortInUseError
from ..secret_names import without_secrets


@dataclass
class Daemon:
    """One daemon of the dev cluster, run in the foreground under Betty's pid file."""

    name: str
    argv: list[str]
    port: int | None = None
    ready: Callable[[], bool] | None = None
    env: dict[str, str] = field(default_factory=dict)


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def port_is_free(port: int) -> bool:
    """Whether this process could bind ``127.0.0.1:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class ProcessTable:
    """The daemons Betty started, tracked by pid files in one directory."""

    def __init__(self, pid_dir: Path, log_dir: Path) -> None:
        self.pid_dir = pid_dir
        self.log_dir = log_dir

    def _pid_file(self, name: str) -> Path:
        return self.pid_dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        """Where a daemon's own stdout and stderr go."""
        return self.log_dir / f"{name}.out"

    def pid(self, name: str) -> int | None:
        """The pid of ``name`` if the process Betty started is still alive, else None."""
        try:
            pid_text, exe = self._pid_file(name).read_text().split(maxsplit=1)
            pid = int(pid_text)
            alive_exe = os.readlink(f"/proc/{pid}/exe")
        except (OSError, ValueError):
            return None
        if alive_exe.removesuffix(" (deleted)") != exe.strip():
            return None
        return pid if _is_running(pid) else None

    def start(self, daemon: Daemon, timeout: float) -> int:
        """Start ``daemon`` detached from this process and wait until it is ready."""
        if daemon.port is not None and not port_is_free(daemon.port):
            raise PortInUseError(daemon.port, daemon.name)
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        exe = os.path.realpath(daemon.argv[0])
        with open(self.log_file(daemon.name), "ab") as log:
            process = subprocess.Popen(
                daemon.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Not the caller's directory, which may be deleted while the daemon runs (a checkout in
                # /tmp): slurmd's job steps would then write "Unable to get current working directory"
                # into every job's stderr.
                cwd=self.log_dir,
                # A daemon outlives the shell that started it, and any job of the same user could
                # read its /proc/PID/environ: it never holds that shell's secrets.
                env={**without_secrets(os.environ), **daemon.env},
            )
        self._pid_file(daemon.name).write_text(f"{process.pid} {exe}\n")
        ready = daemon.ready or (lambda: daemon.port is None or port_is_open(daemon.port))

        def started() -> bool:
            if process.poll() is not None:
                raise DevClusterError(
                    f"{daemon.name} exited during start-up (code {process.returncode}): "
                    f"{self.last_words(daemon.name)}"
                )
            return ready()

        if not wait_until(started, timeout):
            raise DevClusterError(
                f"{daemon.name} did not become ready within {timeout:.0f} s: {self.last_words(daemon.name)}"
            )
        pid = process.pid
        # The daemon outlives this call on purpose (stop() ends it by its pid file): let go of it
        # without the "still running" warning a forgotten child would deserve.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            del process
        return pid

    def last_words(self, name: str) -> str:
        """The last non-empty line a daemon logged, and where its full log is."""
        path = self.log_file(name)
        try:
            lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        last = lines[-1].strip() if lines else "no output"
        return f"{last} (full log: {path})"

    def stop(self, name: str, timeout: float = 20.0) -> bool:
        """Stop ``name`` (TERM, then KILL after ``timeout``); True if it was running."""
        pid = self.pid(name)
        self._pid_file(name).unlink(missing_ok=True)
        if pid is None:
            return False
        _signal(pid, signal.SIGTERM)
        if not wait_until(lambda: not _is_running(pid), timeout):
            _signal(pid, signal.SIGKILL)
            wait_until(lambda: not _is_running(pid), 5.0)
        return True


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _is_running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
