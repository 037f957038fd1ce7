"""The environment a job gets: the names Betty passes to ``sbatch --export``, never its own whole environment.

Without ``--export`` sbatch copies the environment it runs in into the job, and with the local
transport that is Jupyter's: ``OPENAI_API_KEY``, ``JUPYTERHUB_API_TOKEN``, ``JPY_API_TOKEN``,
``JUPYTER_TOKEN`` and every other secret the person's server holds. Betty always submits with
``--export=NAME,…``: the names in :data:`JOB_NAMES`, then the profile's ``job_env``, then what
the script's own ``#SBATCH --export=`` asks for. Slurm takes each named variable's value from
where sbatch runs, skips names that are unset there, and always adds its own ``SLURM_*``
variables. With a list of names, Slurm (22.05 and later) also loads the person's login
environment on the node, where slurmd runs as root (``--get-user-env``), as a login shell
would; the named values win.

- ``ALL`` in the script stands for these names (the preview says so): it never reopens the
  whole environment. ``NONE`` and ``NIL`` (nothing but Slurm's own) are passed as they are.
- ``NAME=value`` in the script is passed as written: the value is in the script, for all to see.
- A name that looks like a secret (:func:`betty_jupyter.secret_names.is_secret_name`) is
  refused, bare or with a value; so is ``#SBATCH --export-file``, which would load a whole
  environment from a file (``/proc/<pid>/environ`` of Jupyter, for one).
- Steps started with ``srun`` inside the job inherit sbatch's ``--export`` through
  ``SLURM_EXPORT_ENV``, which would drop everything the script itself exported (a module's
  ``LD_LIBRARY_PATH``, ``OMP_NUM_THREADS``). sbatch keeps a ``SLURM_EXPORT_ENV`` that is already
  set, so Betty runs it as ``env SLURM_EXPORT_ENV=ALL sbatch …``: a step sees the job's whole
  environment, which holds nothing of Betty's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ScriptError
from ..secret_names import is_secret_name
from .sbatch import SbatchScript

JOB_NAMES: tuple[str, ...] = (
    # who and where
    "HOME", "USER", "LOGNAME", "SHELL", "PATH", "LD_LIBRARY_PATH", "TMPDIR",
    # language, terminal, clock
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    # environment modules (Lmod, Environment Modules): `module load` in the job
    "MODULEPATH", "MODULEPATH_ROOT", "MODULESHOME", "MODULES_CMD", "LMOD_CMD", "LMOD_DIR", "LMOD_PKG",
    "LMOD_ROOT", "LMOD_VERSION", "LMOD_SYSTEM_DEFAULT_MODULES", "BASH_ENV", "BASH_FUNC_module%%", "BASH_FUNC_ml%%",
    # Python environments: conda, mamba, venv
    "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "MAMBA_EXE",
    "MAMBA_ROOT_PREFIX", "VIRTUAL_ENV",
)  # fmt: skip
"""The variables every job Betty submits gets from where sbatch runs (when they are set there)."""

STEPS_EXPORT = ("env", "SLURM_EXPORT_ENV=ALL")
"""What ``sbatch`` runs under, so ``srun`` steps see everything the job's script exported."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ONLY_SLURM = ("NONE", "NIL")


@dataclass(frozen=True)
class JobEnvironment:
    """What ``sbatch --export`` carries into a job; built by :func:`job_environment`."""

    names: tuple[str, ...]
    """Variables taken from where sbatch runs, in order."""
    assignments: tuple[str, ...] = ()
    """``NAME=value`` items the script writes itself, passed as written."""
    only_slurm: str | None = None
    """``NONE`` or ``NIL`` when the script asks for nothing but Slurm's own variables."""
    narrowed_all: bool = False
    """Whether the script's ``--export=ALL`` was read as :attr:`names`."""

    @property
    def option(self) -> str:
        """The ``--export=…`` argument of ``sbatch``."""
        if self.only_slurm:
            return f"--export={self.only_slurm}"
        return "--export=" + ",".join((*self.names, *self.assignments))

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs ``sbatch`` (:data:`STEPS_EXPORT`, or nothing when the script asked for ``NONE``/``NIL``)."""
        return () if self.only_slurm else STEPS_EXPORT

    def describe(self) -> str:
        """The environment in one line, names only (values never appear), for previews."""
        if self.only_slurm:
            return f"nothing from where sbatch runs, only Slurm's SLURM_* (the script asks for --export={self.only_slurm})"
        parts = [", ".join(self.names) + " (where set) and Slurm's SLURM_*"]
        if self.assignments:
            parts.append("set by the script: " + ", ".join(item.partition("=")[0] for item in self.assignments))
        if self.narrowed_all:
            parts.append("the script's --export=ALL stands for these names: Betty never passes its whole environment")
        return "; ".join(parts)


def job_environment(script: SbatchScript, profile_names: Sequence[str] = ()) -> JobEnvironment:
    """The environment a job of ``script`` gets; :class:`ScriptError` ("line N: …") for a secret or malformed name."""
    refused = [directive for directive in script.directives if directive.option == "export-file"]
    if refused:
        raise ScriptError.at((refused[-1].line, "#SBATCH --export-file would load a whole environment into the job; "
                                                "name the variables it needs in #SBATCH --export=NAME,… instead"))
    base = (*JOB_NAMES, *profile_names)
    asked = [directive for directive in script.directives if directive.option == "export"]
    if not asked:
        return JobEnvironment(_unique(base))
    line, value = asked[-1].line, asked[-1].value or ""
    items = [item for item in _slurm_items(value) if _unquoted(item)]
    words = [_unquoted(item).upper() for item in items]
    if any(word in _ONLY_SLURM for word in words):
        if len(items) > 1:
            raise ScriptError.at((line, f"--export={value} mixes NONE or NIL with names; keep one or the other"))
        return JobEnvironment((), only_slurm=words[0])
    names, assignments = list(base), []
    for item in items:
        name, equals, _ = _unquoted(item).partition("=")
        if name.upper() == "ALL" and not equals:
            continue
        problem = name_problem(name)
        if problem:
            raise ScriptError.at((line, f"--export {problem}"))
        if equals:
            assignments.append(item)
        else:
            names.append(name)
    return JobEnvironment(_unique(names), tuple(assignments), narrowed_all="ALL" in words)


def name_problem(name: str) -> str | None:
    """Why ``name`` may not be in a job's environment (not a variable's name, or a secret's); None when it may."""
    if not _NAME.match(name):
        return f"names {name[:60]!r}, which is not an environment variable name"
    if is_secret_name(name):
        return (f"names {name}, which looks like a secret; Betty never hands secrets to jobs: have the job read it "
                "from a file only you can read on the cluster")
    return None


def _slurm_items(value: str) -> list[str]:
    """``value`` split at commas outside quotes, as Slurm's ``find_quote_token`` does (quotes kept)."""
    items: list[str] = []
    current: list[str] = []
    single = double = False
    for char in value:
        single ^= char == "'"
        double ^= char == '"'
        if char == "," and not (single or double):
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


def _unquoted(item: str) -> str:
    """An item as Slurm reads it: quotes around the whole of it are dropped."""
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'":
        return item[1:-1]
    return item


def _unique(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
