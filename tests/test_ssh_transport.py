"""SSHTransport against the real loopback sshd: framing, pooling, host keys, dropped links."""

from __future__ import annotations

import hashlib
import subprocess
import threading
import time
from pathlib import Path

import pytest

from betty_jupyter.transport.ssh import SSHTarget, SSHTransport, trust_host_key
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.errors import CommandTimeout, HostKeyError, LinkProblem, TransportError
from conftest import run_betty
from sshd_faults import client_port, kill_connection, sshd_pids_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def target(dev_cluster) -> SSHTarget:
    return SSHTarget.from_ssh_config(dev_cluster["BETTY_DEV_SSH_HOST"], dev_cluster["BETTY_DEV_SSH_CONFIG"])


@pytest.fixture
def ssh(target):
    transport = SSHTransport(target, connect_timeout=5.0)
    yield transport
    transport.close_blocking()


def host_fingerprint(dev_cluster) -> str:
    key = Path(dev_cluster["BETTY_DEV_CLUSTER_DIR"]) / "ssh" / "ssh_host_ed25519_key.pub"
    return subprocess.run(["ssh-keygen", "-lf", str(key)], capture_output=True, text=True, check=True).stdout.split()[1]


def test_the_ssh_config_alias_resolves(target, dev_cluster):
    assert target.hostname == "127.0.0.1" and target.port == dev_cluster_port(dev_cluster)
    assert target.identity_files[0].endswith("/ssh/id_ed25519")
    assert target.known_hosts.endswith("/ssh/known_hosts")


def dev_cluster_port(dev_cluster) -> int:
    return int(Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text().split("Port ")[1].split()[0])


@pytest.mark.parametrize(
    ("argv", "stdout", "stderr", "code"),
    [
        (["printf", "no newline at the end"], "no newline at the end", "", 0),
        (["sh", "-c", "echo out; echo err >&2; exit 7"], "out\n", "err\n", 7),
        (["printf", "%s\\n", "a'; echo injected", "$(whoami)", "ü — 漢字"], "a'; echo injected\n$(whoami)\nü — 漢字\n", "", 0),
        (["sh", "-c", "printf '\\nBETTY-00000000000000000000000000000000 0\\n'"], "\nBETTY-00000000000000000000000000000000 0\n", "", 0),
        (["true"], "", "", 0),
        (["false"], "", "", 1),
    ],
)
def test_commands_are_framed_exactly(ssh, argv, stdout, stderr, code):
    result = ssh.run_blocking(tuple(argv))
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, stderr, code)


def test_large_output_arrives_whole(ssh):
    result = ssh.run_blocking(("sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' 'x'; echo; seq 1 20000 >&2"))
    assert result.stdout == "x" * 3_000_000 + "\n"
    assert result.stderr.splitlines()[-1] == "20000"


def test_a_large_upload_arrives_whole(ssh, tmp_path):
    data = hashlib.sha256(b"seed").digest() * (9 * 2**20 // 32) + b"tail"  # 9 MiB: many pipelined SFTP writes
    path = run_sync(ssh.put(data, str(tmp_path / "up" / "payload.bin")))
    assert path == str(tmp_path / "up" / "payload.bin")
    assert Path(path).read_bytes() == data  # the sshd is this machine's: the file is read back directly
    assert [p.name for p in (tmp_path / "up").iterdir()] == ["payload.bin"], "no temporary file is left"


def test_parallel_commands_share_one_connection(ssh):
    async def many():
        import asyncio

        return await asyncio.gather(*(ssh.run(["sh", "-c", f"sleep 0.3; echo {i}"]) for i in range(8)))

    results = run_sync(many())
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(8)]
    assert ssh.connections_opened == 1


def test_a_link_opened_early_is_the_first_commands_and_its_unknown_host_key_is_too(ssh, target, tmp_path):
    from dataclasses import replace

    ssh.open_early()
    assert ssh.run_blocking(("echo", "first")).stdout == "first\n"
    assert ssh.connections_opened == 1
    assert ssh.run_blocking(("echo", "second")).stdout == "second\n" and ssh.connections_opened == 1
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    stranger = SSHTransport(replace(target, known_hosts=str(empty)), connect_timeout=5.0)
    stranger.open_early()
    with pytest.raises(HostKeyError):
        stranger.run_blocking(("true",))
    assert empty.read_text() == "" and stranger.connections_opened == 0


