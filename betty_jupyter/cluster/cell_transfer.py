"""Moving a cell run (:mod:`.cell_job`) to the cluster and back, over any :class:`~.transport.Transport`.

Every command here is built by Betty from the profile's work directory and a run's token (32
hexadecimal digits), never from text anyone else wrote; files come back base64-encoded, so a
binary figure or pickle crosses a text-only link unchanged, and each is size-checked first.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Sequence

from ..errors import SlurmError, TransportError, UsageError
from .cell_job import MAX_FIGURE_BYTES, MAX_OUT_BYTES, RUNNER, CellEnvironment, CellJob, StagedRun, runner_source
from .transport import Transport

TAIL_BYTES = 6000
"""How much of the end of the cell's stdout and stderr each look brings back."""
_RESULT_BYTES = 4 * 2**20


async def absolute_work_dir(transport: Transport, work_dir: str) -> str:
    """``work_dir`` with a leading ``~`` or ``$HOME`` replaced by the cluster home (a read: ``printf $HOME``)."""
    for home in ("~", "$HOME"):
        if work_dir == home or work_dir.startswith(home + "/"):
            found = await transport.run(["sh", "-c", 'printf "%s" "$HOME"'], timeout=30)
            if not found.ok or not found.stdout.startswith("/"):
                raise SlurmError("could not learn your home directory on the cluster, to place the run there")
            return found.stdout.rstrip("/") + work_dir[len(home):]
    if not work_dir.startswith("/"):
        raise UsageError(f"the profile's work_dir {work_dir!r} must be absolute (or start with ~/) for a cell run")
    return work_dir


async def check_environment(transport: Transport, environment: CellEnvironment) -> None:
    """Refuse, in one line, an environment that is not on the cluster (a module, a venv, a container)."""
    for argv, problem in environment.checks():
        found = await transport.run(argv, timeout=60)
        if not found.ok:
            raise UsageError(f"{problem}; nothing was submitted: fix the profile's environments or pick another --env")


async def upload(transport: Transport, run: StagedRun, job: CellJob) -> None:
    """Put the cell, its ``--in`` values, its settings and the runner into the run's directory.

    The directory is made first, readable by its owner alone: the values a person sends are theirs,
    whatever the umask of a shared cluster's home directories lets others read.
    """
    files: list[tuple[str, bytes]] = [("cell.py", run.code.encode()), ("run.json", job.settings()),
                                      (RUNNER, runner_source())]
    inputs = run.inputs
    if inputs:
        files.append(("inputs.pkl", inputs))
    await upload_files(transport, job.run_dir, files)


async def upload_files(transport: Transport, run_dir: str, files: Sequence[tuple[str, bytes]]) -> None:
    """Make ``run_dir`` (mode 700: its owner's alone) and put each ``(name, bytes)`` into it."""
    made = await transport.run(["mkdir", "-p", "-m", "700", "--", run_dir], timeout=30)
    if not made.ok:
        raise TransportError(f"could not make the run's directory {run_dir}: {made.stderr.strip()[:200]}")
    for name, data in files:
        await transport.put(data, f"{run_dir}/{name}")


async def tails(transport: Transport, run_dir: str) -> tuple[str, str]:
    """The end of the cell's stdout and stderr so far ("" for a stream not written yet)."""
    found = []
    for name in ("cell.out", "cell.err"):
        read = await transport.run(["tail", "-c", str(TAIL_BYTES), "--", f"{run_dir}/{name}"], timeout=30)
        found.append(read.stdout if read.ok else "")
    return found[0], found[1]


async def fetch(transport: Transport, run_dir: str, names: Sequence[str], into: Path,
                cap: int | None = None) -> list[str]:
    """Copy the run's files ``names`` that exist into ``into``; the names copied.

    ``result.json`` up to 4 MiB, ``outputs.pkl`` up to :data:`~.cell_job.MAX_OUT_BYTES`, a figure up to
    :data:`~.cell_job.MAX_FIGURE_BYTES` (each up to ``cap`` when given): a larger file is refused in one line,
    naming it.
    """
    into.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in names:
        path = f"{run_dir}/{name}"
        size = await transport.run(["stat", "-c", "%s", "--", path], timeout=30)
        if not size.ok:
            continue
        most = cap or {"result.json": _RESULT_BYTES, "outputs.pkl": MAX_OUT_BYTES}.get(name, MAX_FIGURE_BYTES)
        if int(size.stdout.strip() or 0) > most:
            raise UsageError(f"{name} of the run is {size.stdout.strip()} bytes, more than the {most} that come back; "
                             f"it stays on the cluster in {run_dir}")
        read = await transport.run(["base64", "-w", "0", "--", path], timeout=300)
        if not read.ok:
            raise TransportError(f"could not read {path} back from the cluster: {read.stderr.strip()[:200]}")
        try:
            (into / name).write_bytes(base64.b64decode(read.stdout.strip(), validate=True))
        except (binascii.Error, ValueError) as error:
            raise TransportError(f"{path} came back garbled ({error}); look at the run again") from None
        copied.append(name)
    return copied
