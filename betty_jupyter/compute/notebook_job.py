"""A notebook as a batch job (``betty submit-notebook``): its parameters, the notebook that is sent, the script.

Parameters follow papermill's convention: the notebook's cell tagged ``parameters`` holds the
defaults, and Betty inserts after it a new cell tagged ``injected-parameters`` that sets each
parameter given (:func:`inject`). That cell is made from the parsed values with ``repr``
(:func:`parameters_source`), never by pasting text: ``--param msg='"); import os'`` sets ``msg``
to that string. The notebook goes into the run's own directory on the cluster beside
:mod:`.notebook_runner`, which executes it there with nbclient and leaves the executed notebook
(outputs and, for a failing notebook, the error of the cell that failed) for Betty to bring back.
A sweep sends one notebook per point of its grid (``notebook-N.ipynb``) and runs them as one job
array.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import keyword
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from ..json_text import parse_json
from ..cluster.job_request import CellEnvironment, JobRequest
from ..cluster.sbatch import SbatchScript

PARAMETERS_TAG = "parameters"
"""The tag of the notebook's cell of default parameters (papermill's convention)."""
INJECTED_TAG = "injected-parameters"
"""The tag of the cell Betty inserts with the parameters given."""
RUNNER = "notebook_runner.py"
"""The runner's file name in the run's directory."""
NEEDED = ("nbclient", "ipykernel")
"""What the environment's ``python3`` must import to execute a notebook."""
MAX_NOTEBOOK_BYTES = 32 * 2**20
"""The most a notebook may be, sent or brought back."""
_LITERALS = (str, int, float, complex, bool, type(None), list, tuple, dict, set)


def parse_value(text: str) -> Any:
    """A parameter's value: a Python literal (``3e-4``, ``True``, ``[1, 2]``, ``'a b'``) as itself, anything else
    as the text it is."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, _LITERALS) else text


def parameter_name(name: str, option: str = "--param") -> str:
    """``name`` when it is a Python variable's name; a one-line UsageError otherwise."""
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
        example = "lr=1e-4,3e-4" if option == "--grid" else "lr=3e-4"
        raise UsageError(f"{option}: {name[:60]!r} is not a Python variable's name; e.g. {option} {example}")
    return name


def parse_parameters(words: Sequence[str]) -> dict[str, Any]:
    """``["lr=3e-4", "tag=run a"]`` → ``{"lr": 0.0003, "tag": "run a"}``; a one-line UsageError for a bad word."""
    parameters: dict[str, Any] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if not equals:
            raise UsageError(f"--param: {word[:60]!r} is not NAME=VALUE, e.g. --param lr=3e-4")
        name = parameter_name(name.strip())
        if name in parameters:
            raise UsageError(f"--param: {name} is given twice")
        parameters[name] = parse_value(value)
    return parameters


def parameters_source(parameters: Mapping[str, Any]) -> str:
    """The injected cell's code: one ``name = <repr of the value>`` line each, checked to be exactly that."""
    lines = ["# Parameters (injected by Betty)"]
    lines += [f"{parameter_name(name)} = {value!r}" for name, value in parameters.items()]
    source = "\n".join(lines) + "\n"
    statements = ast.parse(source).body
    if len(statements) != len(parameters) or not all(_is_assignment(s) for s in statements):
        raise UsageError("a parameter's value cannot be written as a Python literal; give plain numbers, text, "
                         "lists or dicts")
    return source


def _is_assignment(statement: ast.stmt) -> bool:
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return False
    try:
        ast.literal_eval(statement.value)
    except ValueError:
        return False
    return True


NOTEBOOK_NESTING = 200
"""How deep a notebook's JSON may nest (its outputs may hold JSON of their own); deeper is refused in one line."""


def read_notebook(path: Path) -> dict[str, Any]:
    """The notebook at ``path`` as JSON; a one-line UsageError when it cannot be read or is not a v4 notebook."""
    return read_notebook_and_digest(path)[0]