def test_a_command_past_its_timeout_is_stopped_and_the_next_one_works(ssh):
    began = time.monotonic()
    with pytest.raises(CommandTimeout, match="did not finish within 0.5 s"):
        ssh.run_blocking(("sleep", "30"), timeout=0.5)
    assert time.monotonic() - began < 10
    assert ssh.run_blocking(("echo", "still here")).stdout == "still here\n"


def test_a_link_killed_between_commands_reconnects(ssh, dev_cluster):
    assert ssh.run_blocking(("echo", "one")).ok
    killed = kill_connection(dev_cluster_port(dev_cluster), client_port(ssh))
    assert killed, "no sshd process served the connection"
    time.sleep(0.2)
    assert ssh.run_blocking(("echo", "two")).stdout == "two\n"
    assert ssh.connections_opened == 2


def test_a_link_killed_during_a_read_is_retried(ssh, dev_cluster):
    ssh.run_blocking(("true",))
    port = client_port(ssh)
    killer = threading.Timer(0.5, kill_connection, (dev_cluster_port(dev_cluster), port))
    killer.start()
    result = ssh.run_blocking(("sh", "-c", "sleep 1.5; echo read"))
    killer.join()
    assert result.stdout == "read\n"
    assert ssh.connections_opened == 2


def test_a_link_killed_during_a_write_is_never_retried(ssh, dev_cluster, tmp_path):
    marker = tmp_path / "ran"
    ssh.run_blocking(("true",))
    killer = threading.Timer(0.5, kill_connection, (dev_cluster_port(dev_cluster), client_port(ssh)))
    killer.start()
    with pytest.raises(TransportError, match="its outcome is unknown"):
        ssh.run_blocking(("sh", "-c", f"echo x >> {marker}; sleep 1.5"), idempotent=False)
    killer.join()
    time.sleep(0.5)
    assert marker.read_text() == "x\n"  # it ran once, and was not run again


def test_submit_interrupted_mid_call_yields_exactly_one_job(ssh_profile, dev_cluster, tmp_path):
    """The link drops after sbatch was sent and before its answer came back: one job, found by its token.

    slurmctld is paused while sbatch is in flight, so the answer cannot arrive before the
    link is cut; then slurmctld resumes and creates the job the lost answer was about.
    """
    import json
    import os
    import signal

    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking

    transport = ssh_profile.open_transport()
    client = SlurmClient(transport, work_dir=ssh_profile.work_dir)
    client.lookup_interval = 0.5
    slurm = Blocking(client)
    slurm.queue()  # connect first, so the kill below hits the link that carries sbatch
    controller = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]["slurmctld"]["pid"]

    def cut_the_link_while_sbatch_waits() -> None:
        transport.after_send = None
        time.sleep(0.5)
        kill_connection(dev_cluster_port(dev_cluster), client_port(transport))
        os.kill(controller, signal.SIGCONT)

    transport.after_send = cut_the_link_while_sbatch_waits
    os.kill(controller, signal.SIGSTOP)
    try:
        ident = slurm.submit("#!/bin/bash\nsleep 1\n", extra_args=["--chdir", str(tmp_path), "--job-name=exactly-once"])
    finally:
        os.kill(controller, signal.SIGCONT)
    assert transport.connections_opened == 2  # the answer was lost; the lookup needed a new link
    queue = slurm.queue()
    assert list(queue[queue["name"] == "exactly-once"]["job_id"]) == [ident]
    transport.close_blocking()


def test_a_lost_submission_that_is_nowhere_is_an_error_not_a_resubmission(ssh_profile):
    import uuid

    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.errors import SubmissionUnknownError

    transport = ssh_profile.open_transport()
    client = SlurmClient(transport, work_dir=ssh_profile.work_dir)
    client.lookup_attempts, client.lookup_interval = 2, 0.1
    token = uuid.uuid4().hex
    with pytest.raises(SubmissionUnknownError, match=f"no job carries token betty:{token}"):
        run_sync(client._recover_submission(token, TransportError("link dropped")))
    assert run_sync(client.find_submission(token)) is None
    transport.close_blocking()


