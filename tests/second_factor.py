"""A login node that asks for a second factor: the dev cluster's key, then a TOTP code through PAM.

:class:`SecondFactorSshd` starts a second sshd beside the dev cluster's, on its own port, that
requires ``AuthenticationMethods publickey,keyboard-interactive``. Its PAM service runs Debian's
``pam_google_authenticator`` with a known test secret, so a test computes the code a phone
would show (:func:`totp`). The host key, the user's key and the cluster are the dev cluster's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"  # base32, as `google-authenticator` writes it
PAM_MODULE = "pam_google_authenticator.so"
ALIAS = "betty-mfa"


def totp(secret: str = SECRET, at: float | None = None) -> str:
    """The six-digit RFC 6238 code for ``secret`` at time ``at`` (now), 30-second steps."""
    key = base64.b32decode(secret)
    counter = int((time.time() if at is None else at) // 30)
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{number % 1_000_000:06d}"


def pam_module_path() -> str | None:
    """Where Debian put pam_google_authenticator (None when libpam-google-authenticator is missing)."""
    for directory in ("/lib/x86_64-linux-gnu/security", "/usr/lib/x86_64-linux-gnu/security",
                      "/lib/aarch64-linux-gnu/security", "/usr/lib/aarch64-linux-gnu/security", "/lib/security"):
        if os.path.exists(os.path.join(directory, PAM_MODULE)):
            return os.path.join(directory, PAM_MODULE)
    return None


def _sshd() -> str:
    found = shutil.which("sshd") or shutil.which("sshd", path="/usr/sbin:/sbin")
    assert found, "sshd is missing on this Debian machine"
    return found


class SecondFactorSshd:
    """An sshd on 127.0.0.1:``port`` asking for the dev cluster's key and then a TOTP code."""

    def __init__(self, cluster: dict[str, str], port: int) -> None:
        self.cluster = cluster
        self.port = port
        self.dev = Path(cluster["BETTY_DEV_CLUSTER_DIR"])
        # Short: a ControlPath inside it must stay under the 104 bytes of a Unix socket name.
        self.directory = Path(tempfile.mkdtemp(prefix="bmfa-"))
        self.service = f"betty-mfa-{port}"
        self.pam_file = Path("/etc/pam.d") / self.service
        self.process: subprocess.Popen[bytes] | None = None

    # ----- the server -----------------------------------------------------------------
    def start(self) -> "SecondFactorSshd":
        """Write the PAM service and sshd_config, start sshd and wait until it accepts connections."""
        module = pam_module_path()
        assert module, "libpam-google-authenticator is missing (scripts/install.sh installs it for the tests)"
        secret = self.directory / "totp-secret"
        secret.write_text(f'{SECRET}\n" TOTP_AUTH\n')
        secret.chmod(0o400)
        self.pam_file.write_text(
            "# A test login node's second factor (removed when the test ends).\n"
            f"auth required {module} secret={secret} user=root\n"
            "account required pam_permit.so\nsession required pam_permit.so\n"
        )
        config = self.directory / "sshd_config"
        config.write_text(self._sshd_config(with_service_option=True))
        program = _sshd()
        if subprocess.run([program, "-t", "-f", str(config)], capture_output=True).returncode != 0:
            # OpenSSH before PAMServiceName names the PAM service after the program: run it under that name.
            config.write_text(self._sshd_config(with_service_option=False))
            renamed = self.directory / self.service
            renamed.symlink_to(program)
            program = str(renamed)
        log = self.directory / "sshd.log"
        with log.open("wb") as log_file:
            self.process = subprocess.Popen([program, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                                            stderr=log_file, start_new_session=True)
        deadline = time.monotonic() + 30
        while not _accepts(self.port):
            assert self.process.poll() is None, f"sshd exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"sshd did not listen on {self.port}: {log.read_text()[-2000:]}"
            time.sleep(0.05)
        return self

    def _sshd_config(self, with_service_option: bool) -> str:
        ssh = self.dev / "ssh"
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        return (
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {ssh}/ssh_host_ed25519_key\n"
            f"PidFile {self.directory}/sshd.pid\nAuthorizedKeysFile {ssh}/authorized_keys\nAllowUsers {user}\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication yes\n"
            "AuthenticationMethods publickey,keyboard-interactive\nUsePAM yes\n"
            + (f"PAMServiceName {self.service}\n" if with_service_option else "")
            + "PermitRootLogin yes\nStrictModes no\nPrintMotd no\nMaxStartups 100:30:200\nMaxSessions 64\n"
            f"LogLevel VERBOSE\nSetEnv SLURM_CONF={self.cluster['SLURM_CONF']}\nSubsystem sftp internal-sftp\n"
        )

    def stop(self) -> None:
        """Stop sshd and remove the PAM service and every file written."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        self.pam_file.unlink(missing_ok=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "SecondFactorSshd":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- the client side ------------------------------------------------------------
    def ssh_config(self, control_path: str | None = None) -> Path:
        """An ssh config with the ``betty-mfa`` alias (and a ``ControlPath`` when given)."""
        path = self.directory / ("ssh_config_cm" if control_path else "ssh_config")
        known = self.directory / "known_hosts"
        host_key = (self.dev / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
        known.write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        path.write_text(
            f"Host {ALIAS}\n    HostName 127.0.0.1\n    Port {self.port}\n    User {user}\n"
            f"    IdentityFile {self.dev}/ssh/id_ed25519\n    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known}\n    StrictHostKeyChecking yes\n"
            + (f"    ControlPath {control_path}\n" if control_path else "")
        )
        return path

    def log(self) -> str:
        """What sshd logged so far."""
        path = self.directory / "sshd.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def login_node(dev_cluster: dict[str, str]):
    """A second sshd in front of the dev cluster that asks for a TOTP code after the key (import it to use it)."""
    from conftest import free_port_base

    if os.geteuid() != 0:
        pytest.fail("the second-factor tests add a PAM service in /etc/pam.d and run sshd: run them as root")
    with SecondFactorSshd(dev_cluster, free_port_base()) as sshd:
        yield sshd


@pytest.fixture
def control_dir():
    """A short private directory for ssh control sockets; every master in it is ended afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="bcm-"))
    yield directory
    end_masters(directory)
    shutil.rmtree(directory, ignore_errors=True)


def end_masters(directory: Path) -> None:
    """``ssh -O exit`` every control socket in ``directory``."""
    for socket_path in directory.iterdir():
        if socket_path.is_socket():
            subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "unused"], capture_output=True)
