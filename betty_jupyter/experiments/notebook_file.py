"""Experiment notebooks as files: plain nbformat v4 JSON, checked against nbformat's own schema.

Importing ``nbformat`` imports ``jsonschema``, whose format checkers compile dozens of
grammars at import (over a second on a busy machine), and that for every `betty submit`.
Betty needs none of it: a notebook here is a dict, written exactly as ``nbformat.writes``
writes it (sorted keys, one-space indent, text split into lines) and validated against the
schema file ``nbformat`` ships, with ``fastjsonschema`` (what ``nbformat.validate`` itself
uses). A notebook in another major version than 4 is left to ``nbformat`` to read.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
import secrets
import sys
import uuid
from pathlib import Path
from typing import Any, Callable

from ..errors import ExperimentError
from ..wiki.files import write_atomically

Notebook = dict[str, Any]
"""An nbformat v4 notebook: ``nbformat``, ``nbformat_minor``, ``metadata``, ``cells``."""

NBFORMAT, NBFORMAT_MINOR = 4, 5
"""The version of the notebooks Betty writes (the one ``nbformat.v4.new_notebook`` makes)."""


def new_notebook(cells: list[dict[str, Any]], metadata: dict[str, Any]) -> Notebook:
    """A v4.5 notebook of ``cells``."""
    return {"nbformat": NBFORMAT, "nbformat_minor": NBFORMAT_MINOR, "metadata": metadata, "cells": cells}


def python_metadata() -> dict[str, Any]:
    """``kernelspec`` and ``language_info`` as the ``python3`` kernel (ipykernel, on this Python) writes them.

    JupyterLab writes both into a notebook when its kernel starts; a notebook that already holds
    the same values opens clean instead of marked unsaved. The kernel's display name is its
    installed spec's (``kernels/python3/kernel.json`` on Jupyter's data path), else ipykernel's own.
    """
    version = sys.version.split()[0]
    return {
        "kernelspec": {"name": "python3", "display_name": _python3_display_name(), "language": "python"},
        "language_info": {"name": "python", "version": version, "mimetype": "text/x-python",
                          "codemirror_mode": {"name": "ipython", "version": sys.version_info[0]},
                          "pygments_lexer": "ipython3", "nbconvert_exporter": "python", "file_extension": ".py"},
    }


@functools.lru_cache(maxsize=1)
def _python3_display_name() -> str:
    from jupyter_core.paths import jupyter_path  # lazy: only a notebook being written needs Jupyter's paths

    for directory in jupyter_path("kernels", "python3"):
        try:
            spec = json.loads((Path(directory) / "kernel.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(spec, dict) and isinstance(spec.get("display_name"), str):
            return str(spec["display_name"])[:200]
    return f"Python {sys.version_info[0]} (ipykernel)"


def markdown_cell(source: str) -> dict[str, Any]:
    """A markdown cell."""
    return {"id": _cell_id(), "cell_type": "markdown", "source": source, "metadata": {}}


def code_cell(source: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A code cell, not run yet."""
    return {"id": _cell_id(), "cell_type": "code", "metadata": metadata or {}, "execution_count": None,
            "source": source, "outputs": []}


def stream_output(text: str) -> dict[str, Any]:
    """What a cell printed to stdout."""
    return {"output_type": "stream", "name": "stdout", "text": text}


def _cell_id() -> str:
    return uuid.uuid4().hex[:8]  # as nbformat makes them


def read_notebook(path: Path) -> Notebook:
    """The notebook at ``path`` (ExperimentError when it is not a notebook)."""
    return read_notebook_text(path)[0]


def read_notebook_text(path: Path) -> tuple[Notebook, str]:
    """The notebook at ``path`` and the file's text (ExperimentError when it is not a notebook)."""
    try:
        text = path.read_text(encoding="utf-8")
        book = json.loads(text)
    except ValueError as exc:  # not UTF-8, or not JSON
        raise ExperimentError(f"{path} is not a notebook Betty can read ({exc}); fix or remove it") from None
    if not isinstance(book, dict):
        raise ExperimentError(f"{path} is not a notebook Betty can read (no notebook in it); fix or remove it")
    if book.get("nbformat") != NBFORMAT:
        # lazy: nbformat is heavy; only a notebook in another version needs its converters
        import nbformat

        try:
            return dict(nbformat.read(path, as_version=NBFORMAT)), text
        except ValueError as exc:
            raise ExperimentError(f"{path} is not a notebook Betty can read ({exc}); fix or remove it") from None
    return book, text


