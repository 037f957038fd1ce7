"""``LocalTransport``: run commands as subprocesses, for Jupyter on the cluster itself."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Sequence

from ..errors import CommandTimeout, TransportError
from .interface import CommandResult, current_environment, program_name


class LocalTransport:
    """Runs Slurm commands on this machine (Open OnDemand, a login node, the dev cluster)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._extra_env = dict(env or {})

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        """Run ``argv`` without a shell, without inherited Slurm allocation variables or secret-looking ones.

        The profile's ``env`` (``SLURM_CONF``) is added back: it is configuration, not inherited.
        """
        argv = tuple(argv)
        began = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**current_environment(), **self._extra_env},
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"cannot run {program_name(argv)!r} here: {exc.strerror or exc}") from exc
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
        except asyncio.TimeoutError:
            _kill_group(process.pid)
            await process.wait()
            raise CommandTimeout(f"`{program_name(argv)}` did not finish within {timeout:g} s and was stopped") from None
        return CommandResult(
            argv=argv,
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=stderr.decode("utf-8", errors="replace"),
            exit_code=process.returncode if process.returncode is not None else -1,
            duration_ms=(time.perf_counter() - began) * 1000,
        )

    async def put(self, data: bytes, remote_path: str) -> str:
        """Write ``data`` to ``remote_path`` atomically; returns the absolute path."""
        path = Path(os.path.expanduser(remote_path)).absolute()
        await asyncio.to_thread(_write_atomically, path, data)
        return str(path)

    async def close(self) -> None:
        """Nothing to release."""

    async def __aenter__(self) -> "LocalTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.betty-tmp")
        temp.write_bytes(data)
        os.replace(temp, path)
    except OSError as exc:
        raise TransportError(f"cannot write {path}: {exc.strerror or exc}") from exc
