"""Moving a cell run (:mod:`.cell_job`) to the cluster and back, over any :class:`~betty_jupyter.transport.interface.Transport`.

Every command here is built by Betty from the profile's work directory and a run's token (32
hexadecimal digits), never from text anyone else wrote; files come back base64-encoded, so a
binary figure or pickle crosses a text-only link unchanged, and each is size-checked first.

A work directory may be shared with a group. ``<work_dir>/runs`` must be the person's and
writable by nobody else (Betty makes it so, or narrows one of the person's), and each run's
directory is made afresh, mode 700. Every later look into a run's directory is one remote step
(:data:`RUN_FILE_SCRIPT`) that enters it, checks it is still the person's alone, and only then
reads a file of the person's in it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Sequence

from ..errors import SlurmError, TransportError, UsageError
from .private_folder import PrivateFolder
from ..cluster.job_request import CellEnvironment
from .cell_job import MAX_FIGURE_BYTES, MAX_OUT_BYTES, RUNNER, CellJob, StagedRun, runner_source
from ..transport.interface import CommandResult, Transport

TAIL_BYTES = 6000
"""How much of the end of the cell's stdout and stderr each look brings back."""
_RESULT_BYTES = 4 * 2**20
_BASH = ("env", "BASH_ENV=", "bash", "--norc", "--noprofile", "-c")  # no start-up files, as in .reads
_REFUSED = 125
_MARK = "betty-run:"

MAKE_RUN_DIR_SCRIPT = r"""
runs=$1 leaf=$2 fresh=$3
refuse() { printf 'betty-run:%s\n' "$1" >&2; exit 125; }
mkdir -p -- "${runs%/*}" || refuse "cannot make ${runs%/*}"
[[ -e $runs || -L $runs ]] || mkdir -m 700 -- "$runs" 2>/dev/null
[[ -d $runs && ! -L $runs ]] || refuse "$runs is not a directory"
[[ -O $runs ]] || refuse "$runs belongs to another user; give the profile a work_dir of your own"
chmod go-w -- "$runs" || refuse "cannot make $runs writable by you alone"
if [[ $fresh == fresh ]]; then
  mkdir -m 700 -- "$runs/$leaf" || refuse "$runs/$leaf already exists"
else
  [[ -e $runs/$leaf || -L $runs/$leaf ]] || mkdir -m 700 -- "$runs/$leaf" || refuse "cannot make $runs/$leaf"
fi
cd -- "$runs/$leaf" && [[ -O . ]] && chmod 700 . || refuse "$runs/$leaf is not yours"
"""
"""Make ``RUNS/LEAF`` (``fresh``: it must not exist yet) with ``RUNS`` the person's and writable by nobody else."""

RUN_FILE_SCRIPT = r"""
dir=$1 name=$2 how=$3 most=$4
refuse() { printf 'betty-run:%s\n' "$1" >&2; exit 125; }
cd -- "$dir" 2>/dev/null || exit 124
[[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) || refuse "$dir is not yours alone (another user may have replaced it)"
[[ -e $name ]] || exit 124
[[ -f $name && ! -L $name && -O $name ]] || refuse "$dir/$name is not a file of yours"
if [[ $how == tail ]]; then exec tail -c "$most" -- "$name"; fi
size=$(stat -c %s -- "$name")
(( size <= most )) || refuse "$name of the run is $size bytes, more than the $most that come back; it stays on the cluster in $dir"
exec base64 -w 0 -- "$name"
"""
"""``DIR NAME HOW MOST``: enter the run's directory, check it is the person's alone, then ``tail -c MOST`` or
``base64`` (up to MOST bytes) its file NAME; exit 124 when the file is not there, 125 with a ``betty-run:`` line when
refused."""


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
                                      ("run.key", run.key.hex().encode()), (RUNNER, runner_source())]
    inputs = run.inputs
    if inputs:
        files.append(("inputs.pkl", inputs))
    await upload_files(transport, job.run_dir, files, fresh=True)


