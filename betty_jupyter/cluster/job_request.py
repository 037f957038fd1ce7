"""What a job Betty writes asks Slurm for: the environment it runs in (modules, a venv, a conda environment, a
container — a profile's named ``environments``) and the request a cell run and a notebook run share (partition, time,
GPUs, environment, name), written by the one script writer (:class:`~.sbatch.SbatchScript`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import ConfigError, UsageError
from .sbatch import SbatchScript

_ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ENV_KEYS = {"modules", "venv", "conda", "container"}
_MODULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+/@-]{0,127}$")


# ----- the environment it runs in ----------------------------------------------------------------
@dataclass(frozen=True)
class CellEnvironment:
    """Where a cell's code runs on the node: a profile's named environment, or the cluster's ``python3``.

    In the profile, ``environments`` maps a name to any of ``modules`` (loaded with ``module load``),
    ``venv`` or ``conda`` (an environment's directory: its ``bin/python3`` runs the cell) and
    ``container`` (an Apptainer/Singularity image the cell runs in).
    """

    name: str | None = None
    modules: tuple[str, ...] = ()
    prefix: str | None = None
    """A venv's or conda environment's directory."""
    container: str | None = None

    @classmethod
    def parse(cls, name: str, data: Mapping[str, Any]) -> "CellEnvironment":
        """One profile entry, checked; a :class:`ConfigError` naming what is wrong."""
        where = f"environment {name!r}"
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{where}: a name is letters, digits, . _ -")
        if not isinstance(data, Mapping) or not data or set(data) - _ENV_KEYS:
            raise ConfigError(f"{where} takes modules, venv, conda or container")
        modules = data.get("modules", [])
        if isinstance(modules, str) or not all(isinstance(m, str) and _MODULE.fullmatch(m) for m in modules):
            raise ConfigError(f"{where}: modules is a list of module names like cuda/12.1")
        if data.get("venv") and data.get("conda"):
            raise ConfigError(f"{where}: give venv or conda, not both")
        prefix = data.get("venv") or data.get("conda")
        container = data.get("container")
        for path in (prefix, container):
            if path is not None and (not isinstance(path, str) or not path.startswith(("/", "~/", "$HOME/"))):
                raise ConfigError(f"{where}: {path!r} must be an absolute path (or start with ~/)")
        if prefix and container:
            raise ConfigError(f"{where}: the container brings its own python3; give a venv or a container, not both")
        return cls(name, tuple(modules), prefix, container)

    def setup_lines(self) -> list[str]:
        """The script's lines that prepare the environment before the runner starts."""
        lines = [f"module load {shlex.join(self.modules)}"] if self.modules else []
        if self.container:
            lines.append('runtime="$(command -v apptainer || command -v singularity)"')
        return lines

    def python(self, gpus: int = 0) -> str:
        """The shell words that start the environment's ``python3`` (a container's with ``--nv`` for GPUs)."""
        if self.container:
            return f'"$runtime" exec{" --nv" if gpus else ""} {_shell_path(self.container)} python3'
        if self.prefix:
            return f"{_shell_path(self.prefix.rstrip('/'))}/bin/python3"
        return "python3"

    def command(self, gpus: int, program: str, launcher: str = "exec") -> str:
        """The line that runs ``program`` (a runner and its arguments, already shell words) with :meth:`python`:
        ``exec`` it, or (in a continuation chain) ``betty_run`` it, which forwards the checkpoint signal to it."""
        return f"{launcher} {self.python(gpus)} -u {program}"

    def imports_check(self, modules: Sequence[str]) -> tuple[list[str], str]:
        """A command that succeeds on the cluster when the environment's ``python3`` imports ``modules``."""
        names = ", ".join(modules)
        lines = [*self.setup_lines(), f"{self.python()} -c {shlex.quote('import ' + names)}"]
        where = f"environment {self.name}" if self.name else "the cluster's default python3 (no --env)"
        return (["bash", "-lc", " && ".join(lines)], f"{where} cannot import {names}")

    def checks(self) -> list[tuple[list[str], str]]:
        """Commands that succeed on the cluster when the environment is there, each with what it means if not."""
        where = f"environment {self.name}"
        found: list[tuple[list[str], str]] = []
        if self.modules:
            found.append((["bash", "-lc", f"module is-avail {shlex.join(self.modules)}"],
                          f"{where}: module {' '.join(self.modules)} is not available on the cluster"))
        if self.prefix:
            python = f"{self.prefix.rstrip('/')}/bin/python3"
            found.append((["sh", "-c", f'test -x {_shell_path(python)}'], f"{where}: there is no {python} on the "
                                                                           "cluster"))
        if self.container:
            found.append((["sh", "-c", f"test -r {_shell_path(self.container)}"],
                          f"{where}: there is no container image {self.container} on the cluster"))
            found.append((["sh", "-c", "command -v apptainer || command -v singularity"],
                          f"{where}: the cluster has neither apptainer nor singularity to run {self.container}"))
        return found

    def describe(self) -> str:
        """The environment in one line, for the card."""
        if self.name is None:
            return "the cluster's default python3 (no --env: the python3 on the job's PATH)"
        parts = [f"module load {' '.join(self.modules)}"] if self.modules else []
        if self.prefix:
            parts.append(f"{self.prefix.rstrip('/')}/bin/python3")
        if self.container:
            parts.append(f"python3 in the container {self.container}")
        return f"{self.name}: " + "; ".join(parts)


def cell_environment(environments: Mapping[str, Mapping[str, Any]], name: str | None, cluster: str) -> CellEnvironment:
    """The environment called ``name`` in the profile (the default ``python3`` for None); UsageError when unknown."""
    if name is None:
        return CellEnvironment()
    if name not in environments:
        known = ", ".join(sorted(environments)) or "none"
        raise UsageError(f"--env {name}: cluster {cluster} has no such environment (configured: {known}); add it "
                         "under the profile's environments")
    return CellEnvironment.parse(name, environments[name])


def check_environments(profile: str, data: object) -> dict[str, dict[str, Any]]:
    """A profile's ``environments`` checked; a ConfigError naming the profile and the problem."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"cluster profile {profile!r}: environments maps names to modules/venv/conda/container")
    for name, entry in data.items():
        try:
            CellEnvironment.parse(str(name), entry)
        except ConfigError as error:
            raise ConfigError(f"cluster profile {profile!r}: {error}") from None
    return {str(name): dict(entry) for name, entry in data.items()}


def _shell_path(path: str) -> str:
    """A path for the script: quoted, with a leading ``~/`` or ``$HOME/`` left for the shell to expand."""
    for home in ("~/", "$HOME/"):
        if path.startswith(home):
            return '"$HOME"/' + shlex.quote(path[len(home):])
    return shlex.quote(path)


# ----- the request ------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobRequest:
    """What a job Betty writes asks Slurm for: the part a cell run and a notebook run share."""

    partition: str
    minutes: int
    """The time limit."""
    gpus: int = 0
    environment: CellEnvironment = field(default_factory=CellEnvironment)
    name: str = "job"
    """The job's name (``--job-name``)."""

    def script(self, run_dir: str, logs: str, preamble: Sequence[str], program: str,
               launcher: str = "exec") -> SbatchScript:
        """The batch script that runs ``program`` (a runner and its arguments, shell words) in the environment,
        in ``run_dir``, after the lines of ``preamble``; it writes ``<logs>.out`` and ``<logs>.err`` there.
        ``launcher``: as :meth:`CellEnvironment.command`.

        Its ``#SBATCH`` lines are written by :meth:`~.sbatch.SbatchScript.written`, as every directive
        Betty writes: a value sbatch would split is quoted, a line break in one is refused.
        """
        options = [("job-name", self.name), ("partition", self.partition), ("time", str(self.minutes))]
        if self.gpus:
            options.append(("gpus", str(self.gpus)))
        options += [("chdir", run_dir), ("output", f"{run_dir}/{logs}.out"), ("error", f"{run_dir}/{logs}.err")]
        body = [*preamble, *self.environment.setup_lines(), "export MPLBACKEND=Agg",
                self.environment.command(self.gpus, program, launcher)]
        return SbatchScript.written(options, "\n".join(body) + "\n")