def write_notebook(path: Path, book: Notebook, changed: list[dict[str, Any]] | None = None,
                   stored: str | None = None) -> None:
    """Validate ``book``, then write it atomically and durably (as wiki pages are: :func:`~..wiki.files.write_atomically`).

    ``changed``: the only cells Betty changed in a notebook it read from the file; then only they and the notebook's
    frame (versions, metadata) are validated, and every other cell is written back as the file had it (``stored``:
    the file's text, whose other cells are then copied rather than written anew)."""
    write_atomically(path, notebook_text(book, changed, stored))


def notebook_text(book: Notebook, changed: list[dict[str, Any]] | None = None, stored: str | None = None) -> str:
    """The file's text, byte for byte what ``nbformat.writes`` makes of ``book``; ExperimentError when invalid
    (``changed``, ``stored``: as :func:`write_notebook`; a cell copied from ``stored`` keeps the file's bytes)."""
    check(book if changed is None or not isinstance(book, dict) else {**book, "cells": changed})
    as_stored = _as_stored(book)
    if changed is not None and stored is not None:
        ids = {id(cell) for cell in changed}
        spliced = _spliced(as_stored, [id(cell) in ids for cell in book["cells"]], stored)
        if spliced is not None:
            return spliced
    parts: list[str] = []
    _encode(as_stored, "\n", parts)
    return "".join(parts)


_CELLS = re.compile(r'^ "cells": \[$(.*?)^ \],?$', re.M | re.S)
"""The list of cells in a notebook laid out as ``nbformat.writes`` lays it out (its keys one space in)."""
_CELL_EDGE = re.compile(r"^  ([{}]),?$", re.M)
"""A cell's first or last line there (two spaces in)."""


def _spliced(as_stored: Notebook, changed: list[bool], stored: str) -> str | None:
    """The notebook's text with each cell not ``changed`` copied from ``stored`` (the file it was read from), or None
    when the file is not laid out as nbformat writes it or a copied cell would not hold what the notebook holds."""
    spans = _cell_texts(stored, len(changed))
    if spans is None:
        return None
    marker = f"\0{secrets.token_hex(8)}\0"
    parts: list[str] = []
    _encode({**as_stored, "cells": [marker] * len(changed)}, "\n", parts)
    frame = "".join(parts).split(_STRING(marker))
    if len(frame) != len(changed) + 1:
        return None
    texts = [frame[0]]
    for cell, span, is_changed, after in zip(as_stored["cells"], spans, changed, frame[1:]):
        if is_changed:
            cell_parts: list[str] = []
            _encode(cell, "\n  ", cell_parts)
            texts.append("".join(cell_parts))
        else:
            try:
                if json.loads(span) != cell:
                    return None
            except ValueError:
                return None
            texts.append(span)
        texts.append(after)
    return "".join(texts)


def _cell_texts(text: str, count: int) -> list[str] | None:
    """The text of each of the ``count`` cells of notebook file ``text``, braces included; None when it is not laid
    out as nbformat writes it (each cell's braces alone on lines indented by two spaces)."""
    cells = _CELLS.search(text)
    if cells is None:
        return None
    spans: list[str] = []
    start: int | None = None
    for edge in _CELL_EDGE.finditer(text, cells.start(1), cells.end(1)):
        if edge.group(1) == "{":
            if start is not None:
                return None
            start = edge.start(1)
        else:
            if start is None:
                return None
            spans.append(text[start:edge.end(1)])
            start = None
    return spans if start is None and len(spans) == count else None


def check(book: Notebook) -> None:
    """ExperimentError unless ``book`` is a valid nbformat v4 notebook (its minor version's schema)."""
    minor = book.get("nbformat_minor") if isinstance(book, dict) else None
    if not isinstance(book, dict) or book.get("nbformat") != NBFORMAT or not isinstance(minor, int):
        raise ExperimentError("not an nbformat v4 notebook; Betty writes only those")
    # lazy: fastjsonschema is needed only when a notebook is written
    import fastjsonschema

    try:
        _validator(minor)(book)
    except fastjsonschema.JsonSchemaException as exc:
        raise ExperimentError(f"the notebook is not valid nbformat v4.{minor} ({exc})") from None


@functools.cache
def _validator(minor: int) -> Callable[[Any], Any]:
    """The compiled schema of nbformat v4.``minor`` (the newest one nbformat ships for a minor it does not know).

    The schema of the notebooks Betty writes comes compiled with Betty (:mod:`.notebook_check`), as long as the
    installed nbformat ships that very schema; any other is compiled here, which takes a tenth of a second."""
    text = _schema_text(minor)
    if minor == NBFORMAT_MINOR:
        # lazy: the compiled schema is 120 kB of code; only writing a notebook needs it
        from . import notebook_check

        if hashlib.sha256(text.encode("utf-8")).hexdigest() == notebook_check.SCHEMA_SHA256:
            return notebook_check.validate
    # lazy: fastjsonschema is needed only when a notebook is written
    import fastjsonschema

    return fastjsonschema.compile(json.loads(text))


