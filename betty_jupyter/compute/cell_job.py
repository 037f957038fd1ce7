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
from ..cluster.job_request import CellEnvironment, JobRequest
from ..cluster.sbatch import SbatchScript

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


@dataclass(frozen=True)
class CellJob:
    """Everything the batch script of one cell run says."""

    run_dir: str
    """The run's directory on the cluster, absolute."""
    request: JobRequest
    outs: tuple[str, ...] = ()
    chained: bool = False
    """A segment of a continuation chain (``--segments``): the runner is started with ``betty_run``, which
    forwards the checkpoint signal (SIGUSR1) to it, and each segment runs the cell again from the top."""

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
        ], f"{RUNNER} {shlex.quote(self.token)}", "betty_run" if self.chained else "exec")

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
