"""Where the dev cluster keeps its files and which ports it listens on."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import DevClusterError

CLUSTER_NAME = "betty-dev"
NODE_NAME = "betty-node"
SSH_ALIAS = "betty-dev"
DEFAULT_PORT_BASE = 16817
# Placeholder GPUs: the gpu partition offers two types so tests can tell them apart.
GPUS = {"a100": 4, "h100": 2}

_SETTINGS_FILE = "cluster.json"


@dataclass(frozen=True)
class DevClusterLayout:
    """The dev cluster's settings and every path derived from its state directory."""

    root: Path
    port_base: int
    user: str
    hostname: str

    # Ports, mirroring Slurm's own 6817/6818/6819 layout.
    @property
    def slurmctld_port(self) -> int:
        """TCP port of slurmctld."""
        return self.port_base

    @property
    def slurmd_port(self) -> int:
        """TCP port of slurmd."""
        return self.port_base + 1

    @property
    def slurmdbd_port(self) -> int:
        """TCP port of slurmdbd."""
        return self.port_base + 2

    @property
    def mariadb_port(self) -> int:
        """TCP port of MariaDB (loopback only)."""
        return self.port_base + 3

    @property
    def ssh_port(self) -> int:
        """TCP port of the loopback OpenSSH server."""
        return self.port_base + 4

    # Directories and files.
    @property
    def etc(self) -> Path:
        """Generated configuration files."""
        return self.root / "etc"

    @property
    def run(self) -> Path:
        """Sockets and pid files."""
        return self.root / "run"

    @property
    def log(self) -> Path:
        """Every daemon's log."""
        return self.root / "log"

    @property
    def spool(self) -> Path:
        """Slurm's state and spool directories."""
        return self.root / "spool"

    @property
    def slurmd_spool(self) -> Path:
        """slurmd's spool, where each job's script lies while it runs. Every user whose jobs run must be able to
        reach it (slurmd runs the script as them), so a state directory under a private one, such as root's
        ``/root/.local/share/betty``, keeps its spool in ``/var/tmp`` instead, named after the state directory."""
        if all(os.stat(folder).st_mode & 0o001 for folder in self.root.parents if folder.exists()):
            return self.spool / "slurmd"
        mark = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"betty-dev-cluster-{mark}" / "slurmd"

    @property
    def ssh(self) -> Path:
        """Host keys, the user's key pair, known_hosts and the ssh config file."""
        return self.root / "ssh"

    @property
    def slurm_conf(self) -> Path:
        """The cluster's ``slurm.conf`` (export it as ``SLURM_CONF``)."""
        return self.etc / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        """munged's socket, named in slurm.conf's ``AuthInfo``."""
        return self.run / "munge" / "munge.socket.2"

    @property
    def mariadb_socket(self) -> Path:
        """MariaDB's socket, used for administration only."""
        return self.run / "mariadb.sock"

    @property
    def ssh_config(self) -> Path:
        """An ssh config file with the ``betty-dev`` host alias."""
        return self.ssh / "config"

    @property
    def ssh_key(self) -> Path:
        """The private key generated for the current user."""
        return self.ssh / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        """known_hosts holding the loopback sshd's host key."""
        return self.ssh / "known_hosts"

    @property
    def gpu_devices(self) -> Path:
        """Placeholder files standing in for GPU device nodes."""
        return self.root / "dev"

    @property
    def jupyter_config(self) -> Path:
        """Betty's config for this cluster (export it as ``BETTY_CONFIG``)."""
        return self.root / "jupyter" / "jupyter_server_config.json"

    def env(self) -> dict[str, str]:
        """Variables a shell, a test or Jupyter needs to use this cluster."""
        return {
            "SLURM_CONF": str(self.slurm_conf),
            "BETTY_DEV_CLUSTER_DIR": str(self.root),
            "BETTY_DEV_SSH_CONFIG": str(self.ssh_config),
            "BETTY_DEV_SSH_HOST": SSH_ALIAS,
            "BETTY_CONFIG": str(self.jupyter_config),
        }

    def save(self) -> None:
        """Record the settings so later commands use the same ports."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o755)
        settings = {"port_base": self.port_base, "user": self.user, "hostname": self.hostname}
        (self.root / _SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")

    @classmethod
    def load(cls, root: Path, port_base: int | None = None, new_port_base: int | None = None) -> "DevClusterLayout":
        """The layout recorded under ``root``, or a new one (not yet saved) if there is none.

        ``port_base`` overrides the recorded ports; callers refuse that while the cluster runs.
        ``new_port_base`` applies only to a state directory that records no ports yet: a
        directory keeps the ports it was first brought up with.
        """
        root = _checked_root(root)
        settings_file = root / _SETTINGS_FILE
        recorded: dict[str, object] = {}
        if settings_file.exists():
            try:
                recorded = json.loads(settings_file.read_text())
            except (OSError, ValueError) as exc:
                raise DevClusterError(
                    f"{settings_file} is unreadable ({exc}); remove it or run `betty dev-cluster down --purge`"
                ) from exc
        fallback = new_port_base if new_port_base is not None else DEFAULT_PORT_BASE
        base = port_base if port_base is not None else int(str(recorded.get("port_base", fallback)))
        if not 1024 <= base <= 65530:
            raise DevClusterError(f"--port-base {base} is out of range; pick a number from 1024 to 65530")
        return cls(
            root=root,
            port_base=base,
            user=getpass.getuser(),
            hostname=socket.gethostname().split(".")[0],
        )

    def as_dict(self) -> dict[str, object]:
        """Settings and ports, for ``--json`` output."""
        data = asdict(self)
        data["root"] = str(self.root)
        data["ports"] = {
            "slurmctld": self.slurmctld_port,
            "slurmd": self.slurmd_port,
            "slurmdbd": self.slurmdbd_port,
            "mariadb": self.mariadb_port,
            "ssh": self.ssh_port,
        }
        return data


def _checked_root(root: Path) -> Path:
    root = Path(os.path.abspath(os.path.expanduser(str(root))))
    text = str(root)
    # slurm.conf and sshd_config cannot quote paths: refuse what they would split or misread.
    if any(ch.isspace() or ch in "#\"'=\\" for ch in text) or not text.isascii():
        raise DevClusterError(
            f"state directory {text!r} contains spaces, quotes or non-ASCII characters, which "
            "Slurm's config files cannot hold; pick a plain path with --state-dir"
        )
    return root
