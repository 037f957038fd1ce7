"""The files a pipeline step leaves for the steps after it: named when the pipeline is planned, checked on the
cluster when the step ends.

A step's ``outputs`` are paths, absolute or relative to the step's working directory. They come from the person or
the model, so each is checked here before it is recorded: printable, a plain set of characters, no ``..`` and no
``~``. When the step ends, :func:`first_missing` looks for each one through the same checked read as every file
Betty reads (``file_reads.py``): the path is opened on the cluster and refused when it leads (a symlink, say)
outside the readable roots and the job's own working directory.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Sequence

from ..errors import PolicyError, SlurmError, UsageError
from .allowlist import CommandPolicy
from .file_reads import run_checked

if TYPE_CHECKING:
    from .jobs import Job
    from .slurm import SlurmClient

MAX_OUTPUTS = 20
MAX_PATH = 512
_PLAIN = re.compile(r"^[A-Za-z0-9._/@+=-]+$")


def checked_output(path: str) -> str:
    """``path`` as recorded (a trailing ``/`` and ``./`` parts folded away); UsageError in one line when it is not
    a plain path inside the person's folders."""
    shown = repr(path[:80])
    if not path or len(path) > MAX_PATH:
        raise UsageError(f"output {shown}: give a path of 1 to {MAX_PATH} characters")
    if not _PLAIN.match(path):
        raise UsageError(f"output {shown}: use letters, digits and . _ / @ + = - only (no spaces, newlines, "
                         "quotes or shell characters)")
    if ".." in path.split("/"):
        raise UsageError(f"output {shown}: '..' is not allowed; name the file by its own path")
    if path.startswith("-"):
        raise UsageError(f"output {shown}: a path cannot start with '-'")
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("/") else normal


def output_path(path: str, work_dir: str | None) -> str | None:
    """The absolute path of an output of a job that ran in ``work_dir`` (None: relative, and no folder known)."""
    if path.startswith("/"):
        return path
    if not work_dir or not work_dir.startswith("/"):
        return None
    return posixpath.join(work_dir, path)


async def first_missing(slurm: "SlurmClient", job: "Job", outputs: Sequence[str]) -> str | None:
    """One line naming the first of ``outputs`` the ended ``job`` did not leave (or that Betty may not look at:
    it leads outside the person's folders), None when every one is there. Errors of the link propagate."""
    area = tuple(slurm.readable_roots) + ((job.work_dir,) if job.work_dir and job.work_dir.startswith("/")
                                          and job.work_dir.rstrip("/") else ())
    for output in outputs:
        path = output_path(output, job.work_dir)
        if path is None:
            return f"output {output} is missing: the step's working directory is not known"
        try:
            allowed = CommandPolicy(area).check(["ls", "-d", "--", path])
            result = await run_checked(slurm.transport, allowed, area, timeout=slurm.timeout)
        except PolicyError as refused:
            return f"output {path} cannot be checked: {str(refused).removeprefix('refused: ')}"
        if not result.ok:
            if "No such file" in result.stderr:
                return f"output {path} is missing"
            last = (result.stderr.strip().splitlines() or ["no answer"])[-1]
            raise SlurmError(f"cannot look for {path}: {last[:200]}")  # unknown: looked for again on the next pass
    return None
