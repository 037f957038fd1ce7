"""A cluster's health from what its transport did, over the package's scripted transport (fast; the real
sshd and Slurm cases are in test_server_cluster_health.py), and the words ssh's own failures map to."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from betty_jupyter.cluster.health import HEALTH_READ, check_health
from betty_jupyter.transport.openssh import ssh_problem
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.errors import CommandTimeout, HostKeyError, LinkProblem, TransportError


class FailingTransport(ScriptedTransport):
    """A transport whose every command fails with ``error``, as a link that cannot be made."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> Any:
        self.calls.append(tuple(argv))
        raise self.error


def health(transport: ScriptedTransport) -> Any:
    return run_sync(check_health("hpc", transport, CommandPolicy()))


def test_a_cluster_whose_slurm_answers_is_ok_after_one_allowlisted_read():
    cluster = ScriptedTransport().on("sinfo", stdout="cpu*\ngpu\n")
    found = health(cluster)
    assert found.ok and found.problem is None and found.message.startswith("hpc: reachable, Slurm answers (2 partitions")
    assert cluster.calls == [HEALTH_READ]
    assert found.as_dict()["problem"] is None and "fingerprint" not in found.as_dict()


def test_a_slurm_that_does_not_answer_is_named_with_its_last_line():
    said = "sinfo: error: Unable to contact slurm controller (connect failure)\n"
    found = health(ScriptedTransport().on("sinfo", stderr="debug\n" + said, exit_code=1))
    assert (found.ok, found.problem) == (False, LinkProblem.SLURM)
    assert found.message == f"hpc is reachable but Slurm does not answer: {said.strip()}"
    late = health(FailingTransport(CommandTimeout("`sinfo` did not finish")))
    assert late.problem == LinkProblem.SLURM and "did not answer `sinfo` within 20 s" in late.message


@pytest.mark.parametrize("error, problem", [
    (TransportError("no-such-host.invalid: Name or service not known", LinkProblem.HOST_UNKNOWN),
     LinkProblem.HOST_UNKNOWN),
    (TransportError("cannot reach it"), LinkProblem.LINK),
    (HostKeyError("[h]:22", "ssh-ed25519", "SHA256:abc", "/k"), LinkProblem.HOST_KEY_UNKNOWN),
    (HostKeyError("[h]:22", "ssh-ed25519", "SHA256:abc", "/k", changed=True), LinkProblem.HOST_KEY_CHANGED),
])
def test_a_link_that_fails_reports_its_own_problem_and_line(error, problem):
    found = health(FailingTransport(error))
    assert (found.ok, found.problem, found.message) == (False, problem, str(error))
    assert found.as_dict()["problem"] == problem.value
    assert found.fingerprint == (error.fingerprint if isinstance(error, HostKeyError) else None)


@pytest.mark.parametrize("said, problem", [
    ("ssh: Could not resolve hostname no-such-host.invalid: Name or service not known", LinkProblem.HOST_UNKNOWN),
    ("ssh: connect to host 127.0.0.1 port 1: Connection refused", LinkProblem.REFUSED),
    ("ssh: connect to host 10.0.0.1 port 22: Connection timed out", LinkProblem.NO_ANSWER),
    ("root@127.0.0.1: Permission denied (publickey).", LinkProblem.LOGIN),
    ("kex_exchange_identification: read: Connection reset by peer", LinkProblem.LINK),
])
def test_what_ssh_prints_names_the_problem(said, problem):
    assert ssh_problem(said) == problem


def test_a_changed_host_key_says_to_remove_the_old_one_before_trusting_the_new():
    changed = str(HostKeyError("[login.example.org]:2222", "ssh-ed25519", "SHA256:abc", "/home/a b/known_hosts",
                               changed=True))
    assert "DIFFERENT host key" in changed and "can be an attack" in changed
    assert "ssh-keygen -R '[login.example.org]:2222' -f '/home/a b/known_hosts'" in changed
    assert "add it with" not in changed
    unknown = str(HostKeyError("login.example.org", "ssh-ed25519", "SHA256:abc", "/home/me/known_hosts"))
    assert "add it with `betty cluster trust`" in unknown and "ssh-keygen" not in unknown
