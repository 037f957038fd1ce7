"""``ClusterProfile``: how Betty reaches one cluster, as plain data checked once."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .job_request import check_environments

if TYPE_CHECKING:
    from .allowlist import CommandPolicy
    from ..transport.interface import Transport

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_KEYS = {"name", "transport", "host", "user", "ssh_config", "readable_roots", "work_dir",
         "extra_commands", "gss_auth", "env", "pool_size", "job_env", "control_persist", "environments"}
_TRANSPORTS = ("ssh", "openssh", "local")


@dataclass(frozen=True)
class ClusterProfile:
    """One cluster: its transport, where to log in, what may be read, where Betty writes.

    ``transport`` is ``ssh`` (paramiko, Betty's own SSH client), ``openssh`` (the system ``ssh``
    with the person's config and ControlMaster, for sites with a second factor, security keys
    or certificates) or ``local`` (Jupyter runs on the cluster). ``env`` is set for Slurm's
    commands themselves (``SLURM_CONF``); ``job_env`` names the variables jobs get from where
    sbatch runs, beyond :data:`~betty_jupyter.cluster.job_env.JOB_NAMES`. ``control_persist``
    is how long an ``openssh`` master connection Betty opened stays after its last use.
    """

    name: str
    transport: str = "ssh"
    host: str | None = None
    user: str | None = None
    ssh_config: str | None = None
    readable_roots: tuple[str, ...] = ()
    work_dir: str = "~/.betty"
    extra_commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    gss_auth: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    pool_size: int = 4
    job_env: tuple[str, ...] = ()
    control_persist: str = "30m"
    environments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Named environments a ``%%betty run`` cell may run in (:class:`~.job_request.CellEnvironment`)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClusterProfile":
        """Check a profile from configuration; a mistake is a :class:`ConfigError` naming the field."""
        name = data.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"cluster profile {dict(data)!r} needs a `name` of letters, digits, . _ -")
        unknown = set(data) - _KEYS
        if unknown:
            raise ConfigError(f"cluster profile {name!r} has unknown fields: {', '.join(sorted(unknown))}")
        transport = data.get("transport", "ssh")
        if transport not in _TRANSPORTS:
            raise ConfigError(f"cluster profile {name!r} needs `transport` 'ssh', 'openssh' or 'local', "
                              f"not {transport!r}")
        if transport != "local" and not data.get("host"):
            raise ConfigError(f"cluster profile {name!r} uses {transport} and needs a `host` "
                              "(an alias from your ssh config)")
        if str(data.get("host") or "").startswith("-"):
            raise ConfigError(f"cluster profile {name!r}: `host` is an ssh alias or a host name, not an option")
        persist = str(data.get("control_persist", "30m"))
        if not re.fullmatch(r"(yes|no|\d+[smhdw]?)", persist):
            raise ConfigError(f"cluster profile {name!r}: `control_persist` is a time like 30m or 4h, not {persist!r}")
        roots = data.get("readable_roots", ())
        if isinstance(roots, str) or not all(isinstance(r, str) and r.startswith("/") for r in roots):
            raise ConfigError(f"cluster profile {name!r}: `readable_roots` must be a list of absolute paths")
        extras = {str(k): tuple(v) for k, v in dict(data.get("extra_commands", {})).items()}
        job_env = _job_env(name, data.get("job_env", ()))
        environments = check_environments(name, data.get("environments", {}))
        return cls(
            name=name, transport=transport, host=data.get("host"), user=data.get("user"),
            ssh_config=data.get("ssh_config"), readable_roots=tuple(roots),
            work_dir=str(data.get("work_dir", "~/.betty")), extra_commands=extras,
            gss_auth=bool(data.get("gss_auth", False)), env=dict(data.get("env", {})),
            pool_size=int(data.get("pool_size", 4)), job_env=job_env, control_persist=persist,
            environments=environments,
        )

    def to_dict(self) -> dict[str, Any]:
        """The profile as configuration (only fields that differ from the defaults)."""
        data: dict[str, Any] = {"name": self.name, "transport": self.transport}
        for key in ("host", "user", "ssh_config"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.readable_roots:
            data["readable_roots"] = list(self.readable_roots)
        if self.work_dir != "~/.betty":
            data["work_dir"] = self.work_dir
        if self.extra_commands:
            data["extra_commands"] = {k: list(v) for k, v in self.extra_commands.items()}
        if self.gss_auth:
            data["gss_auth"] = True
        if self.env:
            data["env"] = dict(self.env)
        if self.job_env:
            data["job_env"] = list(self.job_env)
        if self.control_persist != "30m":
            data["control_persist"] = self.control_persist
        if self.environments:
            data["environments"] = {name: dict(entry) for name, entry in self.environments.items()}
        return data

    def open_transport(self) -> "Transport":
        """A transport for this cluster (it connects lazily, on the first command)."""
        if self.transport == "local":
            # lazy: the local transport; the server's extension loads profiles without it
            from ..transport.local import LocalTransport

            return LocalTransport(env=dict(self.env))
        if self.transport == "openssh":
            # lazy: the OpenSSH transport; the server's extension loads profiles without it
            from ..transport.openssh import OpenSSHTransport

            return OpenSSHTransport(str(self.host), self._config_path(), user=self.user, pool_size=self.pool_size,
                                    control_persist=self.control_persist)
        from ..transport.ssh import SSHTransport  # lazy: paramiko's transport; an OpenSSH or local cluster never needs it

        return SSHTransport(self.ssh_target(), pool_size=self.pool_size)

    def ssh_target(self) -> Any:
        """The resolved SSH target (ssh and openssh profiles): where to log in, which known_hosts."""
        from ..transport.ssh import SSHTarget  # lazy: the SSH modules; the server's extension loads profiles without them

        if self.transport == "local":
            raise ConfigError(f"cluster {self.name!r} runs locally; it has no SSH host")
        if self.transport == "openssh":
            from ..transport.openssh import resolve  # lazy: the SSH modules; the server's extension loads profiles without them

            return resolve(str(self.host), self._config_path(), user=self.user).ssh_target
        return SSHTarget.from_ssh_config(str(self.host), self._config_path(), user=self.user,
                                         gss_auth=self.gss_auth or None)

    def _config_path(self) -> str | None:
        return os.path.expanduser(self.ssh_config) if self.ssh_config else None

    def policy(self, home: str | None = None) -> "CommandPolicy":
        """The read-only allowlist for this cluster."""
        from .allowlist import CommandPolicy  # lazy: the command policy; the server's extension loads profiles without it

        return CommandPolicy(readable_roots=self.readable_roots, home=home, extra_commands=self.extra_commands)


def _job_env(profile: str, names: Any) -> tuple[str, ...]:
    """The profile's ``job_env``: variable names, none of them a secret's."""
    from .job_env import name_problem  # lazy: the batch-script parser; only a profile that sets job_env needs it

    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"cluster profile {profile!r}: `job_env` must be a list of variable names")
    for name in names:
        problem = name_problem(name)
        if problem:
            raise ConfigError(f"cluster profile {profile!r}: `job_env` {problem}")
    return tuple(names)
