"""``SSHTransport``: commands over one reused paramiko connection per cluster profile.

* The ssh config file decides where to go (Host alias, HostName, User, Port, IdentityFile,
  ProxyJump, UserKnownHostsFile, GSSAPIAuthentication).
* Host keys are checked against known_hosts; an unknown or changed key raises
  :class:`HostKeyError` carrying the fingerprint, and only :func:`trust_host_key` adds one.
* A login that asks for more than a key (``AuthenticationMethods publickey,keyboard-interactive``,
  a TOTP or Duo prompt) asks the person through ``login.ask``; the connection is kept, so one
  answer serves until the link drops.
* Commands run in a small pool of persistent remote shells (see ``remote_shell``).
* A dropped link is reconnected; idempotent reads are retried once, writes never.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import inspect
import os
import posixpath
import socket
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ConfigError, HostKeyError, LinkProblem, TransportError
from ..safe_text import terminal_line
from . import paramiko_lib
from .login import keyboard_interactive_handler
from .threads import in_cluster_thread
from .remote_shell import LoginPostponed, RemoteShell, ShellClosed, ShellPool
from .interface import CommandResult


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to log in, as an ssh config file resolves a host alias."""

    alias: str
    hostname: str
    port: int = 22
    user: str | None = None
    identity_files: tuple[str, ...] = ()
    known_hosts: str = field(default_factory=lambda: os.path.expanduser("~/.ssh/known_hosts"))
    proxy_jump: str | None = None
    gss_auth: bool = False
    config_path: str | None = None

    @classmethod
    def from_ssh_config(cls, alias: str, config_path: str | None = None, user: str | None = None,
                        gss_auth: bool | None = None) -> "SSHTarget":
        """Resolve ``alias`` through ``config_path`` (default ``~/.ssh/config`` when it exists)."""
        paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
        import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

        path = config_path or os.path.expanduser("~/.ssh/config")
        config = paramiko.SSHConfig.from_path(path) if os.path.exists(path) else paramiko.SSHConfig()
        if config_path and not os.path.exists(config_path):
            raise TransportError(f"ssh config file {config_path} does not exist; check the cluster profile")
        entry = paramiko_lib.host_entry(config, alias)
        known = (entry.get("userknownhostsfile") or "~/.ssh/known_hosts").split()[0]
        port = str(entry.get("port", 22))
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TransportError(f"ssh config {path}: 'Port {terminal_line(port)}' for host {terminal_line(alias)} is "
                                 "not a port number (1-65535); fix that line")
        return cls(
            alias=alias,
            hostname=entry.get("hostname", alias),
            port=int(port),
            user=user or entry.get("user"),
            identity_files=tuple(os.path.expanduser(p) for p in entry.get("identityfile", [])),
            known_hosts=os.path.expanduser(known),
            proxy_jump=entry.get("proxyjump"),
            gss_auth=gss_auth if gss_auth is not None else entry.get("gssapiauthentication") == "yes",
            config_path=path if os.path.exists(path) else None,
        )

    @property
    def known_hosts_name(self) -> str:
        """The name this host has in known_hosts (``[host]:port`` off port 22)."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def fingerprint(key: Any) -> str:
    """OpenSSH's SHA256 fingerprint of a paramiko key (``SHA256:…``)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _PresentedKey(Exception):
    def __init__(self, key: Any) -> None:
        self.key = key


def _refusing_policy(target: SSHTarget, capture: bool = False) -> Any:
    paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
    import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

    class RefuseUnknownHost(paramiko.MissingHostKeyPolicy):
        """Never add a key silently: raise with its fingerprint so a person can decide."""

        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            if capture:
                raise _PresentedKey(key)
            raise HostKeyError(hostname, key.get_name(), fingerprint(key), target.known_hosts)

    return RefuseUnknownHost()


