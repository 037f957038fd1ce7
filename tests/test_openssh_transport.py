"""The openssh transport against the dev cluster's sshd: resolution, framing, host keys, a lost master.

(Its second-factor logins are in ``test_second_factor.py``; every test that takes the
``profile`` fixture runs over it too.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from betty_jupyter.transport.openssh import OpenSSHTransport, resolve
from betty_jupyter.transport.ssh import trust_host_key
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.errors import HostKeyError, TransportError
from second_factor import control_dir  # noqa: F401 (a fixture)
from test_ssh_transport import host_fingerprint

pytestmark = pytest.mark.cluster


def site_config(dev_cluster, control_dir: Path, **changes: str) -> Path:
    """The dev cluster's ssh config with this test's ControlPath and ``changes`` (option → value)."""
    lines = []
    for line in Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text().splitlines():
        option = line.strip().split(" ", 1)[0]
        if option in changes:
            line = f"    {option} {changes.pop(option)}"
        lines.append(line)
    lines += [f"    {option} {value}" for option, value in changes.items()]
    lines.append(f"    ControlPath {control_dir}/%C")
    config = control_dir / "config"
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.fixture
def openssh(dev_cluster, control_dir):
    transport = OpenSSHTransport(dev_cluster["BETTY_DEV_SSH_HOST"], str(site_config(dev_cluster, control_dir)),
                                 connect_timeout=10.0)
    yield transport
    transport.close_blocking()


def test_the_alias_resolves_as_ssh_resolves_it(dev_cluster, control_dir):
    target = resolve(dev_cluster["BETTY_DEV_SSH_HOST"], str(site_config(dev_cluster, control_dir)))
    port = int(re.search(r"Port (\d+)", Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text())[1])
    assert (target.hostname, target.port) == ("127.0.0.1", port)
    assert target.known_hosts.endswith("/ssh/known_hosts") and target.configured_control_path
    assert target.control_path.startswith(f"{control_dir}/") and "%" not in target.control_path
    with pytest.raises(TransportError, match="ssh cannot resolve"):
        resolve("-oProxyCommand=touch /tmp/pwned")


@pytest.mark.parametrize("argv, stdout, stderr, code", [
    (("printf", "%s|", "a b", "it's", "$HOME", "`id`", "x\ny"), "a b|it's|$HOME|`id`|x\ny|", "", 0),
    (("sh", "-c", "echo out; echo err >&2; exit 3"), "out\n", "err\n", 3),
    (("printf", "no newline at the end"), "no newline at the end", "", 0),
])
def test_commands_are_framed_exactly(openssh, argv, stdout, stderr, code):
    result = openssh.run_blocking(argv)
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, stderr, code)


def test_large_output_arrives_whole(openssh):
    result = openssh.run_blocking(("head", "-c", "3000000", "/dev/zero"))
    assert result.ok and len(result.stdout) == 3_000_000


def test_a_master_that_went_away_is_opened_again_for_a_read(openssh):
    assert openssh.run_blocking(("true",)).ok and openssh.masters_opened == 1
    openssh.exit_master()  # the link is gone, as after a laptop's sleep
    assert openssh.run_blocking(("echo", "again")).stdout == "again\n"
    assert openssh.masters_opened == 2


def test_a_master_lost_during_a_write_is_never_retried(openssh):
    assert openssh.run_blocking(("true",)).ok
    openssh.after_send = openssh.exit_master  # the link goes right after the command went out
    with pytest.raises(TransportError, match="outcome is unknown"):
        openssh.run_blocking(("sh", "-c", "sleep 1; echo written"), idempotent=False)


def test_an_unknown_host_key_carries_its_fingerprint_and_is_added_only_when_confirmed(dev_cluster, control_dir):
    empty = control_dir / "known_hosts"
    empty.write_text("")
    config = site_config(dev_cluster, control_dir, UserKnownHostsFile=str(empty))
    with pytest.raises(HostKeyError) as unknown:
        OpenSSHTransport(dev_cluster["BETTY_DEV_SSH_HOST"], str(config)).run_blocking(("true",))
    expected = host_fingerprint(dev_cluster)
    assert unknown.value.fingerprint == expected and not unknown.value.changed and empty.read_text() == ""
    trust_host_key(resolve(dev_cluster["BETTY_DEV_SSH_HOST"], str(config)).ssh_target, expected)
    trusted = OpenSSHTransport(dev_cluster["BETTY_DEV_SSH_HOST"], str(config))
    assert trusted.run_blocking(("echo", "trusted")).stdout == "trusted\n"
    trusted.close_blocking()


def test_a_changed_host_key_is_refused_even_when_the_config_says_not_to_check(dev_cluster, control_dir):
    other = control_dir / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = control_dir / "known_hosts"
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    port = int(re.search(r"Port (\d+)", Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text())[1])
    known.write_text(f"[127.0.0.1]:{port} {kind} {blob}\n")
    config = site_config(dev_cluster, control_dir, UserKnownHostsFile=str(known), StrictHostKeyChecking="no")
    with pytest.raises(HostKeyError, match="DIFFERENT host key") as changed:
        OpenSSHTransport(dev_cluster["BETTY_DEV_SSH_HOST"], str(config)).run_blocking(("true",))
    assert changed.value.changed and changed.value.fingerprint == host_fingerprint(dev_cluster)


def test_a_key_the_server_does_not_know_is_one_line(dev_cluster, control_dir):
    key = control_dir / "id_other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = site_config(dev_cluster, control_dir, IdentityFile=str(key))
    with pytest.raises(TransportError) as refused:
        OpenSSHTransport(dev_cluster["BETTY_DEV_SSH_HOST"], str(config)).run_blocking(("true",))
    message = str(refused.value)
    assert "\n" not in message and "Permission denied" in message