def _schema_text(minor: int) -> str:
    """nbformat's schema of v4.``minor`` (the newest one it ships for a minor it does not know)."""
    spec = importlib.util.find_spec("nbformat")  # finds the package without importing it (and jsonschema)
    if spec is None or not spec.submodule_search_locations:
        raise ExperimentError("nbformat is not installed; reinstall Betty (`pip install betty-jupyter`)")
    schemas = Path(next(iter(spec.submodule_search_locations))) / "v4"
    schema = schemas / f"nbformat.v4.{minor}.schema.json"
    return (schema if schema.is_file() else schemas / "nbformat.v4.schema.json").read_text(encoding="utf-8")


def write_check_module() -> Path:
    """Compile the schema of the notebooks Betty writes into :mod:`.notebook_check` (run when nbformat changes it)."""
    # lazy: fastjsonschema's code generator; only regenerating the module needs it
    import fastjsonschema

    text = _schema_text(NBFORMAT_MINOR)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    code = fastjsonschema.compile_to_code(json.loads(text))
    header = (f'"""nbformat v4.{NBFORMAT_MINOR}\'s schema compiled to Python by fastjsonschema: made by '
              f'`python -m betty_jupyter.experiments.notebook_file`; do not edit."""\n'
              f"# fmt: off\n"
              f"SCHEMA_SHA256 = {digest!r}\n")
    target = Path(__file__).with_name("notebook_check.py")
    target.write_text(header + code, encoding="utf-8")
    return target


_TRANSIENT = ("orig_nbformat", "orig_nbformat_minor", "signature")
"""What ``nbformat`` never stores in a notebook's metadata (a signature, the version converted from)."""


def _as_stored(book: Notebook) -> Notebook:
    """What the file holds of ``book``: without what ``nbformat`` never stores (the fields above, a cell's trust),
    text split into lines. A copy of the parts that differ; ``book`` stays as it was."""
    stored = {**book, "metadata": {key: value for key, value in book["metadata"].items() if key not in _TRANSIENT}}
    stored["cells"] = [_stored_cell(cell) for cell in book["cells"]]
    return stored


def _stored_cell(cell: dict[str, Any]) -> dict[str, Any]:
    stored = {**cell, "source": _lines(cell["source"])} if "source" in cell else dict(cell)
    metadata = cell.get("metadata")
    if isinstance(metadata, dict) and "trusted" in metadata:
        stored["metadata"] = {key: value for key, value in metadata.items() if key != "trusted"}
    if isinstance(cell.get("outputs"), list):
        stored["outputs"] = [{**output, "text": _lines(output["text"])}
                             if output.get("output_type") == "stream" and "text" in output else output
                             for output in cell["outputs"]]
    return stored


def _encode(value: Any, newline: str, parts: list[str]) -> None:
    """Append ``value`` as ``json.dumps(value, indent=1, sort_keys=True, separators=(",", ": "),
    ensure_ascii=False)`` writes it (at the depth ``newline`` indents to), without its pure-Python encoder's
    generators: a notebook is written a thousand times in a watcher's pass."""
    if isinstance(value, str):
        parts.append(_STRING(value))
    elif isinstance(value, dict) and value:
        inner = newline + " "
        separator = "{"
        for key, item in sorted(value.items()):
            parts.append(separator + inner + (_STRING(key) if isinstance(key, str) else _STRING(_scalar(key))) + ": ")
            _encode(item, inner, parts)
            separator = ","
        parts.append(newline + "}")
    elif isinstance(value, (list, tuple)) and value:
        inner = newline + " "
        separator = "["
        for item in value:
            parts.append(separator + inner)
            _encode(item, inner, parts)
            separator = ","
        parts.append(newline + "]")
    else:
        parts.append(_scalar(value))


def _scalar(value: Any) -> str:
    """A JSON number, true/false/null, ``{}`` or ``[]`` as ``json.dumps`` writes it (TypeError for anything else)."""
    return json.dumps(value)


_STRING: Callable[[str], str] = json.encoder.encode_basestring
"""A JSON string as ``json.dumps(..., ensure_ascii=False)`` writes it (the C encoder's, where Python has it)."""


def _lines(text: Any) -> Any:
    return text.splitlines(True) if isinstance(text, str) else text


if __name__ == "__main__":
    print(f"wrote {write_check_module()}")