async def upload_files(transport: Transport, run_dir: str, files: Sequence[tuple[str, bytes]],
                       fresh: bool = False) -> None:
    """Make ``run_dir`` (mode 700, under a ``runs`` directory only its owner can write; ``fresh``: one that did not
    exist) and put each ``(name, bytes)`` into it, readable by its owner alone."""
    runs, _, leaf = run_dir.rstrip("/").rpartition("/")
    made = await transport.run([*_BASH, MAKE_RUN_DIR_SCRIPT, "betty-run", runs, leaf, "fresh" if fresh else "reuse"],
                               timeout=30)
    if not made.ok:
        raise TransportError(f"could not make the run's directory {run_dir}: {_why(made)}")
    for name, data in files:
        await transport.put(data, f"{run_dir}/{name}")
    names = [name for name, _ in files]
    sealed = await transport.run([*_BASH, 'cd -- "$1" && shift && [[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) '
                                  '&& chmod 600 -- "$@"', "betty-run", run_dir, *names], timeout=30)
    if not sealed.ok:
        raise TransportError(f"could not make the run's files readable by you alone in {run_dir}: {_why(sealed)}")


def _why(result: CommandResult) -> str:
    """A failed step's reason in one line: its ``betty-run:`` line, or the end of its stderr."""
    marked = [line[len(_MARK):] for line in result.stderr.splitlines() if line.startswith(_MARK)]
    return (marked[-1] if marked else result.stderr.strip().replace("\n", " ") or f"exit {result.exit_code}")[:300]


async def _run_file(transport: Transport, run_dir: str, name: str, how: str, most: int,
                    timeout: float = 30) -> CommandResult | None:
    """One file of the run's directory, read in one checked step (see :data:`RUN_FILE_SCRIPT`); None when absent."""
    read = await transport.run([*_BASH, RUN_FILE_SCRIPT, "betty-run", run_dir, name, how, str(most)], timeout=timeout)
    if read.exit_code == 124:
        return None
    if read.exit_code == _REFUSED and _MARK in read.stderr:
        raise UsageError(f"refused: {_why(read)}; nothing of it was read")
    if not read.ok:
        raise TransportError(f"could not read {run_dir}/{name} back from the cluster: {_why(read)}")
    return read


async def tails(transport: Transport, run_dir: str) -> tuple[str, str]:
    """The end of the cell's stdout and stderr so far ("" for a stream not written yet)."""
    found = []
    for name in ("cell.out", "cell.err"):
        read = await _run_file(transport, run_dir, name, "tail", TAIL_BYTES)
        found.append(read.stdout if read else "")
    return found[0], found[1]


async def fetch(transport: Transport, run_dir: str, names: Sequence[str], into: PrivateFolder,
                cap: int | None = None) -> list[str]:
    """Copy the run's files ``names`` that exist into ``into``; the names copied.

    ``result.json`` up to 4 MiB, ``outputs.pkl`` up to :data:`~.cell_job.MAX_OUT_BYTES`, a figure up to
    :data:`~.cell_job.MAX_FIGURE_BYTES` (each up to ``cap`` when given): a larger file is refused in one line,
    naming it, as is a run's directory that is no longer the person's alone.
    """
    copied = []
    for name in names:
        most = cap or {"result.json": _RESULT_BYTES, "outputs.pkl": MAX_OUT_BYTES}.get(name, MAX_FIGURE_BYTES)
        read = await _run_file(transport, run_dir, name, "base64", most, timeout=300)
        if read is None:
            continue
        try:
            into.write(name, base64.b64decode(read.stdout.strip(), validate=True))
        except (binascii.Error, ValueError) as error:
            raise TransportError(f"{run_dir}/{name} came back garbled ({error}); look at the run again") from None
        copied.append(name)
    return copied
