"""A real ``jupyter server`` (or ``jupyter lab``) with Betty's extension, in its own process, and a person
answering its approvals.

The person is a thread that does what someone at the side panel does: it reads the open
approvals over REST and answers those it was told to approve.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# What ``jupyter lab`` needs to start quietly in a test: no update check, no news feed.
LAB_ARGS = ("--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=None")


class JupyterServer:
    """``jupyter server`` on 127.0.0.1 with a token, serving ``root``; stopped by :meth:`stop`.

    ``app`` is the module run with ``python -m``: ``jupyter_server`` (the server alone) or
    ``jupyterlab`` (the server with the JupyterLab front-end at ``lab``).
    """

    def __init__(self, root: Path, env: dict[str, str], runtime_dir: Path, app: str = "jupyter_server") -> None:
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.runtime_dir = runtime_dir
        self.log = (runtime_dir / f"{app}-{self.port}.log").open("w")
        argv = [sys.executable, "-m", app, "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
                f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={self.token}",
                "--ServerApp.jpserver_extensions={'betty_jupyter': True}", *(LAB_ARGS if app == "jupyterlab" else ())]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        self.process = subprocess.Popen(argv, cwd=root, env={**env, "JUPYTER_RUNTIME_DIR": str(runtime_dir)},
                                        stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.close()
                raise RuntimeError(f"{app} exited: {Path(self.log.name).read_text()[-2000:]}")
            try:
                if self.request("GET", "health").get("status") == "ok":
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()  # never leave a server behind that nobody will stop
        raise RuntimeError(f"{app} did not answer in 120 s: {Path(self.log.name).read_text()[-2000:]}")

    def request(self, method: str, route: str, body: Any = None, timeout: float = 30) -> dict[str, Any]:
        """One authenticated JSON request to ``/betty/api/<route>``, answered within ``timeout`` seconds."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}betty/api/{route}", data=data, method=method,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                text = answer.read()
        except urllib.error.HTTPError as error:
            error.close()  # it holds the connection open until closed
            raise
        return json.loads(text) if text else {}

    def stop(self) -> None:
        """Stop the server and wait for it."""
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self.log.close()


class PanelPerson(threading.Thread):
    """Approves, over REST, every open approval that ``wanted`` accepts; remembers what it answered."""

    def __init__(self, server: JupyterServer, wanted: Callable[[dict[str, Any]], bool]) -> None:
        super().__init__(name="panel-person", daemon=True)
        self.server, self.wanted = server, wanted
        self.answered: list[dict[str, Any]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        """Look every 0.2 s until stopped."""
        while not self._halt.wait(0.2):
            try:
                pending = self.server.request("GET", "approvals")["approvals"]
            except (OSError, urllib.error.HTTPError):
                continue
            for approval in pending:
                if self.wanted(approval):
                    try:
                        self.server.request("POST", f"approvals/{approval['approval_id']}", {"decision": "approved"})
                    except urllib.error.HTTPError:
                        continue  # answered meanwhile
                    self.answered.append(approval)

    def stop(self) -> None:
        """Stop looking."""
        self._halt.set()
        self.join(10)
