"""The person's notification targets: a file of their own, closed to everyone else.

::

    <jupyter config dir>/betty_notify/              0700, the person's own
    <jupyter config dir>/betty_notify/targets.json  0600: {"targets": [{name, kind, ...}]}

A webhook's URL, a Matrix token and an SMTP password are secrets: they live in this file alone, which
Betty's file reads refuse (``SECRET_PATHS``); :meth:`Target.where` is how a target is shown anywhere else
(the host, never the path or query of a URL). Only the person adds or removes a target (``betty notify``,
``%betty notify``); the model has no tool for it.

The site's mail relay is configuration (``BettyConfig.notify``): ``smtp`` (``host:port``), ``from``, and
optionally ``user`` with ``password_file``, ``starttls``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from filelock import FileLock
from jupyter_core.paths import jupyter_config_dir

from ...errors import ConfigError, UsageError
from . import KINDS

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
"""A target's name: lower-case letters, digits, ., _ and -."""
_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9.-]{1,253}")
_ROOM = re.compile(r"![A-Za-z0-9._=-]{1,200}:[A-Za-z0-9.-]{1,200}(:\d{1,5})?")


@dataclass(frozen=True)
class Target:
    """One place word goes: ``kind`` and where (an address, or a URL kept secret)."""

    name: str
    kind: str
    address: str = ""
    """The e-mail address (``email``)."""
    url: str = ""
    """The webhook's URL (a secret), or a Matrix homeserver's."""
    room: str = ""
    """A Matrix room id (``!abc:example.org``)."""
    token: str = ""
    """A Matrix access token (a secret)."""
    added: float = field(default_factory=time.time)
    """When it was added: jobs that ended before are not announced to it."""

    def where(self) -> str:
        """Where it goes, without its secrets: ``ntfy at ntfy.sh``, ``email to a@b.org``."""
        if self.kind == "email":
            return f"email to {self.address}"
        host = urllib.parse.urlsplit(self.url).hostname or "?"
        return f"{self.kind} at {host}" + (f", room {self.room}" if self.room else "")

    def record(self) -> dict[str, Any]:
        """What ``betty notify list --json`` shows: no URL, no token."""
        return {"name": self.name, "kind": self.kind, "where": self.where(), "added": self.added}


def target(name: str, kind: str, where: str, room: str = "", token: str = "") -> Target:
    """A target checked from what a person typed; UsageError, one line, when it is not one."""
    if not NAME.fullmatch(name):
        raise UsageError(f"{name[:60]!r} is not a target name: lower-case letters, digits, ., _ and -, at most 40")
    if kind not in KINDS:
        raise UsageError(f"{kind[:40]!r} is not a kind of target; one of: {', '.join(KINDS)}")
    if kind == "email":
        if not _ADDRESS.fullmatch(where):
            raise UsageError(f"{where[:80]!r} is not an e-mail address")
        return Target(name, kind, address=where)
    parts = urllib.parse.urlsplit(where.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise UsageError(f"a {kind} target needs an http(s) URL without a user or password in it")
    if kind == "matrix":
        if not _ROOM.fullmatch(room) or not token:
            raise UsageError("a matrix target needs --room '!id:server' and --token-file with the access token")
    elif room or token:
        raise UsageError("--room and --token-file are for matrix targets only")
    return Target(name, kind, url=where.strip(), room=room, token=token)


def targets_dir() -> Path:
    """The person's directory of notification targets, beside their Jupyter configuration."""
    return Path(jupyter_config_dir()) / "betty_notify"


class TargetBook:
    """The person's targets (:func:`targets_dir` unless ``directory`` is given)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or targets_dir()
        self.path = self.directory / "targets.json"

    def listed(self) -> list[Target]:
        """Every target, oldest first (none when the file does not exist yet)."""
        if not self.path.exists():
            return []
        _check(self.directory, 0o700)
        _check(self.path, 0o600)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [_from_record(item) for item in data["targets"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"cannot read Betty's notification targets in {self.path} "
                              f"({type(error).__name__}); fix or remove the file") from None

    def get(self, name: str) -> Target:
        """The target called ``name``; UsageError when there is none."""
        for found in self.listed():
            if found.name == name:
                return found
        known = ", ".join(found.name for found in self.listed()) or "none"
        raise UsageError(f"no notification target called {name[:60]!r}; there are: {known}")

    def add(self, new: Target) -> None:
        """Keep ``new``; UsageError when its name is taken."""
        with self._changing():
            kept = self.listed()
            if any(found.name == new.name for found in kept):
                raise UsageError(f"there is already a target called {new.name!r}: remove it first "
                                 f"(betty notify remove {new.name}) or choose another name")
            self._write([*kept, new])

    def remove(self, name: str) -> Target:
        """Forget the target called ``name``; UsageError when there is none."""
        with self._changing():
            gone = self.get(name)
            self._write([found for found in self.listed() if found.name != name])
        return gone

    @contextmanager
    def _changing(self) -> Iterator[None]:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check(self.directory, 0o700)
        with FileLock(self.directory / ".lock", mode=0o600):
            yield

    def _write(self, targets: list[Target]) -> None:
        body = {"targets": [{key: value for key, value in vars(found).items() if value != ""} for found in targets]}
        temp = self.directory / f".targets.{secrets.token_hex(6)}.tmp"
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as file:
            file.write(json.dumps(body, indent=2) + "\n")
        os.replace(temp, self.path)


def _from_record(item: Mapping[str, Any]) -> Target:
    kind = str(item["kind"])
    if kind not in KINDS or not NAME.fullmatch(str(item["name"])):
        raise ValueError("unknown target")
    return Target(str(item["name"]), kind, str(item.get("address", "")), str(item.get("url", "")),
                  str(item.get("room", "")), str(item.get("token", "")), float(item.get("added", 0)))


def _check(path: Path, mode: int) -> None:
    """``path`` is the person's own and closed to everyone else (no link), or nothing in it is trusted."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & ~mode:
        raise ConfigError(f"{path} must be yours and readable by you alone (chmod {mode:o}); "
                          "Betty sends no notification through it until it is")


@dataclass(frozen=True)
class Relay:
    """The site's mail relay, from ``BettyConfig.notify``."""

    host: str
    port: int
    sender: str
    user: str = ""
    password_file: str = ""
    starttls: bool = False

    def password(self) -> str:
        """The relay's password, read from its file when it is sent (never kept, never shown)."""
        if not self.password_file:
            return ""
        try:
            return Path(os.path.expanduser(self.password_file)).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigError(f"cannot read the mail relay's password file ({error.strerror})") from None


def relay_from(settings: Mapping[str, Any]) -> Relay | None:
    """The relay ``BettyConfig.notify`` names (``smtp``: ``host:port``), or None; ConfigError when malformed."""
    smtp = settings.get("smtp")
    if not smtp:
        return None
    host, _, port = str(smtp).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"BettyConfig.notify.smtp must be host:port, like relay.example.org:25, not {str(smtp)[:60]!r}")
    sender = str(settings.get("from") or "")
    if not _ADDRESS.fullmatch(sender):
        raise ConfigError("BettyConfig.notify.from must be the address Betty's mail comes from")
    return Relay(host, int(port), sender, str(settings.get("user") or ""), str(settings.get("password_file") or ""),
                 bool(settings.get("starttls", False)))