class SSHTransport(ShellPool):
    """Runs commands on a cluster over SSH through a pool of persistent shells."""

    def __init__(self, target: SSHTarget, pool_size: int = 4, connect_timeout: float = 15.0,
                 login_shell: bool = True, probe_after: float = 30.0) -> None:
        super().__init__(pool_size, connect_timeout, probe_after)
        self.target = target
        self.where = target.alias
        self.login_shell = login_shell
        self._client: Any = None
        self._jumps: list[Any] = []
        self.connections_opened = 0

    # ----- the Transport interface -------------------------------------------------------
    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Run ``argv`` in a pooled shell; a read is retried once on a fresh link if the link drops."""
        return await in_cluster_thread(self.run_blocking, tuple(argv), timeout, idempotent)

    async def put(self, data: bytes, remote_path: str) -> str:
        """Upload ``data`` over SFTP (parents created, temp name renamed into place); returns the path."""
        return await in_cluster_thread(self._put_blocking, data, remote_path)

    async def close(self) -> None:
        """Close every shell and the connection; closing twice is fine."""
        await in_cluster_thread(self.close_blocking)

    async def __aenter__(self) -> "SSHTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----- blocking core (runs in worker threads) ---------------------------------------
    def _new_shell(self, timeout: float) -> RemoteShell:
        for attempt in (1, 2):
            client = self._connected()
            try:
                return RemoteShell.start(client.get_transport(), self.login_shell, min(timeout, self.connect_timeout))
            except ShellClosed:
                self._drop_link()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _connected(self) -> Any:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                self._close_client()
                self._client = self._open_client(self.target)
                self.connections_opened += 1
            return self._client

    def _open_client(self, target: SSHTarget) -> Any:
        paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
        import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

        sock = None
        if target.proxy_jump:
            jump_alias = target.proxy_jump.split(",")[-1].strip()
            jump = self._open_client(SSHTarget.from_ssh_config(jump_alias, target.config_path))
            self._jumps.append(jump)
            sock = jump.get_transport().open_channel("direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0))
        client = paramiko.SSHClient()
        if os.path.exists(target.known_hosts):
            client.load_host_keys(target.known_hosts)
        client.set_missing_host_key_policy(_refusing_policy(target))
        options: dict[str, Any] = {
            "port": target.port, "username": target.user, "allow_agent": True,
            "key_filename": list(target.identity_files) or None,  # paramiko takes a list too
            "look_for_keys": not target.identity_files, "timeout": self.connect_timeout,
            "banner_timeout": self.connect_timeout, "auth_timeout": self.connect_timeout, "sock": sock,
            **_gss_options(target),
        }
        with _translated_errors(target):
            _log_in(client, target, options, ask=not self._opening_early())
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)
        return client

    def _drop_link(self) -> None:
        """Close the idle shells and the connection."""
        super()._drop_link()
        with self._lock:
            self._close_client()

    def _close_client(self) -> None:
        for client in [self._client, *reversed(self._jumps)]:
            if client is not None:
                client.close()
        self._client = None
        self._jumps.clear()

    def close_blocking(self) -> None:
        """Close every shell and the connection."""
        self._drop_link()

    def open_channel(self, host: str, port: int, timeout: float = 15.0) -> Any:
        """A ``direct-tcpip`` channel to ``host:port`` as the cluster sees it, over this connection.

        Opening one changes nothing on the cluster, so a dropped link is reconnected and the
        channel asked for once more.
        """
        paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
        import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

        for attempt in (1, 2):
            transport = self._connected().get_transport()
            try:
                return transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout)
            except paramiko.ChannelException as exc:
                raise TransportError(f"{self.target.alias} cannot reach {host}:{port} ({exc.text})") from exc
            except (paramiko.SSHException, EOFError, OSError) as exc:
                self._drop_link()
                if attempt == 2:
                    raise TransportError(f"the link to {self.target.alias} dropped while opening a forward: {exc}") from exc
        raise AssertionError("unreachable")

    def _put_blocking(self, data: bytes, remote_path: str) -> str:
        for attempt in (1, 2):
            try:
                return self._sftp_write(data, remote_path)
            except (OSError, EOFError) as exc:
                self._drop_link()
                if attempt == 2:
                    raise TransportError(f"cannot write {remote_path} on {self.target.alias}: {exc}") from exc
        raise AssertionError("unreachable")

    def _sftp_write(self, data: bytes, remote_path: str) -> str:
        with self._connected().open_sftp() as sftp:
            home = sftp.normalize(".")
            path = posixpath.join(home, remote_path[2:]) if remote_path.startswith("~/") else remote_path
            _makedirs(sftp, posixpath.dirname(path))
            temp = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.betty-tmp")
            with sftp.open(temp, "wb") as handle:
                handle.set_pipelined(True)  # one acknowledgement per write, not per 32 KiB: large uploads at link speed
                handle.write(data)
            sftp.posix_rename(temp, path)
        return path


def _log_in(client: Any, target: SSHTarget, options: dict[str, Any], ask: bool = True) -> None:
    """Connect and authenticate; keyboard-interactive prompts (after a key, or alone) go to the person, or, without
    ``ask``, end the login with :class:`LoginPostponed`."""
    paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
    import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

    asking = keyboard_interactive_handler(target.alias)
    asked: list[str] = []
    refusals: list[TransportError] = []

    def handler(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        # paramiko calls this on its own thread, where an exception would only end the link.
        if not ask:
            refusals.append(LoginPostponed(f"{target.alias} asks a login question; it is asked when a command runs"))
            return ["" for _ in prompts]
        asked.extend(prompt for prompt, _ in prompts)
        try:
            return asking(title, instructions, prompts)
        except TransportError as nobody:
            refusals.append(nobody)
            return ["" for _ in prompts]

    class AskingTransport(paramiko.Transport):
        """paramiko's client answers a second factor with ``input()``; Betty asks the person instead."""

        def auth_interactive_dumb(self, username: str, handler_: Any = None, submethods: str = "") -> list[str]:
            return self.auth_interactive(username, handler, submethods)

    try:
        try:
            client.connect(target.hostname, transport_factory=AskingTransport, **options)
        except paramiko.BadAuthenticationType as refused:
            # No key is accepted at all, but the server asks questions (password + Duo, say).
            transport = client.get_transport()
            if "keyboard-interactive" not in refused.allowed_types or transport is None or not transport.is_active():
                raise
            transport.auth_interactive(target.user or getpass.getuser(), handler)
    except paramiko.AuthenticationException as failed:
        if refusals:
            raise refusals[0] from failed
        if asked:
            raise TransportError(
                f"{target.hostname}:{target.port} refused the login after the answer to {asked[-1].strip()!r}; "
                "try again (a one-time code is good for about 30 seconds)", LinkProblem.LOGIN
            ) from failed
        raise


