"""Other releases of the packages beside Betty, for the tests that check Betty lives with them: a directory per set of
requirements, placed first on ``PYTHONPATH`` over this environment (an overlay), kept between runs.

The overlay holds only what the requirements add to or change in this environment: pip resolves them against it
(``pip install --dry-run --report``), and installs exactly those distributions there (``--target``, ``--no-deps``).
It is kept under ``$BETTY_TEST_CACHE`` (default ``~/.cache/betty-test``), made in a sibling directory and renamed
into place once complete, so a run that was cut short leaves nothing half made. A download or install that fails is
an :class:`OverlayError` of one line, never a skip."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("BETTY_TEST_CACHE") or Path.home() / ".cache" / "betty-test")


class OverlayError(RuntimeError):
    """The overlay could not be made (no network, a package that does not exist, a failed install)."""


def overlay(requirements: list[str], timeout: float = 1200) -> Path:
    """The overlay directory holding ``requirements`` (made now when it is not kept yet)."""
    name = re.sub(r"[^A-Za-z0-9.=_-]+", "_", "+".join(requirements))[:120]
    kept = CACHE / name
    if (kept / ".complete").exists():
        return kept
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name[:40]}-", dir=CACHE))
    try:
        report = work / "report.json"
        _pip(["install", "--dry-run", "--quiet", "--report", str(report), *requirements], timeout)
        wanted = [f"{item['metadata']['name']}=={item['metadata']['version']}"
                  for item in json.loads(report.read_text())["install"]]
        if wanted:
            _pip(["install", "--quiet", "--no-deps", "--no-compile", "--target", str(work / "site"), *wanted], timeout)
        (work / "site").mkdir(exist_ok=True)
        (work / "site" / ".complete").write_text("\n".join(wanted) + "\n")
        shutil.rmtree(kept, ignore_errors=True)
        (work / "site").rename(kept)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return kept


def environment(site: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment) with ``site`` first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (str(site), env.get("PYTHONPATH", "")) if part)
    return env


def _pip(args: list[str], timeout: float) -> None:
    ran = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                         text=True, timeout=timeout)
    if ran.returncode != 0:
        said = [line for line in ran.stderr.splitlines() if line.strip() and "WARNING" not in line]
        raise OverlayError(f"pip {args[0]} {' '.join(a for a in args[1:] if not a.startswith('-'))[:200]} failed: "
                           f"{(said or ['no message'])[-1][:300]}")
