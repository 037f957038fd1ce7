"""Long output leaves the CLI in blocks: `betty log show` and `betty log export` on a log of thousands of
records make a few writes, not one per row, even where ``PYTHONUNBUFFERED`` is set, and print every row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from betty_jupyter.agent.actions import ActionLog, ActionRecord

from conftest import REPO

ROWS = 3000

# Runs the CLI as `python -m betty_jupyter.cli` does, then tells (on stderr) how many write system calls the
# process made in all (Linux's /proc/self/io), logs and files included.
COUNTED = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write(next(line for line in open("/proc/self/io") if line.startswith("syscw"))))
sys.argv = ["betty", *sys.argv[1:]]
runpy.run_module("betty_jupyter.cli", run_name="__main__")
"""


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("long-log")
    log = ActionLog(folder)
    for n in range(ROWS):
        log.record(ActionRecord(ts=1714550000 + n, session_id="s", call_id=f"call_{n}", tool="cluster_queue", tier=0,
                                args={}, decision="auto", ok=True, summary=f"row {n}"))
    return folder


def writes_of(*args: str) -> tuple[str, int]:
    """What the command printed, and its number of write system calls, run with PYTHONUNBUFFERED=1 into a pipe."""
    done = subprocess.run([sys.executable, "-c", COUNTED, *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout, int(done.stderr.strip().splitlines()[-1].split(":")[1])


@pytest.mark.parametrize("command", [["log", "show"], ["log", "show", "--json"], ["log", "export"]])
def test_thousands_of_rows_leave_in_a_few_writes(long_log: Path, command: list[str]) -> None:
    # one run first, so the log's index is written and the run counted writes only what it prints
    writes_of(*command, "--dir", str(long_log))
    printed, writes = writes_of(*command, "--dir", str(long_log))
    assert all(f"row {n}" in printed for n in (0, ROWS // 2, ROWS - 1))
    assert writes < ROWS // 20, f"{writes} writes for {ROWS} rows"
