"""SIGINT at the worst moment: the instant before a process's main thread blocks.

Python runs a signal's handler (Ctrl-C's KeyboardInterrupt) only between two steps of Python code.
A signal that comes after the main thread's last step and before it blocks in a lock or ``select``
is caught by the operating system's handler, and the thread blocks all the same. On a loaded
machine that instant can last long enough for Ctrl-C to land in it; here gdb makes it certain:
once the process has written ``marker`` to its stdout, gdb stops its main thread as it enters its
next blocking wait (``sem_wait``, which a lock uses, ``select`` or ``clock_nanosleep``), sends it SIGINT there, and lets
it go on. The process must end as Ctrl-C says all the same.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

import pytest

GDB = shutil.which("gdb")


def needs_gdb() -> None:
    """Skip where gdb cannot do it: it is missing, or the machine is not x86-64 (the script reads its registers)."""
    if GDB is None or platform.machine() != "x86_64":
        pytest.skip("delivering SIGINT at a chosen instruction needs gdb on x86-64")


def gdb_script(marker: bytes) -> str:
    """gdb's commands: wait for ``marker`` on fd 1, stop the main thread at its next blocking wait, SIGINT it there."""
    assert len(marker) >= 8
    first = int.from_bytes(marker[:8], "little")
    return "\n".join([
        "set breakpoint pending on", "set pagination off", "set confirm off",
        *(f"handle {name} nostop noprint pass" for name in ("SIGINT", "SIGCHLD", "SIGCONT", "SIGSTOP")),
        # write(1, buffer, n) enters with fd in rdi and the buffer in rsi
        "catch syscall write", f"condition 1 $rdi == 1 && *(unsigned long long *)$rsi == {first:#x}",
        "continue", "delete",
        "break sem_wait thread 1", "break select thread 1", "break clock_nanosleep thread 1",
        "continue", "delete",
        "call (int)raise(2)",  # the kernel runs Python's C handler now, in the main thread
        "detach", "quit", "",
    ])


def started_interrupted(argv: Sequence[str], marker: bytes, tmp_path: Path, **popen: object) -> subprocess.Popen:
    """Start ``argv`` (stopped until gdb holds it) and have gdb SIGINT it as described above; returns it.

    The caller waits for it (it is this process's child) and reads its output.
    """
    script = tmp_path / "sigint.gdb"
    script.write_text(gdb_script(marker))
    process = subprocess.Popen(["bash", "-c", 'kill -STOP $$ && exec "$@"', "bash", *argv], **popen)  # type: ignore[call-overload]
    deadline = time.monotonic() + 60
    while _state(process.pid) != "T":
        assert time.monotonic() < deadline and process.poll() is None, "the process never stopped to wait for gdb"
        time.sleep(0.05)
    log = (tmp_path / "gdb.log").open("w")
    gdb = subprocess.Popen([GDB or "gdb", "--batch", "--nx", "-p", str(process.pid), "-x", str(script)],
                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        # gdb holds it now (a traced process shows "t"): let it go on from its stop
        while _state(process.pid) != "t" and gdb.poll() is None:
            assert time.monotonic() < deadline, "gdb never attached"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGCONT)
        gdb.wait(180)
    finally:
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait()
        log.close()
    said = (tmp_path / "gdb.log").read_text()
    assert "$1 = 0" in said, f"gdb did not deliver SIGINT: {said[-2000:]}"
    return process


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return ""
