"""A notebook cell as a batch job (``%%betty run``): what crosses the wire, the job's script, what comes back.

The kernel stages the run in the project (:func:`stage`): the cell's code and the variables the
person named with ``--in``, pickled with cloudpickle (:func:`pack_inputs`; refused before
anything is submitted when a value cannot be pickled or the whole is over :data:`MAX_IN_BYTES`),
with a manifest of names, types and sizes. Once the card is approved the files go into the run's
own directory on the cluster, ``<work_dir>/runs/cell-<token>/``, beside
:mod:`.cell_runner`, and :func:`cell_script` is the batch script that runs it there in a named
environment (:class:`CellEnvironment`) or the cluster's default ``python3``. The runner leaves
``result.json`` (:func:`parse_result`), ``figure-N.png`` and ``outputs.pkl``
(:func:`unpack_outputs`, read back into the kernel for the ``--out`` names only).

Everything staged and everything that comes back lives in folders only the person can write
(:class:`~.private_folder.PrivateFolder`, checked before each read). Each run has a key of its own,
made here and sent to the job in its owner-only directory; the job signs what it sends back with
it, and nothing comes back into the kernel whose signature does not match (:func:`check_back`).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import keyword
import pickle
import re
import secrets
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ConfigError, UsageError
from .cell_runner import SIGNED, signature
from .private_folder import PrivateFolder
from .sbatch import SbatchScript

MAX_IN_BYTES = 256 * 2**20
"""The most the ``--in`` values of one cell may be, pickled."""
MAX_OUT_BYTES = 64 * 2**20
"""The most the ``--out`` values of one cell may be, pickled, to come back into the kernel."""
MAX_FIGURE_BYTES = 16 * 2**20
"""The most one figure may be to come back into the cell."""
MAX_CODE_CHARS = 100_000
RUNNER = "cell_runner.py"
"""The runner's file name in the run's directory."""
RESULT_FILES = ("result.json", "result.sig", "outputs.pkl")
"""What is brought back first; the figures ``result.json`` names follow."""
KEY_FILE = "key"
"""The run's key in its staged folder (sent to the job as ``run.key``)."""
_SMALL = 1 << 20

_TOKEN = re.compile(r"^[0-9a-f]{32}$")
_ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ENV_KEYS = {"modules", "venv", "conda", "container"}
_MODULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+/@-]{0,127}$")


@dataclass(frozen=True)
class Crossing:
    """One ``--in`` value as it crosses the wire: its name, its type, its pickled size."""

    name: str
    type: str
    bytes: int

    def line(self) -> str:
        """``x: numpy.ndarray, 7.6 MiB``."""
        return f"{self.name}: {self.type}, {human_bytes(self.bytes)}"


def human_bytes(size: int) -> str:
    """``1.5 KiB``, ``7.6 MiB``; bytes below 1 KiB as they are."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def variable_names(text: str | None, option: str) -> tuple[str, ...]:
    """``"x,y"`` → ``("x", "y")``; a one-line UsageError for anything that is not a Python variable's name."""
    if not text:
        return ()
    names = tuple(word.strip() for word in text.split(","))
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise UsageError(f"{option}: {name[:60]!r} is not a variable's name; list names with commas: "
                             f"{option} x,y")
    if len(set(names)) != len(names):
        raise UsageError(f"{option} names a variable twice")
    return names


