"""``DevCluster``: bring the one-node Slurm cluster and its sshd up, report on it, stop it."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import DevClusterError, PortInUseError
from . import configs, memory_limits
from .layout import CLUSTER_NAME, NODE_NAME, DevClusterLayout
from .memory_limits import MemoryEnforcement
from .packages import ensure_packages, find_program, installed_slurm_version
from .processes import Daemon, ProcessTable, port_is_free, port_is_open, wait_until

# Start order; down goes in reverse.
SERVICES = ("munge", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sshd")
START_TIMEOUT = 60.0


def default_state_dir() -> Path:
    """``$BETTY_DEV_CLUSTER_DIR``, else ``$XDG_DATA_HOME/betty/dev-cluster`` (``~/.local/share``)."""
    explicit = os.environ.get("BETTY_DEV_CLUSTER_DIR")
    if explicit:
        return Path(explicit)
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data_home) / "betty" / "dev-cluster"


def default_port_base() -> int | None:
    """``$BETTY_DEV_CLUSTER_PORT_BASE``: the ports of a new state directory; None when unset."""
    text = os.environ.get("BETTY_DEV_CLUSTER_PORT_BASE", "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise DevClusterError(
            f"BETTY_DEV_CLUSTER_PORT_BASE={text!r} is not a port number; set it to one such as 16817 or unset it"
        )
    return int(text)


@dataclass
class ServiceState:
    """One line of ``betty dev-cluster status``."""

    name: str
    pid: int | None
    port: int | None

    @property
    def running(self) -> bool:
        """Whether the process Betty started is alive."""
        return self.pid is not None


class DevCluster:
    """The dev cluster under one state directory."""

    def __init__(self, root: Path | None = None, port_base: int | None = None,
                 progress: Callable[[str], None] | None = None, new_port_base: int | None = None) -> None:
        self.layout = DevClusterLayout.load(root or default_state_dir(), port_base, new_port_base)
        self._port_base_asked = port_base
        self.processes = ProcessTable(self.layout.run / "betty", self.layout.log)
        self._progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))

    # ----- reporting -------------------------------------------------------------------
    def status(self) -> list[ServiceState]:
        """Each service, its pid when running, and its port."""
        ports = {
            "mariadb": self.layout.mariadb_port,
            "slurmdbd": self.layout.slurmdbd_port,
            "slurmctld": self.layout.slurmctld_port,
            "slurmd": self.layout.slurmd_port,
            "sshd": self.layout.ssh_port,
        }
        return [ServiceState(name, self.processes.pid(name), ports.get(name)) for name in SERVICES]

    def is_up(self) -> bool:
        """Whether every service is running."""
        return all(service.running for service in self.status())

    def node_state(self) -> str | None:
        """The node's Slurm state (``idle``, ``mixed``, ``drained`` …), or None when unknown."""
        sinfo = find_program("sinfo")
        if sinfo is None or self.processes.pid("slurmctld") is None:
            return None
        result = self._slurm([sinfo, "-h", "-N", "-n", NODE_NAME, "-o", "%T"], check=False)
        state = result.stdout.strip().splitlines()
        return state[0].rstrip("*~#!%$@^-") if result.returncode == 0 and state else None

    def memory_enforcement(self) -> MemoryEnforcement | None:
        """How ``--mem`` is enforced, as the config in force says; None before the first ``up``."""
        try:
            slurm_conf = self.layout.slurm_conf.read_text()
        except OSError:
            return None
        try:
            cgroup_conf = (self.layout.etc / "cgroup.conf").read_text()
        except OSError:
            cgroup_conf = ""
        return memory_limits.read_back(slurm_conf, cgroup_conf)

    # ----- bringing it up ---------------------------------------------------------------
    def up(self, install: bool = True) -> bool:
        """Start whatever is not running; returns False when everything already was."""
        states = self.status()
        if self._port_base_asked is not None and any(s.running for s in states):
            recorded = DevClusterLayout.load(self.layout.root).port_base
            if recorded != self._port_base_asked:
                raise DevClusterError(
                    f"the dev cluster is running with port base {recorded}; "
                    "run `betty dev-cluster down` before changing --port-base"
                )
        if all(s.running for s in states):
            self._apply_config()
            return False
        ensure_packages(install)
        self._check_ports(states)
        started = time.monotonic()
        self._prepare()
        for name in SERVICES:
            if self.processes.pid(name) is None:
                self._start(name)
        self._wait_for_node()
        self._register_user()
        self._progress(f"dev cluster up in {time.monotonic() - started:.1f} s")
        return True

    def _apply_config(self) -> None:
        """On a running cluster, a ``slurm.conf`` that this version of Betty writes differently (a partition added) is
        written and read again by ``scontrol reconfigure``: running and queued jobs stay."""
        enforcement = self.memory_enforcement()
        if enforcement is None:
            return
        wanted = configs.slurm_conf(self.layout, enforcement)
        try:
            if self.layout.slurm_conf.read_text() == wanted:
                return
        except OSError:
            return
        _write(self.layout.slurm_conf, wanted)
        self._slurm([_program("scontrol"), "reconfigure"])
        self._progress("slurm.conf changed: written and applied (scontrol reconfigure)")

    def _check_ports(self, states: list[ServiceState]) -> None:
        """Refuse before starting anything when a port we need is held by another program."""
        for state in states:
            if not state.running and state.port is not None and not port_is_free(state.port):
                raise PortInUseError(state.port, state.name)

    def _prepare(self) -> None:
        """Create directories, keys and config files (keys and the database only once)."""
        layout = self.layout
        for directory in (layout.etc, layout.run, layout.log, layout.spool / "slurmctld",
                          layout.slurmd_spool.parent, layout.slurmd_spool, layout.ssh, layout.gpu_devices,
                          layout.jupyter_config.parent, layout.run / "munge", layout.run / "betty"):
            directory.mkdir(parents=True, exist_ok=True)
            # munged distrusts group-writable directories, which a umask of 002 would give.
            os.chmod(directory, 0o755)
        os.chmod(layout.root, 0o755)
        layout.save()
        self._make_keys()
        for device in configs.gpu_device_names():
            (layout.gpu_devices / device).touch()
        version = installed_slurm_version()
        enforcement = memory_limits.on_this_machine(version)
        _write(layout.slurm_conf, configs.slurm_conf(layout, enforcement))
        _write(layout.etc / "cgroup.conf", configs.cgroup_conf(enforcement, version))
        _write(layout.etc / "gres.conf", configs.gres_conf(layout))
        _write(layout.etc / "plugstack.conf", "# No SPANK plugins on the dev cluster.\n")
        _write(layout.etc / "slurmdbd.conf", configs.slurmdbd_conf(layout, self._db_password()), mode=0o600)
        _write(layout.etc / "sshd_config", configs.sshd_config(layout))
        _write(layout.ssh_config, configs.ssh_client_config(layout))
        _write(layout.jupyter_config, configs.jupyter_server_config(layout))
        if os.geteuid() == 0:
            # sshd's privilege separation directory, which Debian's package expects.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    def _db_password(self) -> str:
        path = self.layout.etc / "db_password"
        if not path.exists():
            _write(path, secrets.token_hex(16), mode=0o600)
        return path.read_text().strip()

    def _make_keys(self) -> None:
        layout = self.layout
        munge_key = layout.etc / "munge.key"
        if not munge_key.exists():
            _write_bytes(munge_key, secrets.token_bytes(1024), mode=0o400)
        keygen = _program("ssh-keygen")
        host_key = layout.ssh / "ssh_host_ed25519_key"
        if not host_key.exists():
            _run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "betty-dev host", "-f", str(host_key)])
        if not layout.ssh_key.exists():
            _run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"{layout.user}@betty-dev", "-f", str(layout.ssh_key)])
        public_user_key = Path(f"{layout.ssh_key}.pub").read_text()
        _write(layout.ssh / "authorized_keys", public_user_key, mode=0o600)
        host_public = Path(f"{host_key}.pub").read_text().split()
        _write(layout.known_hosts, f"[127.0.0.1]:{layout.ssh_port} {host_public[0]} {host_public[1]}\n")

    def _daemon(self, name: str) -> Daemon:
        layout = self.layout
        env = {"SLURM_CONF": str(layout.slurm_conf)}
        conf = str(layout.slurm_conf)
        if name == "munge":
            return Daemon(name, [
                _program("munged"), "--foreground", f"--key-file={layout.etc}/munge.key",
                f"--socket={layout.munge_socket}", f"--pid-file={layout.run}/munged.pid",
                f"--log-file={layout.log}/munged.log", f"--seed-file={layout.run}/munge/munged.seed",
                "--force",
            ], ready=layout.munge_socket.exists)
        if name == "mariadb":
            return Daemon(name, [
                _program("mariadbd"), "--no-defaults", f"--datadir={layout.root}/mariadb",
                f"--socket={layout.mariadb_socket}", f"--port={layout.mariadb_port}",
                "--bind-address=127.0.0.1", f"--pid-file={layout.run}/mariadb.pid",
                f"--log-error={layout.log}/mariadb.log", "--skip-name-resolve",
                "--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900",
                # Without root it simply runs as this user; --user would only add a warning.
                *([f"--user={layout.user}"] if os.geteuid() == 0 else []),
            ], port=layout.mariadb_port)
        if name == "slurmdbd":
            return Daemon(name, [_program("slurmdbd"), "-D"], port=layout.slurmdbd_port, env=env)
        if name == "slurmctld":
            return Daemon(name, [_program("slurmctld"), "-D", "-f", conf], port=layout.slurmctld_port, env=env)
        if name == "slurmd":
            return Daemon(name, [_program("slurmd"), "-D", "-N", NODE_NAME, "-f", conf], port=layout.slurmd_port, env=env)
        if name == "sshd":
            return Daemon(name, [
                _program("sshd"), "-D", "-f", f"{layout.etc}/sshd_config", "-E", f"{layout.log}/sshd.log",
            ], port=layout.ssh_port)
        raise DevClusterError(f"unknown dev cluster service {name!r}")

    def _start(self, name: str) -> None:
        began = time.monotonic()
        if name == "munge":
            # A munged that was killed leaves its socket behind; readiness waits for a fresh one.
            self.layout.munge_socket.unlink(missing_ok=True)
        if name == "mariadb":
            self._init_database()
        self.processes.start(self._daemon(name), START_TIMEOUT)
        if name == "mariadb":
            self._grant_slurmdbd()
        self._progress(f"  {name:<10} started ({time.monotonic() - began:.1f} s)")

    def _init_database(self) -> None:
        datadir = self.layout.root / "mariadb"
        if (datadir / "mysql").is_dir():
            return
        self._progress("  mariadb    creating the accounting database (first start only)")
        _run([
            _program("mariadb-install-db"), "--no-defaults", f"--datadir={datadir}",
            f"--user={self.layout.user}", "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ])

    def _grant_slurmdbd(self) -> None:
        password = self._db_password()
        # The database exists before slurmdbd first connects: slurmdbd creating it itself fails on
        # Debian 13, whose libmariadb reuses the handle of the failed first connect for every later query.
        sql = (
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
            "FLUSH PRIVILEGES;"
        )
        admin = "root" if os.geteuid() == 0 else self.layout.user
        _run([_program("mariadb"), "--no-defaults", f"--socket={self.layout.mariadb_socket}",
              f"--user={admin}", "-e", sql])

    def _register_user(self) -> None:
        """Give the user, and the second user, an account in accounting (once); slurmctld registers the cluster
        itself. Associations are enforced, so a job of a user with none is refused."""
        sacctmgr = _program("sacctmgr")

        def listed(entity: str, field: str) -> list[str]:
            result = self._slurm([sacctmgr, "-n", "-P", "list", entity, f"format={field}"], check=False)
            return result.stdout.split() if result.returncode == 0 else []

        users = listed("user", "user")
        wanted = {self.layout.user: "betty", configs.SECOND_USER: configs.SECOND_ACCOUNT}
        if all(user in users for user in wanted):
            return
        if not wait_until(lambda: CLUSTER_NAME in listed("cluster", "cluster"), START_TIMEOUT, interval=0.3):
            raise DevClusterError(
                f"slurmctld did not register cluster {CLUSTER_NAME} with slurmdbd; see {self.layout.log}/slurmctld.log"
            )
        accounts = listed("account", "account")
        for user, account in wanted.items():
            if account not in accounts:
                self._slurm([sacctmgr, "-i", "add", "account", account, f"Cluster={CLUSTER_NAME}",
                             "Description=dev cluster", "Organization=betty"])
                accounts.append(account)
            if user not in users:
                self._slurm([sacctmgr, "-i", "add", "user", user, f"Account={account}", f"Cluster={CLUSTER_NAME}"])

    def _wait_for_node(self) -> None:
        def node_ready() -> bool:
            return self.node_state() in ("idle", "mixed", "allocated")

        if not wait_until(node_ready, START_TIMEOUT, interval=0.3):
            raise DevClusterError(
                f"node {NODE_NAME} did not become idle (state: {self.node_state()}); "
                f"see {self.layout.log}/slurmd.log and slurmctld.log"
            )

    def _slurm(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SLURM_CONF": str(self.layout.slurm_conf)}
        return _run(argv, env=env, check=check)

    # ----- stopping ---------------------------------------------------------------------
    def down(self, purge: bool = False) -> list[str]:
        """Stop what ``up`` started, in reverse order; returns the names stopped."""
        stopped = [name for name in reversed(SERVICES) if self.processes.stop(name)]
        if purge and self.layout.root.exists():
            spool = self.layout.slurmd_spool.parent
            shutil.rmtree(self.layout.root)
            if spool.is_relative_to("/var/tmp") and spool.exists():
                shutil.rmtree(spool)
        return stopped

    def wait_for_port_release(self, timeout: float = 10.0) -> bool:
        """Wait until no service port is open any more (after ``down``)."""
        ports = [s.port for s in self.status() if s.port is not None]
        return wait_until(lambda: not any(port_is_open(port) for port in ports), timeout)


def _program(name: str) -> str:
    path = find_program(name)
    if path is None:
        raise DevClusterError(f"{name} is not installed; run `betty dev-cluster up` as root to install it")
    return path


def _run(argv: list[str], env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevClusterError(f"`{' '.join(argv[:3])}` could not run: {exc}") from exc
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise DevClusterError(
            f"`{os.path.basename(argv[0])} {' '.join(argv[1:3])}` failed: {detail[-1] if detail else 'no output'}"
        )
    return result


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    _write_bytes(path, text.encode(), mode)


def _write_bytes(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with ``mode`` from the start (keys are never briefly world-readable)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temp, mode)
    os.replace(temp, path)
