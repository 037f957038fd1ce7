"""The dev cluster waits for another apt (a fresh machine's unattended-upgrades) instead of failing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from betty_jupyter.devcluster.packages import apt_busy


def test_apt_busy_sees_a_lock_that_another_process_holds(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.touch()
    assert not apt_busy((str(lock), str(tmp_path / "missing")))
    with subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.lockf(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:  # closes both pipes and waits for the holder, however the test ends
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert apt_busy((str(lock),))
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    assert not apt_busy((str(lock),))
