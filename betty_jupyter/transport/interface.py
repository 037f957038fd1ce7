"""The one small interface every way of reaching a cluster implements.

A transport runs an argv and returns a :class:`CommandResult`; it can also upload a file.
It never interprets the command: policy decisions happen before, parsing after.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

from ..secret_names import without_secrets

# Variables that would change what Slurm's commands print or where they submit.
# SLURM_CONF stays: it says which cluster to talk to.
_SLURM_OUTPUT_VARIABLES = (
    "SLURM_TIME_FORMAT", "SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_SORT", "SACCT_FORMAT",
    "SINFO_FORMAT", "SINFO_SORT", "SPRIO_FORMAT", "SQUEUE_ALL", "SQUEUE_USERS", "SQUEUE_STATES",
)


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str
    exit_code: int
    duration_ms: float

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0


@runtime_checkable
class Transport(Protocol):
    """How Betty reaches a cluster: run a command, upload a file, close."""

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Run ``argv`` on the cluster.

        ``idempotent`` commands (reads) may be retried once after reconnecting when the
        link drops; others (``sbatch``, ``scancel``) never are: the caller decides.
        """
        ...

    async def put(self, data: bytes, remote_path: str) -> str:
        """Write ``data`` to ``remote_path`` (``~/`` is the cluster home); returns the absolute path.

        Parents are created and the file is replaced atomically.
        """
        ...

    async def close(self) -> None:
        """Release connections; closing twice is fine."""
        ...


@runtime_checkable
class ForwardingTransport(Protocol):
    """A transport that can also carry a TCP connection to a host and port the cluster reaches (``ssh -L``)."""

    def open_channel(self, host: str, port: int, timeout: float = 15.0) -> Any:
        """A socket-like object (``recv``, ``sendall``, ``fileno``, ``close``) connected to ``host:port``."""
        ...


def program_name(argv: Sequence[str]) -> str:
    """The program ``argv`` runs, as a person knows it: ``sbatch`` for ``env NAME=value sbatch …``."""
    words = list(argv)
    if words and words[0] == "env":
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
    return words[0] if words else (argv[0] if argv else "")


def clean_slurm_environment(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without an inherited allocation (``SLURM_*``, ``SBATCH_*``) or output formats.

    A Jupyter server that itself runs inside a Slurm job must not leak its allocation into
    the jobs it submits.
    """
    cleaned = {}
    for name, value in environ.items():
        inherited = name.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")) and name != "SLURM_CONF"
        if not inherited and name not in _SLURM_OUTPUT_VARIABLES:
            cleaned[name] = value
    return cleaned


def unset_slurm_output_variables() -> str:
    """A shell line that unsets the variables :func:`clean_slurm_environment` drops by name."""
    return "unset " + " ".join(_SLURM_OUTPUT_VARIABLES) + " 2>/dev/null"


def current_environment() -> dict[str, str]:
    """This process's environment, cleaned for running Slurm commands, and without anything that looks like a secret.

    Jobs get only the names ``sbatch --export`` lists (``job_env.py``); dropping secrets here too
    means no other path, not even an ``--export=ALL``, can hand them to a job or a command.
    """
    return without_secrets(clean_slurm_environment(dict(os.environ)))