def read_notebook_and_digest(path: Path) -> tuple[dict[str, Any], str]:
    """The notebook at ``path`` and the sha256 of exactly the bytes it was read from (one read, so they agree)."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise UsageError(f"{path} is larger than the {MAX_NOTEBOOK_BYTES // 2**20} MiB a notebook run sends; "
                             "clear its outputs first")
        data = path.read_bytes()
        book = parse_json(data.decode("utf-8"), max_depth=NOTEBOOK_NESTING)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UsageError(f"cannot read the notebook {path}: {str(error).splitlines()[0][:200]}") from None
    if not isinstance(book, dict) or book.get("nbformat") != 4 or not isinstance(book.get("cells"), list):
        raise UsageError(f"{path} is not a Jupyter notebook (nbformat 4)")
    return book, hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """The sha256 of the file at ``path`` (a one-line UsageError when it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise UsageError(f"cannot read the notebook {path}: {error.strerror or error}") from None


@dataclass(frozen=True)
class Injected:
    """A notebook with its parameters injected, and where they went."""

    notebook: dict[str, Any]
    source: str
    """The injected cell's code, exactly."""
    after: int | None
    """The index of the cell tagged ``parameters`` it follows; None when there is none (then it is the first cell)."""

    def where(self) -> str:
        """Where the injected cell is, in one line."""
        if self.after is None:
            return "no cell is tagged parameters: the injected-parameters cell is inserted at the top"
        return f"after cell {self.after + 1}, the one tagged parameters"


def inject(notebook: Mapping[str, Any], parameters: Mapping[str, Any]) -> Injected:
    """A copy of ``notebook`` with a cell tagged ``injected-parameters`` after its ``parameters`` cell (or first).

    A cell already tagged ``injected-parameters`` (from an earlier run) is removed first.
    """
    book = copy.deepcopy(dict(notebook))
    cells = [cell for cell in book["cells"] if INJECTED_TAG not in _tags(cell)]
    source = parameters_source(parameters)
    found = next((index for index, cell in enumerate(cells)
                  if cell.get("cell_type") == "code" and PARAMETERS_TAG in _tags(cell)), None)
    cell: dict[str, Any] = {"cell_type": "code", "execution_count": None, "metadata": {"tags": [INJECTED_TAG]},
                            "outputs": [], "source": source}
    if int(book.get("nbformat_minor", 0)) >= 5:
        taken = {c.get("id") for c in cells}
        cell["id"] = next(f"{INJECTED_TAG}-{n}" if n else INJECTED_TAG for n in range(len(cells) + 1)
                          if (f"{INJECTED_TAG}-{n}" if n else INJECTED_TAG) not in taken)
    cells.insert(0 if found is None else found + 1, cell)
    book["cells"] = cells
    return Injected(book, source, found)


def _tags(cell: Any) -> list[str]:
    tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell, dict) else []
    return [tag for tag in tags if isinstance(tag, str)] if isinstance(tags, list) else []


def notebook_bytes(notebook: Mapping[str, Any]) -> bytes:
    """The notebook as it is uploaded."""
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()


# ----- the job ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NotebookJob:
    """Everything the batch script of one notebook run says (before a sweep makes it an array)."""

    run_dir: str
    request: JobRequest
    tasks: int = 0
    """The sweep's number of points; 0 for a single run."""

    @property
    def environment(self) -> CellEnvironment:
        """Where the notebook runs."""
        return self.request.environment

    def script(self) -> SbatchScript:
        """The batch script before a sweep's array lines (:func:`~..experiments.sweep.sweep_script`) are added."""
        each = "-%a" if self.tasks else ""
        source, target = (("notebook-$SLURM_ARRAY_TASK_ID.ipynb", "executed-$SLURM_ARRAY_TASK_ID.ipynb")
                          if self.tasks else ("notebook.ipynb", "executed.ipynb"))
        return self.request.script(self.run_dir, f"notebook{each}", [
            f"# betty submit-notebook: {source} (its parameters injected) is in this directory;",
            f"# {RUNNER} executes it with nbclient and writes {target} beside it, also when a cell fails.",
        ], f'{RUNNER} "{source}" "{target}"')


def executed_names(tasks: int) -> list[str]:
    """The executed notebooks a run leaves: ``executed.ipynb``, or ``executed-N.ipynb`` for each task of a sweep."""
    return [f"executed-{index}.ipynb" for index in range(tasks)] if tasks else ["executed.ipynb"]


def runner_source() -> bytes:
    """The runner program, as uploaded."""
    return Path(__file__).with_name(RUNNER).read_bytes()