def pack_inputs(namespace: Mapping[str, Any], names: Sequence[str]) -> tuple[bytes, list[Crossing]]:
    """The named variables pickled together, and what crosses; only ``names`` are ever read from ``namespace``.

    A one-line :class:`UsageError` naming the variable when it is not defined or cannot be pickled,
    or when the whole is over :data:`MAX_IN_BYTES`.
    """
    import cloudpickle  # lazy: only a cell run with --in values pickles anything

    if not names:
        return b"", []
    crossings, values = [], {}
    for name in names:
        if name not in namespace:
            raise UsageError(f"--in {name}: there is no variable {name} in this notebook; nothing was submitted")
        value = namespace[name]
        try:
            size = len(cloudpickle.dumps(value))
        except Exception as error:  # whatever pickling raises, it is this variable's problem, said in one line
            reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
            raise UsageError(f"--in {name}: a {type_name(value)} cannot be pickled ({reason}); nothing was "
                             "submitted: pass what it is made from instead, and rebuild it in the cell") from None
        crossings.append(Crossing(name, type_name(value), size))
        values[name] = value
    data: bytes = cloudpickle.dumps(values)
    if len(data) > MAX_IN_BYTES:
        raise UsageError(f"--in: {', '.join(names)} are {human_bytes(len(data))} pickled, more than the "
                         f"{human_bytes(MAX_IN_BYTES)} a cell sends; nothing was submitted: put large data on the "
                         "cluster and pass its path")
    return data, crossings


class _NamesAndBytes(pickle.Unpickler):
    """``outputs.pkl``'s outer layer: a dict of names to bytes, which needs no class at all."""

    def find_class(self, module: str, name: str) -> Any:
        raise UsageError(f"outputs.pkl names {(module + '.' + name)[:80]}; only names and pickled bytes belong there")