def _gss_options(target: SSHTarget) -> dict[str, bool]:
    """GSSAPI (Kerberos) options, where the installed paramiko still offers them."""
    if not target.gss_auth:
        return {}
    paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
    import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

    if "gss_auth" not in inspect.signature(paramiko.SSHClient.connect).parameters:
        raise ConfigError(
            f"{target.alias} asks for GSSAPI/Kerberos, which paramiko {paramiko.__version__} dropped; "
            "install `paramiko[gssapi]<5` in Betty's environment, or log in with a key"
        )
    return {"gss_auth": True, "gss_kex": True}


def _makedirs(sftp: Any, directory: str) -> None:
    if directory in ("", "/", "."):
        return
    try:
        sftp.stat(directory)
    except FileNotFoundError:
        _makedirs(sftp, posixpath.dirname(directory))
        sftp.mkdir(directory)


class _translated_errors:
    """Translate paramiko's and socket's exceptions into Betty's, once, at the boundary."""

    def __init__(self, target: SSHTarget) -> None:
        self.target = target

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, (TransportError, _PresentedKey)):
            return
        paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
        import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

        where = f"{self.target.hostname}:{self.target.port}"
        if isinstance(exc, paramiko.BadHostKeyException):
            raise HostKeyError(self.target.known_hosts_name, exc.key.get_name(), fingerprint(exc.key),
                               self.target.known_hosts, changed=True) from exc
        if isinstance(exc, paramiko.AuthenticationException):
            raise TransportError(
                f"{where} refused to log in {self.target.user or 'you'} ({exc}); check IdentityFile in your ssh config",
                LinkProblem.LOGIN,
            ) from exc
        if isinstance(exc, (socket.timeout, TimeoutError)):
            raise TransportError(f"{where} did not answer within the connect timeout; is the host reachable?",
                                 LinkProblem.NO_ANSWER) from exc
        if isinstance(exc, socket.gaierror):
            raise TransportError(f"{self.target.hostname}: {exc.strerror or exc}; check HostName for "
                                 f"{self.target.alias} in your ssh config", LinkProblem.HOST_UNKNOWN) from exc
        if _refused(exc):
            raise TransportError(f"{where} refused the connection; is sshd running there, and is the port right?",
                                 LinkProblem.REFUSED) from exc
        if isinstance(exc, (OSError, paramiko.SSHException, EOFError)):
            raise TransportError(f"cannot reach {where} ({exc}); is sshd running and the host reachable?") from exc


def _refused(exc: BaseException) -> bool:
    """Whether connecting was refused at every address the host has (paramiko gathers one error per address)."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    errors = getattr(exc, "errors", None)  # paramiko's NoValidConnectionsError
    return isinstance(errors, dict) and bool(errors) and all(isinstance(e, ConnectionRefusedError)
                                                              for e in errors.values())


def presented_host_key(target: SSHTarget, timeout: float = 15.0) -> tuple[str, str, Any]:
    """The key the host presents now: (key type, fingerprint, key), without logging in."""
    paramiko_lib.load()  # paramiko without invoke (a `Match exec` line loads it when met)
    import paramiko  # lazy: paramiko is heavy; OpenSSH clusters use this module without it

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(_refusing_policy(target, capture=True))
    try:
        with _translated_errors(target):
            client.connect(target.hostname, port=target.port, username=target.user or "betty",
                           timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                           allow_agent=False, look_for_keys=False, password="")
    except _PresentedKey as presented:
        return presented.key.get_name(), fingerprint(presented.key), presented.key
    except TransportError:
        raise
    finally:
        client.close()
    raise TransportError(f"{target.alias} is already trusted; nothing to add")


def trust_host_key(target: SSHTarget, confirmed_fingerprint: str) -> str:
    """Add the host's key to known_hosts after a person confirmed ``confirmed_fingerprint``.

    Refuses when the key the host presents now has another fingerprint.
    """
    key_type, presented, key = presented_host_key(target)
    if presented != confirmed_fingerprint:
        raise HostKeyError(target.known_hosts_name, key_type, presented, target.known_hosts, changed=True)
    os.makedirs(os.path.dirname(target.known_hosts) or ".", exist_ok=True)
    with open(target.known_hosts, "a") as known:
        known.write(f"{target.known_hosts_name} {key.get_name()} {key.get_base64()}\n")
    return presented