def test_an_unknown_host_key_carries_its_fingerprint_and_is_added_only_when_confirmed(target, dev_cluster, tmp_path):
    from dataclasses import replace

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    stranger = replace(target, known_hosts=str(empty))
    with pytest.raises(HostKeyError) as unknown:
        SSHTransport(stranger).run_blocking(("true",))
    expected = host_fingerprint(dev_cluster)
    assert unknown.value.fingerprint == expected and not unknown.value.changed
    assert expected in str(unknown.value) and empty.read_text() == ""
    with pytest.raises(HostKeyError):
        trust_host_key(stranger, "SHA256:not-what-the-host-presents")
    assert empty.read_text() == ""
    trust_host_key(stranger, expected)
    assert SSHTransport(stranger).run_blocking(("echo", "trusted")).stdout == "trusted\n"


def test_a_changed_host_key_is_refused(target, tmp_path):
    from dataclasses import replace

    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known.write_text(f"{target.known_hosts_name} {kind} {blob}\n")
    with pytest.raises(HostKeyError, match="DIFFERENT host key") as changed:
        SSHTransport(replace(target, known_hosts=str(known))).run_blocking(("true",))
    assert changed.value.changed


def test_a_key_the_server_does_not_know_is_refused(target, tmp_path):
    from dataclasses import replace

    key = tmp_path / "id_other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with pytest.raises(TransportError, match="refused to log in"):
        SSHTransport(replace(target, identity_files=(str(key),))).run_blocking(("true",))


def test_proxyjump_through_a_bastion(dev_cluster, tmp_path):
    config = tmp_path / "config"
    config.write_text(Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text() + (
        "\nHost behind-bastion\n    HostName 127.0.0.1\n"
        f"    Port {dev_cluster_port(dev_cluster)}\n    ProxyJump betty-dev\n"
        f"    IdentityFile {dev_cluster['BETTY_DEV_CLUSTER_DIR']}/ssh/id_ed25519\n"
        f"    UserKnownHostsFile {dev_cluster['BETTY_DEV_CLUSTER_DIR']}/ssh/known_hosts\n"
    ))
    target = SSHTarget.from_ssh_config("behind-bastion", str(config))
    assert target.proxy_jump == "betty-dev"
    transport = SSHTransport(target)
    try:
        assert transport.run_blocking(("echo", "via bastion")).stdout == "via bastion\n"
        assert len(transport._jumps) == 1
    finally:
        transport.close_blocking()


def test_sshd_stopped_entirely_is_a_clear_error_not_a_hang(ssh, dev_cluster):
    ssh.run_blocking(("true",))
    status = run_betty("dev-cluster", "status", "--json")
    import json

    sshd_pid = json.loads(status.stdout)["services"]["sshd"]["pid"]
    import os
    import signal

    try:
        os.kill(sshd_pid, signal.SIGKILL)
        kill_connection(dev_cluster_port(dev_cluster), client_port(ssh))
        time.sleep(0.3)
        began = time.monotonic()
        with pytest.raises(TransportError, match=r"127\.0\.0\.1:\d+ refused the connection") as refused:
            ssh.run_blocking(("true",))
        assert refused.value.problem == LinkProblem.REFUSED
        assert time.monotonic() - began < 30
    finally:
        restored = run_betty("dev-cluster", "up")
        assert restored.returncode == 0, restored.stderr
    assert ssh.run_blocking(("echo", "back")).stdout == "back\n"


def test_a_half_open_link_is_found_by_a_timed_probe_and_replaced(target, dev_cluster):
    """A stopped sshd keeps the TCP link open but answers nothing: only a real probe notices."""
    import os
    import signal

    transport = SSHTransport(target, connect_timeout=2.0, probe_after=0.0)
    try:
        transport.run_blocking(("true",))
        frozen = sshd_pids_for(dev_cluster_port(dev_cluster), client_port(transport))
        assert frozen
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            assert transport._client.get_transport().is_active()  # paramiko still believes in the link
            assert transport.run_blocking(("echo", "fresh link")).stdout == "fresh link\n"
            assert transport.connections_opened == 2
        finally:
            for pid in frozen:
                for signum in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        os.kill(pid, signum)
                    except ProcessLookupError:
                        pass  # already gone: the point is only that none is left stopped
    finally:
        transport.close_blocking()