def unpack_outputs(data: bytes, names: Sequence[str]) -> dict[str, Any]:
    """The ``--out`` values named ``names`` from ``outputs.pkl``; no other value is unpickled."""
    import cloudpickle  # lazy: only a cell run with --out values unpickles anything

    try:
        pickled = _NamesAndBytes(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
        raise UsageError(f"outputs.pkl is not what the runner writes ({error})") from None
    if not isinstance(pickled, dict) or not all(isinstance(v, bytes) for v in pickled.values()):
        raise UsageError("outputs.pkl is not what the runner writes (names and pickled bytes)")
    return {name: cloudpickle.loads(pickled[name]) for name in names if name in pickled}


def type_name(value: object) -> str:
    """``int``, ``numpy.ndarray``: the value's type as a person reads it."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


# ----- the staged run, in the project ---------------------------------------------------------
@dataclass(frozen=True)
class StagedRun:
    """A cell's run as the kernel left it in the project: what will cross the wire once approved."""

    token: str
    files: PrivateFolder
    """The run's staged folder, ``.betty/cell-runs/<token>``."""
    code: str
    crossings: tuple[Crossing, ...]
    inputs_sha256: str
    """The digest of ``inputs.pkl`` (of nothing, without ``--in``); the card names it and the upload checks it."""

    @property
    def folder(self) -> Path:
        """Where the run is staged."""
        return self.files.path

    @property
    def back(self) -> PrivateFolder:
        """Where what the job sends back is kept: ``back`` in the run's folder."""
        return self.files.child("back")

    @property
    def inputs(self) -> bytes:
        """The pickled ``--in`` values (``b""`` without any)."""
        return self.files.read("inputs.pkl", MAX_IN_BYTES) if self.files.exists("inputs.pkl") else b""

    @property
    def key(self) -> bytes:
        """The run's own key: the job signs what it sends back with it. Never shown, logged or sent elsewhere."""
        return bytes.fromhex(self.files.read(KEY_FILE, 200).decode("ascii", "replace").strip())

    def wire_lines(self) -> list[str]:
        """What crosses the wire, one line each: the cell's code, then each ``--in`` value."""
        lines = [f"cell.py: the cell's code, {len(self.code.splitlines())} lines"]
        lines += [f"{crossing.line()} (in inputs.pkl)" for crossing in self.crossings]
        return lines


def runs_folder(state: Path) -> Path:
    """Where the kernel stages its cell runs and keeps what comes back: ``.betty/cell-runs``."""
    return state / "cell-runs"


def stage(state: Path, code: str, namespace: Mapping[str, Any], names: Sequence[str]) -> StagedRun:
    """Pickle the ``--in`` values and write the run's files in the project; nothing leaves this machine here."""
    if len(code) > MAX_CODE_CHARS:
        raise UsageError(f"the cell is {len(code)} characters, more than the {MAX_CODE_CHARS} a cell run sends; "
                         "put the code in a module on the cluster and import it")
    data, crossings = pack_inputs(namespace, names)
    token = uuid.uuid4().hex
    files = run_files(state, token).make()
    files.write("cell.py", code.encode())
    if data:
        files.write("inputs.pkl", data)
    files.write(KEY_FILE, secrets.token_hex(32).encode())
    manifest = {"inputs": [[c.name, c.type, c.bytes] for c in crossings], "sha256": hashlib.sha256(data).hexdigest()}
    files.write("manifest.json", json.dumps(manifest).encode())
    return staged(state, token)


def run_files(state: Path, token: str) -> PrivateFolder:
    """The folder the run staged under ``token`` is kept in; a one-line UsageError for a malformed token."""
    run_folder(state, token)
    return PrivateFolder(state, (runs_folder(state).name, token))


def run_folder(state: Path, token: str) -> Path:
    """Where the run staged under ``token`` is kept in the project; a one-line UsageError for a malformed token."""
    if not _TOKEN.fullmatch(token):
        raise UsageError(f"{token[:40]!r} is not a staged cell run (32 hexadecimal digits)")
    return runs_folder(state) / token


def staged(state: Path, token: str) -> StagedRun:
    """The run staged under ``token``; a one-line UsageError when there is none (or its files changed, or its
    folder is not the person's alone)."""
    files = run_files(state, token)
    if not files.path.is_dir():
        raise UsageError(f"no cell run {token} is staged in this project; run the cell again")
    try:
        manifest = json.loads(files.read("manifest.json", _SMALL))
        code = files.read("cell.py", 4 * MAX_CODE_CHARS).decode("utf-8")
    except ValueError as error:
        raise UsageError(f"no cell run {token} is staged in this project ({error.__class__.__name__}); run the "
                         "cell again") from None
    except UsageError as error:
        raise UsageError(f"cell run {token} cannot be used: {error}; run the cell again") from None
    run = StagedRun(token, files, code, tuple(Crossing(*item) for item in manifest["inputs"]), manifest["sha256"])
    if hashlib.sha256(run.inputs).hexdigest() != run.inputs_sha256:
        raise UsageError(f"the --in values of cell run {token} changed after they were staged; run the cell again")
    return run


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

    def command(self, gpus: int, program: str = RUNNER) -> str:
        """The line that runs ``program`` (a runner and its arguments, already shell words) with :meth:`python`."""
        return f"exec {self.python(gpus)} -u {program}"

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


# ----- the job ---------------------------------------------------------------------------------
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

    def script(self, run_dir: str, logs: str, preamble: Sequence[str], program: str) -> SbatchScript:
        """The batch script that runs ``program`` (a runner and its arguments, shell words) in the environment,
        in ``run_dir``, after the lines of ``preamble``; it writes ``<logs>.out`` and ``<logs>.err`` there.

        Its ``#SBATCH`` lines are written by :meth:`~.sbatch.SbatchScript.written`, as every directive
        Betty writes: a value sbatch would split is quoted, a line break in one is refused.
        """
        options = [("job-name", self.name), ("partition", self.partition), ("time", str(self.minutes))]
        if self.gpus:
            options.append(("gpus", str(self.gpus)))
        options += [("chdir", run_dir), ("output", f"{run_dir}/{logs}.out"), ("error", f"{run_dir}/{logs}.err")]
        body = [*preamble, *self.environment.setup_lines(), "export MPLBACKEND=Agg",
                self.environment.command(self.gpus, program)]
        return SbatchScript.written(options, "\n".join(body) + "\n")


@dataclass(frozen=True)
class CellJob:
    """Everything the batch script of one cell run says."""

    run_dir: str
    """The run's directory on the cluster, absolute."""
    request: JobRequest
    outs: tuple[str, ...] = ()

    @property
    def environment(self) -> CellEnvironment:
        """Where the cell runs."""
        return self.request.environment

    def script(self) -> SbatchScript:
        """The batch script, exactly as it is uploaded and shown on the card."""
        here = shlex.quote(self.run_dir)
        return self.request.script(self.run_dir, "cell", [
            "# %%betty run: the cell (cell.py) and its --in values (inputs.pkl) are in this directory;",
            f"# {RUNNER} runs the cell, then writes result.json, figure-N.png and outputs.pkl beside them.",
            "# Nothing runs unless the directory is yours alone (mode 700).",
            f'cd -- {here} && [[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) || '
            f'{{ echo "betty: {self.run_dir} is not yours alone; the cell was not run" >&2; exit 1; }}',
        ], f"{RUNNER} {shlex.quote(self.token)}")

    @property
    def token(self) -> str:
        """The run's token, from its directory's name (``cell-<token>``)."""
        return self.run_dir.rstrip("/").rsplit("/cell-", 1)[-1]

    def settings(self) -> bytes:
        """``run.json``: what the runner needs besides the cell."""
        return json.dumps({"outs": list(self.outs), "max_out_bytes": MAX_OUT_BYTES, "token": self.token}).encode()


def run_dir(work_dir: str, token: str, kind: str = "cell") -> str:
    """The run's directory under ``work_dir`` (absolute): ``runs/cell-<token>``, ``runs/notebook-<token>``."""
    return f"{work_dir.rstrip('/')}/runs/{kind}-{token}"


def runner_source() -> bytes:
    """The runner program, as uploaded."""
    return (Path(__file__).with_name(RUNNER)).read_bytes()


# ----- what comes back -------------------------------------------------------------------------
@dataclass(frozen=True)
class CellResult:
    """What the runner said of the cell once it ended (``result.json``)."""

    ok: bool
    error: str | None
    """The cell's traceback, when it raised (untrusted text: render it escaped)."""
    figures: tuple[str, ...]
    outs: dict[str, dict[str, Any]]
    problems: tuple[str, ...]


_FIGURE = re.compile(r"^figure-[0-9]{1,4}\.png$")


def parse_result(text: str) -> CellResult:
    """``result.json`` read strictly: a runner's file, but from the cluster, so nothing in it is trusted."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise UsageError(f"the run's result.json is not JSON ({error})") from None
    if not isinstance(data, dict):
        raise UsageError("the run's result.json is not a JSON object")
    figures = [name for name in data.get("figures", []) if isinstance(name, str) and _FIGURE.fullmatch(name)]
    outs = {str(k): dict(v) for k, v in dict(data.get("outs") or {}).items() if isinstance(v, dict)}
    failure = data.get("error")
    return CellResult(ok=bool(data.get("ok")), error=str(failure) if failure else None, figures=tuple(figures),
                      outs=outs, problems=tuple(str(p) for p in data.get("problems", [])))


def check_back(run: StagedRun) -> CellResult:
    """What came back for ``run``, once its signature is checked with the run's key; a one-line UsageError when it
    was not signed with it (nothing of it is then loaded)."""
    back = run.back
    text = back.read("result.json", 4 * 2**20)
    figures = [str(name) for name in _figure_names(text)]
    files = {name: back.read(name, MAX_OUT_BYTES) if back.exists(name) else None for name in (*SIGNED, *figures)}
    signed = back.read("result.sig", 200).decode("ascii", "replace").strip() if back.exists("result.sig") else ""
    if not hmac.compare_digest(signed.encode(), signature(run.key, run.token, files).encode()):
        raise UsageError(f"what came back for cell run {run.token} is not the run's own (its signature does not "
                         "match): nothing of it was loaded; someone else may have written into its directory on "
                         "the cluster")
    return parse_result(text.decode("utf-8", "replace"))


def _figure_names(text: bytes) -> list[object]:
    """The figures ``result.json`` names, as the runner signed them (before anything else is read from it)."""
    try:
        names = json.loads(text).get("figures", [])
    except (ValueError, AttributeError):
        return []
    return [name for name in names if isinstance(name, str) and _FIGURE.fullmatch(name)] if isinstance(names, list) \
        else []
