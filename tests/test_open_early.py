"""Opening a cluster's link ahead of its first command: the login overlaps loading Betty, and the command finds the
shell ready, meets the error opening it met, or logs in itself where the login would have asked the person."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.errors import LinkProblem, TransportError
from betty_jupyter.transport.remote_shell import LoginPostponed, ShellPool
from betty_jupyter.transport.ssh import SSHTarget, SSHTransport
from conftest import REPO


class Shell:
    """A shell that answers every command with the thread that opened it (the pool is real; the cluster is not)."""

    def __init__(self, opened_in: str) -> None:
        self.opened_in = opened_in
        self.alive = True
        self.last_used = time.monotonic()
        self.on_sent = None

    def run(self, argv, timeout):
        return self.opened_in, "", 0

    def close(self) -> None:
        self.alive = False


class Pool(ShellPool):
    """A pool whose shells open once ``go`` is set, failing with each of ``failures`` first."""

    where = "test-cluster"

    def __init__(self, *failures: Exception) -> None:
        super().__init__(pool_size=2, connect_timeout=5.0, probe_after=30.0)
        self.go = threading.Event()
        self.failures = list(failures)
        self.opened: list[Shell] = []

    def _new_shell(self, timeout: float) -> Shell:  # type: ignore[override]
        assert self.go.wait(30), "the test never let the shell open"
        if self.failures:
            raise self.failures.pop(0)
        shell = Shell(threading.current_thread().name)
        self.opened.append(shell)
        return shell


def command(pool: Pool) -> str:
    return pool.run_blocking(("squeue",)).stdout


def test_the_first_command_waits_for_the_shell_opened_early_and_uses_it() -> None:
    pool = Pool()
    pool.open_early()
    pool.open_early()  # already opening: nothing more
    answers: list[str] = []
    waiting = threading.Thread(target=lambda: answers.append(command(pool)))
    waiting.start()
    pool.go.set()
    waiting.join(30)
    assert answers == ["betty-open-test-cluster"] and len(pool.opened) == 1
    pool.open_early()  # a shell is open: nothing more
    assert command(pool) == "betty-open-test-cluster" and len(pool.opened) == 1


def test_the_error_opening_met_is_the_first_commands_own_and_the_next_command_tries_again() -> None:
    refused = TransportError("127.0.0.1:22 refused the connection", LinkProblem.REFUSED)
    pool = Pool(refused)
    pool.go.set()
    pool.open_early()
    with pytest.raises(TransportError) as raised:
        command(pool)
    assert raised.value is refused
    assert command(pool) == threading.current_thread().name and len(pool.opened) == 1


def test_a_login_that_would_ask_the_person_waits_for_the_command() -> None:
    pool = Pool(LoginPostponed("test-cluster asks a login question"))
    pool.go.set()
    pool.open_early()
    assert command(pool) == threading.current_thread().name  # the command logged in itself, and could ask
    assert len(pool.opened) == 1


def test_closing_while_a_shell_opens_early_closes_that_shell_too() -> None:
    pool = Pool()
    pool.open_early()
    closing = threading.Thread(target=pool._drop_link)
    closing.start()
    pool.go.set()
    closing.join(30)
    assert not closing.is_alive() and len(pool.opened) == 1 and not pool.opened[0].alive


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_opened_early_is_the_commands_one_line(tmp_path: Path) -> None:
    target = SSHTarget(alias="nowhere", hostname="127.0.0.1", port=closed_port(), user="nobody",
                       known_hosts=str(tmp_path / "known_hosts"))
    transport = SSHTransport(target, connect_timeout=5.0)
    try:
        transport.open_early()
        with pytest.raises(TransportError, match="refused the connection") as raised:
            run_sync(transport.run(["squeue"]))
        assert raised.value.problem is LinkProblem.REFUSED
    finally:
        transport.close_blocking()


def betty(tmp_path: Path, *words: str, port: object = None) -> subprocess.CompletedProcess[str]:
    """``betty WORDS`` with one SSH cluster whose port refuses (or is ``port``), run in an empty folder."""
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {port or closed_port()}\n  User nobody\n"
                          f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n")
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [
        {"name": "nowhere", "transport": "ssh", "host": "nowhere", "ssh_config": str(ssh_config)}]}}))
    env = {**os.environ, "BETTY_CONFIG": str(config), "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "betty_jupyter.cli", *words], cwd=tmp_path, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_betty_jobs_says_the_cluster_refused_in_one_line(tmp_path: Path) -> None:
    done = betty(tmp_path, "jobs")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("betty: error: 127.0.0.1:") and "refused the connection" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_a_bad_argument_is_refused_before_the_read_whatever_the_link(tmp_path: Path) -> None:
    done = betty(tmp_path, "jobs", "--state", "SLEEPING")
    assert done.returncode == 1 and "refused" not in done.stderr and "SLEEPING" in done.stderr, done.stderr
    done = betty(tmp_path, "why", "not-a-job")
    assert done.returncode == 1 and "refused" not in done.stderr and "not-a-job" in done.stderr, done.stderr


def test_an_unknown_cluster_is_the_reads_own_one_line(tmp_path: Path) -> None:
    for words in (["jobs", "--cluster", "elsewhere"], ["jobs", "--cluster=elsewhere"]):
        done = betty(tmp_path, *words)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 and "elsewhere" in done.stderr, done.stderr


@pytest.mark.parametrize("port", ["not-a-number", "99999", "22\x1b[2J"])
def test_a_port_that_is_not_one_is_the_reads_own_one_line(tmp_path: Path, port: str) -> None:
    done = betty(tmp_path, "jobs", port=port)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "\x1b" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f"ssh config {tmp_path / 'ssh_config'}: 'Port " in done.stderr and "is not a port number" in done.stderr
