"""``OpenSSHTransport``: commands over the system ``ssh``, multiplexed over one master connection.

For sites where paramiko falls short: a second factor on every new connection (TOTP, Duo),
FIDO2 keys (``sk-ed25519``), short-lived OpenSSH certificates, ``Match`` and ``Include`` in
the person's ssh config. Betty runs the ``ssh`` the person already uses, with their config:

* ``ssh -G`` resolves the host alias exactly as ``ssh`` would.
* When the config names a ``ControlPath`` and a master is already running there (the one the
  person keeps open in a terminal), Betty uses it: no new login, no second factor.
  Otherwise Betty opens a master itself (at the config's ``ControlPath``, or at its own in
  ``~/.betty/ssh/``, see :func:`_own_socket`) that outlives Betty by ``ControlPersist``.
* Host keys are checked strictly against the person's known_hosts (``StrictHostKeyChecking
  yes``): an unknown or changed key raises :class:`HostKeyError` with its fingerprint.
* Every prompt ``ssh`` has (a one-time code, a key's passphrase, a security key's PIN) goes
  through ``SSH_ASKPASS`` to :func:`~betty_jupyter.transport.login.ask`; ``ssh`` never has a
  terminal to ask on.
* Commands run in a pool of persistent remote shells (``remote_shell``), each one ``ssh``
  session multiplexed over the master, so a warm read costs a write and a read on a pipe.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence, Union

from ..errors import HostKeyError, LinkProblem, TransportError
from ..secret_names import without_secrets
from .askpass import AskpassListener
from .threads import in_cluster_thread
from .remote_shell import PipeChannel, RemoteShell, ShellClosed, ShellPool, shell_command
from .ssh import SSHTarget, presented_host_key
from .interface import CommandResult

_Stream = Union[int, IO[bytes], None]


@dataclass(frozen=True)
class OpenSSHTarget:
    """A host alias as ``ssh -G`` resolves it, and the master connection Betty uses for it."""

    alias: str
    hostname: str
    port: int
    user: str
    known_hosts: str
    control_path: str
    configured_control_path: bool
    config_path: str | None = None

    @property
    def ssh_target(self) -> SSHTarget:
        """The same host as an :class:`SSHTarget` (for host-key checks and ``betty cluster trust``)."""
        return SSHTarget(alias=self.alias, hostname=self.hostname, port=self.port, user=self.user,
                         known_hosts=self.known_hosts, config_path=self.config_path)


def ssh_program() -> str:
    """The ``ssh`` client on ``PATH``; a clear error when OpenSSH's client is not installed."""
    found = shutil.which("ssh")
    if not found:
        raise TransportError("the `openssh` transport needs OpenSSH's `ssh` client; install openssh-client")
    return found


def resolve(alias: str, config_path: str | None = None, user: str | None = None,
            timeout: float = 15.0) -> OpenSSHTarget:
    """Resolve ``alias`` with ``ssh -G`` (the person's config, ``Match``/``Include`` and all)."""
    argv = [ssh_program(), *(["-F", config_path] if config_path else []), *(["-l", user] if user else []),
            "-G", "--", alias]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TransportError(f"`ssh -G {alias}` failed: {exc}") from exc
    if done.returncode != 0:
        raise TransportError(f"ssh cannot resolve {alias!r}: {done.stderr.strip() or 'no reason given'}")
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        settings.setdefault(key.lower(), value)
    control = settings.get("controlpath", "none")
    configured = control not in ("", "none")
    if not configured:
        control = str(_own_socket(f"cm-{_connection_hash(settings, alias)}"))
    return OpenSSHTarget(
        alias=alias, hostname=settings.get("hostname", alias), port=int(settings.get("port", "22")),
        user=settings.get("user", ""), known_hosts=os.path.expanduser(settings.get("userknownhostsfile",
                                                                                  "~/.ssh/known_hosts").split()[0]),
        control_path=control, configured_control_path=configured, config_path=config_path,
    )


# ssh adds a 17-character suffix while it creates a socket; a Unix socket name holds 107 bytes.
_SOCKET_PATH_MAX = 90


def _own_socket(name: str) -> Path:
    """Where Betty keeps its own master's socket: ``~/.betty/ssh``, or a shorter private directory.

    A control socket is a logged-in connection, so its directory must be this user's alone
    (0700, not a link); a home directory too deep for a socket name falls back to
    ``$XDG_RUNTIME_DIR/betty-ssh``, then ``/tmp/betty-ssh-<uid>``.
    """
    candidates = [Path.home() / ".betty" / "ssh"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        candidates.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "betty-ssh")
    candidates.append(Path(tempfile.gettempdir()) / f"betty-ssh-{os.getuid()}")
    for directory in candidates:
        if len(str(directory / name)) <= _SOCKET_PATH_MAX:
            return _private_directory(directory) / name
    raise TransportError(f"no directory for an ssh control socket has a path short enough; "
                         f"set ControlPath in your ssh config (tried {', '.join(map(str, candidates))})")


