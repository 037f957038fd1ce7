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
import importlib.util
import json
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
    try:
        book = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, or not JSON
        raise ExperimentError(f"{path} is not a notebook Betty can read ({exc}); fix or remove it") from None
    if not isinstance(book, dict):
        raise ExperimentError(f"{path} is not a notebook Betty can read (no notebook in it); fix or remove it")
    if book.get("nbformat") != NBFORMAT:
        # lazy: nbformat is heavy; only a notebook in another version needs its converters
        import nbformat

        try:
            return dict(nbformat.read(path, as_version=NBFORMAT))
        except ValueError as exc:
            raise ExperimentError(f"{path} is not a notebook Betty can read ({exc}); fix or remove it") from None
    return book


def write_notebook(path: Path, book: Notebook) -> None:
    """Validate ``book``, then write it atomically and durably (as wiki pages are: :func:`~..wiki.files.write_atomically`)."""
    write_atomically(path, notebook_text(book))


def notebook_text(book: Notebook) -> str:
    """The file's text, byte for byte what ``nbformat.writes`` makes of ``book``; ExperimentError when invalid."""
    check(book)
    on_disk = json.loads(json.dumps(book))  # a copy: ``book`` stays as it was
    _strip_transient(on_disk)
    for cell in on_disk["cells"]:
        _split(cell, "source")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                _split(output, "text")
    return json.dumps(on_disk, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


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
    """The compiled schema of nbformat v4.``minor`` (the newest one nbformat ships for a minor it does not know)."""
    # lazy: fastjsonschema is needed only when a notebook is written
    import fastjsonschema

    spec = importlib.util.find_spec("nbformat")  # finds the package without importing it (and jsonschema)
    if spec is None or not spec.submodule_search_locations:
        raise ExperimentError("nbformat is not installed; reinstall Betty (`pip install betty-jupyter`)")
    schemas = Path(next(iter(spec.submodule_search_locations))) / "v4"
    schema = schemas / f"nbformat.v4.{minor}.schema.json"
    text = (schema if schema.is_file() else schemas / "nbformat.v4.schema.json").read_text(encoding="utf-8")
    return fastjsonschema.compile(json.loads(text))


def _strip_transient(book: Notebook) -> None:
    """Drop what ``nbformat`` never stores in a file (a signature, the version converted from, trust)."""
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        book["metadata"].pop(key, None)
    for cell in book["cells"]:
        cell.get("metadata", {}).pop("trusted", None)


def _split(part: dict[str, Any], key: str) -> None:
    if isinstance(part.get(key), str):
        part[key] = part[key].splitlines(True)
