"""The credentials Betty issues to MCP clients: one per client, named, listed, revocable, kept only as a hash.

An MCP client (Claude Code, jupyter-ai, an IDE) is another agent, not the person: it never gets the
Jupyter server's token, which answers cards and opens terminals and kernels. It gets a credential
of its own, accepted by ``/betty/mcp`` and by nothing else (``docs/security.md``)::

    <jupyter config dir>/betty_mcp/                 0700, the person's own
    <jupyter config dir>/betty_mcp/credentials.json 0600: {"credentials": [{name, sha256, server, created}]}

The clear credential is shown once, when it is made; the file keeps its SHA-256 (a credential is 32
random bytes, so a hash needs no salt) and the URL of the Jupyter server it was made for, which is
the only server ``betty mcp`` sends it to. A credential is checked against every hash in constant
time. The file is read at each check, so a revoked credential stops working at the next request.
The directory and the file must belong to the person and be closed to everyone else, or nothing in
them is trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import stat
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock
from jupyter_core.paths import jupyter_config_dir

from .errors import ConfigError, UsageError

PREFIX = "betty-mcp-"
"""How every credential starts: a person (or a secret scanner) recognises one at a glance."""
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
"""A credential's name: the client it was made for, in lower-case letters, digits, ., _ and -."""
_SHAPE = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class McpCredential:
    """One MCP client's credential as Betty keeps it: its name, hash, server and when it was made."""

    name: str
    sha256: str
    server: str
    created: float

    @property
    def caller(self) -> str:
        """How cards and the action log name what this credential asked: ``mcp:NAME``."""
        return f"mcp:{self.name}"


def credentials_dir() -> Path:
    """The person's directory of MCP credentials, beside their Jupyter configuration."""
    return Path(jupyter_config_dir()) / "betty_mcp"


def digest(token: str) -> str:
    """The SHA-256 that is kept of a credential."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def server_url(url: str) -> str:
    """``url`` as a Jupyter server's URL a credential may be sent to: http(s), ending in ``/``, no query, no
    user; plain http only to this machine (loopback). UsageError, one line, otherwise."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{url[:80]!r} is not a Jupyter server's URL (http://127.0.0.1:8888/ or https://…)")
    host = parts.netloc.rpartition("@")[2].lower()
    page = _PAGE.match(parts.path)
    if page:  # JupyterLab's address bar (…/lab/, …/lab?token=…, …/tree/x.ipynb) or the MCP endpoint itself
        what = "Betty's own endpoint" if page["page"] == "betty" else "a JupyterLab page"
        raise UsageError(f"that is {what}, not the Jupyter server's URL: give {parts.scheme}://{host}{page['base']}/ "
                         "(no ?token=: the client gets a credential of its own)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError("give the Jupyter server's URL without a user, a token or a query "
                         f"(like {parts.scheme}://{host}{parts.path.rstrip('/')}/)")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise UsageError(f"{parts.hostname} is another machine: a credential goes there only over https, "
                         "never plain http (or reach it through an SSH tunnel to 127.0.0.1)")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.lower(), parts.path.rstrip("/") + "/", "", ""))


_PAGE = re.compile(r"^(?P<base>.*?)/(?P<page>lab|tree|notebooks|doc|edit|betty)(/.*)?$")
"""A path that ends in one of the pages a Jupyter server serves (JupyterLab's, Notebook's, Betty's) rather than at
the server's own base URL."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class McpCredentials:
    """The person's MCP credentials (:func:`credentials_dir` unless ``directory`` is given)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or credentials_dir()
        self.path = self.directory / "credentials.json"

    def add(self, name: str, server: str) -> tuple[McpCredential, str]:
        """A new credential named ``name`` for the Jupyter server at ``server``: its record and the clear
        credential, which is shown once and kept nowhere. UsageError for a bad or taken name."""
        if not NAME.fullmatch(name):
            raise UsageError(f"{name[:60]!r} is not a credential name: lower-case letters, digits, ., _ and -, "
                             "at most 40, like claude-code")
        token = PREFIX + secrets.token_urlsafe(32)
        made = McpCredential(name, digest(token), server_url(server), time.time())
        with self._changing():
            kept = self.listed()
            if any(credential.name == name for credential in kept):
                raise UsageError(f"there is already a credential called {name!r}: revoke it first "
                                 f"(betty mcp token revoke {name}) or choose another name")
            self._write([*kept, made])
        return made, token

    def listed(self) -> list[McpCredential]:
        """Every credential, oldest first (none when the file does not exist yet)."""
        return list(self._read())

    def revoke(self, name: str) -> McpCredential:
        """Forget ``name``'s credential: it stops working at the next request. UsageError when there is none."""
        with self._changing():
            kept = self.listed()
            gone = next((credential for credential in kept if credential.name == name), None)
            if gone is None:
                known = ", ".join(credential.name for credential in kept) or "none"
                raise UsageError(f"no MCP credential called {name[:60]!r}; there are: {known}")
            self._write([credential for credential in kept if credential.name != name])
        return gone

    def holder(self, token: str) -> McpCredential | None:
        """The credential ``token`` is, or None; every kept hash is compared, each in constant time."""
        if not _SHAPE.fullmatch(token):
            return None
        given = digest(token)
        found = None
        for credential in self._read():
            if hmac.compare_digest(credential.sha256, given):
                found = credential
        return found

    # ----- the file ------------------------------------------------------------------------------
    def _read(self) -> Iterator[McpCredential]:
        if not self.path.exists():
            return iter(())
        self._check(self.directory, 0o700)
        self._check(self.path, 0o600)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return iter([McpCredential(str(item["name"]), str(item["sha256"]), str(item["server"]),
                                       float(item["created"])) for item in data["credentials"]])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"cannot read Betty's MCP credentials in {self.path} ({error}); "
                              "remove the file and add the credentials again") from None

    def _check(self, path: Path, mode: int) -> None:
        """``path`` is the person's own and closed to everyone else (no link), or nothing in it is trusted."""
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & ~mode:
            raise ConfigError(f"{path} must be yours and readable by you alone (chmod {mode:o}); "
                              "Betty trusts no MCP credential in it until it is")

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Held while the file is read and rewritten: the CLI and the server may change it at once."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check(self.directory, 0o700)
        with FileLock(self.directory / ".lock", mode=0o600):
            yield

    def _write(self, credentials: list[McpCredential]) -> None:
        body: dict[str, Any] = {"credentials": [asdict(credential) for credential in credentials]}
        temp = self.directory / f".credentials.{secrets.token_hex(6)}.tmp"
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as file:
            file.write(json.dumps(body, indent=2) + "\n")
        os.replace(temp, self.path)