def _private_directory(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    found = os.lstat(directory)
    if stat.S_ISLNK(found.st_mode) or not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise TransportError(f"{directory} is not a directory of yours; Betty will not keep ssh sockets there")
    if stat.S_IMODE(found.st_mode) != 0o700:
        directory.chmod(0o700)
    return directory


def _connection_hash(settings: dict[str, str], alias: str) -> str:
    key = f"{settings.get('user', '')}@{settings.get('hostname', alias)}:{settings.get('port', '22')}"
    return hashlib.sha1(key.encode()).hexdigest()[:20]


class OpenSSHTransport(ShellPool):
    """Runs commands on a cluster through the system ``ssh`` and a master connection."""

    def __init__(self, alias: str, config_path: str | None = None, user: str | None = None, pool_size: int = 4,
                 connect_timeout: float = 15.0, login_shell: bool = True, control_persist: str = "30m",
                 probe_after: float = 30.0) -> None:
        super().__init__(pool_size, connect_timeout, probe_after)
        self.alias = self.where = alias
        self.config_path = config_path
        self.user = user
        self.login_shell = login_shell
        self.control_persist = control_persist
        self._master_lock = threading.Lock()  # one login at a time, however many shells want one
        self._target: OpenSSHTarget | None = None
        self._askpass: AskpassListener | None = None
        self.masters_opened = 0
        self.reused_master = False

    # ----- the Transport interface -------------------------------------------------------
    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Run ``argv`` in a pooled shell; a read is retried once on a fresh link if the link drops."""
        return await in_cluster_thread(self.run_blocking, tuple(argv), timeout, idempotent)

    async def put(self, data: bytes, remote_path: str) -> str:
        """Write ``data`` to ``remote_path`` (parents created, temp name renamed into place); returns the path."""
        return await in_cluster_thread(self._put_blocking, data, remote_path)

    async def close(self) -> None:
        """Close every shell; the master connection stays for ``ControlPersist`` (that is its point)."""
        await in_cluster_thread(self.close_blocking)

    async def __aenter__(self) -> "OpenSSHTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----- blocking core ----------------------------------------------------------------
    @property
    def target(self) -> OpenSSHTarget:
        """The resolved host (``ssh -G`` runs once, on first use)."""
        with self._lock:
            if self._target is None:
                self._target = resolve(self.alias, self.config_path, self.user, self.connect_timeout)
            return self._target

    def _new_shell(self, timeout: float) -> RemoteShell:
        self.ensure_master()
        process = self._ssh(["-T", "--", self.target.alias, shell_command(self.login_shell)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        channel = PipeChannel(process)
        try:
            return RemoteShell.over(channel, min(timeout, self.connect_timeout))
        except ShellClosed as closed:
            raise self._explained(channel.stderr_text(), closed) from closed

    def _may_open_early(self) -> bool:
        """A shell opens ahead of its first command only over a master already running: a new login may ask the
        person, which only a command asks."""
        return self._master_running(self.target)

    def ensure_master(self) -> None:
        """Make sure a master connection is up: reuse a running one, or log in once and keep it."""
        target = self.target
        with self._master_lock:
            if self._master_running(target):
                self.reused_master = self.masters_opened == 0
                return
            self._open_master(target)
            self.masters_opened += 1

    def _master_running(self, target: OpenSSHTarget) -> bool:
        if not os.path.exists(target.control_path):
            return False
        check = self._ssh(["-O", "check", "--", target.alias], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return check.wait(self.connect_timeout) == 0
        except subprocess.TimeoutExpired:
            check.kill()
            check.wait()
            return False

    def _open_master(self, target: OpenSSHTarget) -> None:
        with tempfile.TemporaryFile() as errors:
            master = self._ssh(["-f", "-N", "--", target.alias], master=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=errors)
            try:
                # -f: ssh goes to the background once logged in; its foreground part then exits 0.
                code = master.wait(self.connect_timeout + _ANSWER_TIME)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
                raise TransportError(f"logging in to {target.alias} did not finish in time; "
                                     "is the host reachable, and was the login question answered?") from None
            errors.seek(0)
            said = errors.read().decode(errors="replace")
        if code != 0:
            raise self._explained(said, None)

    def _ssh(self, args: list[str], master: bool = False, stdin: _Stream = None, stdout: _Stream = None,
             stderr: _Stream = None) -> subprocess.Popen[bytes]:
        """Start ``ssh`` with Betty's fixed options, its prompts going to the person through askpass.

        ssh keeps the first value it is given for an option, so Betty's come before the config's.
        """
        target = self.target
        control = ["-o", "ControlMaster=yes", "-o", f"ControlPersist={self.control_persist}"] if master else \
            ["-o", "ControlMaster=no"]
        argv = [ssh_program(), *(["-F", self.config_path] if self.config_path else []),
                *(["-l", self.user] if self.user else []),
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=no", "-o", f"ConnectTimeout={self.connect_timeout:g}",
                "-o", f"ControlPath={_escaped_tokens(target.control_path)}", *control, *args]
        try:
            return subprocess.Popen(argv, env=self._askpass_env(), start_new_session=True, stdin=stdin, stdout=stdout,
                                    stderr=stderr)
        except OSError as exc:
            raise TransportError(f"cannot run ssh: {exc}") from exc

    def _askpass_env(self) -> dict[str, str]:
        with self._lock:
            if self._askpass is None:
                self._askpass = AskpassListener(self.alias)
        # Nothing secret-looking reaches ssh (a config's SendEnv could pass it on to the cluster).
        env = {name: value for name, value in without_secrets(os.environ).items()
               if name not in ("DISPLAY", "SSH_ASKPASS")}
        env.update(SSH_ASKPASS=self._askpass.program, SSH_ASKPASS_REQUIRE="force",
                   BETTY_ASKPASS_SOCKET=self._askpass.socket_path)
        return env

    def _explained(self, said: str, cause: BaseException | None) -> TransportError:
        """Turn what ``ssh`` printed when it gave up into Betty's error."""
        target = self.target
        lines = [line.strip() for line in said.splitlines() if line.strip()]
        if any("host key verification failed" in line.lower() for line in lines):
            changed = any("IDENTIFICATION HAS CHANGED" in line for line in lines)
            try:
                key_type, fingerprint, _ = presented_host_key(target.ssh_target, self.connect_timeout)
            except TransportError:
                key_type, fingerprint = "unknown", "unknown"
            return HostKeyError(target.ssh_target.known_hosts_name, key_type, fingerprint, target.known_hosts,
                                changed=changed)
        asked = self._askpass
        if asked is not None and asked.refusal is not None:
            refusal, asked.refusal = asked.refusal, None
            return refusal
        reason = lines[-1] if lines else (str(cause) if cause else "ssh exited without saying why")
        if asked is not None and asked.asked and "permission denied" in reason.lower():
            return TransportError(f"{target.alias} refused the login after the answer to {asked.asked[-1].strip()!r}; "
                                  "try again (a one-time code is good for about 30 seconds)", LinkProblem.LOGIN)
        return TransportError(f"cannot log in to {target.alias} with ssh: {reason}", ssh_problem(reason))

    def close_blocking(self) -> None:
        """Close every shell and stop answering prompts."""
        self._drop_link()
        with self._lock:
            if self._askpass is not None:
                self._askpass.close()
                self._askpass = None

    def exit_master(self) -> None:
        """End the master connection now (``ssh -O exit``), for whoever wants to log out."""
        done = self._ssh(["-O", "exit", "--", self.target.alias], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done.wait(self.connect_timeout)

    def open_channel(self, host: str, port: int, timeout: float = 15.0) -> socket.socket:
        """A socket connected to ``host:port`` as the cluster sees it (``ssh -W`` over the master)."""
        self.ensure_master()
        ours, theirs = socket.socketpair()
        with theirs:
            process = self._ssh(["-W", f"{host}:{port}", "--", self.target.alias], stdin=theirs.fileno(), stdout=theirs.fileno(),
                                stderr=subprocess.DEVNULL)
        threading.Thread(target=process.wait, name="betty-ssh-forward", daemon=True).start()
        return ours

    def _put_blocking(self, data: bytes, remote_path: str) -> str:
        if "\n" in remote_path or "\0" in remote_path:
            raise TransportError(f"cannot write {remote_path!r}: the path has a line break")
        self.ensure_master()
        script = (
            f"p={shlex.quote(remote_path)}; case $p in '~/'*) p=\"$HOME/${{p#??}}\";; esac; "
            "d=$(dirname -- \"$p\"); t=\"$d/.$(basename -- \"$p\").betty-tmp\"; "
            "mkdir -p -- \"$d\" && cat > \"$t\" && mv -f -- \"$t\" \"$p\" && printf '%s' \"$p\""
        )
        process = self._ssh(["-T", "--", self.target.alias, "exec /bin/sh -c " + shlex.quote(script)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = process.communicate(data, timeout=max(60.0, self.connect_timeout))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise TransportError(f"writing {remote_path} on {self.alias} did not finish in time") from None
        if process.returncode != 0:
            reason = err.decode(errors="replace").strip().splitlines()
            raise TransportError(f"cannot write {remote_path} on {self.alias}: {reason[-1] if reason else 'ssh failed'}")
        return out.decode(errors="replace")


# What ssh prints when it gives up, and which problem each says (ssh's own words, in lower case).
_SSH_SAYS = (
    ("could not resolve hostname", LinkProblem.HOST_UNKNOWN),
    ("name or service not known", LinkProblem.HOST_UNKNOWN),
    ("connection refused", LinkProblem.REFUSED),
    ("timed out", LinkProblem.NO_ANSWER),
    ("permission denied", LinkProblem.LOGIN),
    ("too many authentication failures", LinkProblem.LOGIN),
)


def ssh_problem(reason: str) -> LinkProblem:
    """The problem the last line ``ssh`` printed names (LINK when it names none Betty knows)."""
    said = reason.lower()
    return next((problem for words, problem in _SSH_SAYS if words in said), LinkProblem.LINK)


# How long a person has to answer a login question before the login gives up.
_ANSWER_TIME = 300.0


def _escaped_tokens(path: str) -> str:
    """A resolved path as a ``ControlPath`` value (``%`` would start a token)."""
    return path.replace("%", "%%")
