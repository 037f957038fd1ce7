"""Wait until the JupyterLab that ``scripts/demo.sh`` started answers, then print the link that opens a notebook
with Betty's panel beside it.

    python scripts/demo_link.py PID PATH [--within SECONDS]

PID is the JupyterLab server's process; PATH the notebook, relative to its root. The server's own
runtime file (``jpserver-PID.json`` in Jupyter's runtime directory) says its URL and token, so the
link is right whatever port or token the person chose. Exits 1, with one line on stderr, when the
server ends or does not answer in time.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_runtime_dir

POLL_SECONDS = 0.25  # between looks at a server that is still starting


def server_info(pid: int) -> dict[str, Any] | None:
    """What the server wrote of itself once it listens (url, token, root_dir), or None before that."""
    path = Path(jupyter_runtime_dir()) / f"jpserver-{pid}.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def answers(info: dict[str, Any]) -> bool:
    """Whether the server answers an authenticated ``GET api/status`` now."""
    request = urllib.request.Request(urllib.parse.urljoin(info["url"], "api/status"),
                                     headers={"Authorization": f"token {info.get('token', '')}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def notebook_link(info: dict[str, Any], path: str) -> str:
    """``…/lab/tree/PATH?token=…&betty=open``: JupyterLab on the notebook, Betty's panel open."""
    query = {"token": str(info["token"])} if info.get("token") else {}
    query["betty"] = "open"
    return (urllib.parse.urljoin(str(info["url"]), "lab/tree/" + urllib.parse.quote(path))
            + "?" + urllib.parse.urlencode(query))


def banner(link: str) -> str:
    """The lines the demo prints once JupyterLab is ready."""
    rule = "─" * 72
    return "\n".join(["", rule, "  Betty's demo is ready. Open the tour (Betty's panel opens beside it):", "",
                      f"    {link}", "", "  Stop JupyterLab with Ctrl+C.", rule, ""])


def wait_for(pid: int, within: float) -> dict[str, Any]:
    """The server's info once it answers; SystemExit with one line when it ends or ``within`` runs out."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not running(pid):
            raise SystemExit("betty: JupyterLab stopped before it answered; its log is above")
        info = server_info(pid)
        if info is not None and answers(info):
            return info
        time.sleep(POLL_SECONDS)
    raise SystemExit(f"betty: JupyterLab did not answer within {within:g} s; its log is above")


def main(argv: list[str] | None = None) -> None:
    """Wait for the server, then print the banner with the notebook's link."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pid", type=int, help="the JupyterLab server's process id")
    parser.add_argument("path", help="the notebook to open, relative to the server's root")
    parser.add_argument("--within", type=float, default=180.0, help="seconds to wait for the server")
    args = parser.parse_args(argv)
    try:
        info = wait_for(args.pid, args.within)
    except KeyboardInterrupt:  # Ctrl+C while JupyterLab starts: demo.sh stops it, no traceback here
        raise SystemExit(130) from None
    print(banner(notebook_link(info, args.path)), flush=True)


if __name__ == "__main__":
    main()
