"""The sync facade's waits in the main thread end on Ctrl-C, whenever the signal comes.

Even the instant before the main thread blocks: gdb delivers SIGINT there (tests/signal_moment.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from signal_moment import needs_gdb, started_interrupted

CHILD = r'''
import sys
from concurrent.futures import Future
from betty_jupyter.cluster import sync

print("waiting now", flush=True)
try:
    if sys.argv[1] == "wait":
        sync.wait(Future())  # a future that is never done: a server that never answers
    else:
        sync.sleep(3600)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
'''


@pytest.mark.parametrize("how", ["wait", "sleep"])
def test_ctrl_c_the_instant_before_the_main_thread_blocks_ends_its_wait(how, tmp_path):
    needs_gdb()
    child = started_interrupted([sys.executable, "-c", CHILD, how], b"waiting now", tmp_path, cwd=REPO, text=True,
                                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        try:
            out, _ = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"`sync.{how}` still waits 60 s after SIGINT") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert (child.returncode, out) == (130, "waiting now\ninterrupted\n")
