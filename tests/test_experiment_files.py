"""What recording writes stays what nbformat would write, without importing nbformat; the ledger is indexed.

The full nbformat validation happens here, in the test: Betty checks its notebooks against
nbformat's own schema file without importing ``nbformat`` (and ``jsonschema`` behind it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import fastjsonschema
import nbformat
import pytest

from betty_jupyter.errors import ExperimentError
from betty_jupyter.experiments import notebook_file
from betty_jupyter.experiments.editors import OpenNotebooks
from betty_jupyter.experiments.ledger import Experiment, Ledger, StateChange
from betty_jupyter.experiments.record import record_submission
from betty_jupyter.experiments.status_cell import write_status
from betty_jupyter.experiments.watcher import JobWatcher
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import files
from conftest import REPO
from watcher_support import EndedSlurm

HOSTILE = "</script><img src=x onerror=alert(1)> ünïcödé «ok» 💥\r\nline\ttwo"


def experiment(slug: str = "2026-11-25-lora", job_id: str = "42", goal: str = HOSTILE) -> Experiment:
    return Experiment(slug=slug, job_id=job_id, cluster="betty-dev", submitted="2026-11-25T10:00:00", goal=goal,
                      script=f"#!/bin/bash\necho '{HOSTILE}'\n", script_path=f"/home/u/.betty/scripts/{slug}.sbatch",
                      partition="debug", resources={"time_minutes": 5, "gpus": "1 × h100"})


def recorded(root: Path) -> tuple[Workspace, Experiment, Path]:
    workspace = Workspace.at(root)
    workspace.wiki.mkdir()
    record = record_submission(workspace, experiment())
    return workspace, record, workspace.root / record.notebook


def test_a_recorded_notebook_is_valid_nbformat_written_as_nbformat_writes_it(tmp_path):
    _, record, path = recorded(tmp_path)
    text = path.read_text(encoding="utf-8")
    book = nbformat.reads(text, as_version=4)
    nbformat.validate(book)
    assert text == nbformat.writes(book), "the file is byte for byte what nbformat writes"
    made = nbformat.v4.new_notebook(cells=[], metadata=book.metadata)
    assert {key: book[key] for key in made if key != "cells"} == {key: made[key] for key in made if key != "cells"}
    for cell in book.cells:
        maker = nbformat.v4.new_code_cell if cell.cell_type == "code" else nbformat.v4.new_markdown_cell
        assert cell == maker(cell.source, id=cell.id, metadata=cell.metadata), "each cell is what nbformat makes"
    assert [cell.id for cell in book.cells] == list(dict.fromkeys(cell.id for cell in book.cells))
    assert "&lt;/script&gt;" in book.cells[0].source and "<img" not in book.cells[0].source
    assert book.metadata["betty"] == {"job_id": record.job_id, "cluster": record.cluster, "page": record.page}


def test_the_status_goes_into_its_cell_and_every_other_byte_is_what_nbformat_would_write(tmp_path):
    workspace, record, path = recorded(tmp_path)
    book = nbformat.read(path, as_version=4)
    book.cells.append(nbformat.v4.new_code_cell("plot()", metadata={"tags": ["mine"], "trusted": True}, outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "a\nb\n", "image/png": "iVBORw0KGgo=\n"}),
        nbformat.v4.new_output("execute_result", data={"text/html": f"<b>{HOSTILE}</b>"}, execution_count=3),
        nbformat.v4.new_output("error", ename="E", evalue=HOSTILE, traceback=["line 1", "line 2"]),
    ], execution_count=3))
    book.cells[0].source = "# my notes\n\nsaved in JupyterLab"
    nbformat.write(book, path)
    line = f"job 42 on betty-dev: COMPLETED · {HOSTILE}"

    write_status(workspace, record, line)

    expected = nbformat.reads(nbformat.writes(book), as_version=4)
    status = next(cell for cell in expected.cells if "betty-status" in cell.metadata.get("tags", []))
    status.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    assert path.read_text(encoding="utf-8") == nbformat.writes(expected)
    nbformat.validate(nbformat.read(path, as_version=4))


def test_a_status_written_keeps_every_other_cell_as_the_file_holds_it(tmp_path):
    workspace, record, path = recorded(tmp_path)
    book = json.loads(path.read_text(encoding="utf-8"))
    book["cells"][0]["source"] = ["# my notes\n", "saved by another editor"]
    path.write_text(json.dumps(book, indent=1, ensure_ascii=False), encoding="utf-8")  # its keys unsorted
    before = notebook_file._cell_texts(path.read_text(encoding="utf-8"), len(book["cells"]))
    line = f"job 42 on betty-dev: COMPLETED · {HOSTILE}"

    write_status(workspace, record, line)

    text = path.read_text(encoding="utf-8")
    after = notebook_file._cell_texts(text, len(book["cells"]))
    status = [index for index, cell in enumerate(book["cells"]) if "betty-status" in cell["metadata"].get("tags", [])]
    assert [span for index, span in enumerate(after) if index not in status] == [
        span for index, span in enumerate(before) if index not in status]
    for index in status:
        book["cells"][index]["outputs"] = [{"name": "stdout", "output_type": "stream",
                                            "text": (line + "\n").splitlines(True)}]
    assert json.loads(text) == book
    nbformat.validate(nbformat.reads(text, as_version=4))


def test_a_status_written_into_a_notebook_laid_out_otherwise_rewrites_it_as_nbformat_writes_it(tmp_path):
    workspace, record, path = recorded(tmp_path)
    book = nbformat.read(path, as_version=4)
    path.write_text(json.dumps(json.loads(nbformat.writes(book)), indent=2), encoding="utf-8")
    line = "job 42 on betty-dev: COMPLETED"

    write_status(workspace, record, line)

    status = next(cell for cell in book.cells if "betty-status" in cell.metadata.get("tags", []))
    status.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    assert path.read_text(encoding="utf-8") == nbformat.writes(book)


@pytest.mark.parametrize("broken", ['{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": '
                                    '"code", "metadata": {"tags": ["betty-status"]}}]}', "{not json", "[]"])
def test_a_broken_notebook_is_refused_in_one_line_and_left_as_it_was(tmp_path, broken):
    workspace, record, path = recorded(tmp_path)
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(ExperimentError) as refused:
        write_status(workspace, record, "job 42 on betty-dev: COMPLETED")
    assert "\n" not in str(refused.value) and "notebook" in str(refused.value)
    assert path.read_text(encoding="utf-8") == broken


def test_recording_and_writing_a_status_import_neither_nbformat_nor_jsonschema(tmp_path):
    code = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(REPO)!r})
from betty_jupyter.experiments.editors import OpenNotebooks
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.experiments.record import record_submission
from betty_jupyter.experiments.status_cell import write_status
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import files
workspace = Workspace.at({str(tmp_path)!r})
workspace.wiki.mkdir()
record = record_submission(workspace, Experiment(**{dataclasses.asdict(experiment())!r}))
write_status(workspace, record, "job 42 on betty-dev: COMPLETED")
print(sorted(name for name in ("nbformat", "jsonschema", "rfc3987_syntax", "lark") if name in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "COMPLETED" in (tmp_path / "notebooks/experiments/2026-11-25-lora.ipynb").read_text()


def test_the_shipped_notebook_check_is_the_installed_schema_and_judges_as_it_does(tmp_path):
    shipped = importlib.import_module("betty_jupyter.experiments.notebook_check")
    text = notebook_file._schema_text(notebook_file.NBFORMAT_MINOR)
    assert hashlib.sha256(text.encode()).hexdigest() == shipped.SCHEMA_SHA256, (
        "nbformat ships another v4.5 schema: run `python -m betty_jupyter.experiments.notebook_file` and commit it")
    compiled = fastjsonschema.compile(json.loads(text))
    _, _, path = recorded(tmp_path)
    good = json.loads(path.read_text())
    bad = [{**good, "cells": [{**good["cells"][0], "source": 3}]}, {**good, "nbformat_minor": "5"},
           {**good, "cells": [{"cell_type": "code", "source": ""}]}, {**good, "extra": 1}, [], None]
    assert shipped.validate(good) == compiled(good)
    for notebook in bad:
        with pytest.raises(fastjsonschema.JsonSchemaException) as theirs:
            compiled(notebook)
        with pytest.raises(fastjsonschema.JsonSchemaException) as ours:
            shipped.validate(notebook)
        assert str(ours.value) == str(theirs.value)


def test_recording_compiles_no_schema_while_nbformat_ships_the_one_betty_was_built_with(tmp_path, monkeypatch):
    notebook_file._validator.cache_clear()
    monkeypatch.setattr(fastjsonschema, "compile", lambda *a, **k: pytest.fail("the schema was compiled"))
    _, _, path = recorded(tmp_path)
    with pytest.raises(ExperimentError, match="not valid nbformat v4.5"):
        notebook_file.check({**json.loads(path.read_text()), "extra": 1})
    notebook_file._validator.cache_clear()


OLD_SCHEMA = """
CREATE TABLE experiments (slug TEXT PRIMARY KEY, cluster TEXT NOT NULL, job_id TEXT NOT NULL, record TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'PENDING', finished INTEGER NOT NULL DEFAULT 0, owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0, updated REAL NOT NULL, UNIQUE (cluster, job_id));
CREATE TABLE notebook_status (slug TEXT PRIMARY KEY, line TEXT NOT NULL, behind INTEGER NOT NULL DEFAULT 0)
"""
"""The ledger as Betty wrote it before its queries had indexes."""


def test_a_ledger_from_before_the_indexes_gets_them_and_keeps_its_experiments(tmp_path):
    path = tmp_path / "experiments.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        record = experiment()
        db.execute("INSERT INTO experiments (slug, cluster, job_id, record, updated) VALUES (?, ?, ?, ?, 0)",
                   (record.slug, record.cluster, record.job_id, json.dumps(dataclasses.asdict(record))))
        db.execute("INSERT INTO notebook_status (slug, line, behind) VALUES (?, 'job 42 on betty-dev: RUNNING', 1)",
                   (record.slug,))
    db.close()

    ledger = Ledger(path)

    with sqlite3.connect(path) as db:
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        plans = {query: " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + query, args)) for query, args in [
            ("SELECT record FROM experiments WHERE slug = ? OR job_id = ?", ("x", "42")),
            ("SELECT record FROM experiments WHERE finished = 0 AND owner = ?", ("me",)),
            ("SELECT e.record, n.line FROM notebook_status n CROSS JOIN experiments e ON e.slug = n.slug "
             "WHERE n.behind = 1", ()),
        ]}
    db.close()
    assert {"experiments_by_job", "experiments_unfinished", "notebooks_behind"} <= indexes
    assert all("SCAN experiments " not in plan + " " and "SCAN e " not in plan + " " for plan in plans.values()), plans
    assert ledger.get("42") is not None and ledger.get("42").experiment == record  # type: ignore[union-attr]
    assert [tracked.experiment.slug for tracked, _ in ledger.notebooks_behind()] == [record.slug]


def test_taken_slugs_are_the_name_and_its_numbered_ones_only(tmp_path):
    ledger = Ledger(tmp_path / "experiments.sqlite")
    for number, slug in enumerate(["2026-11-25-lora", "2026-11-25-lora-2", "2026-11-25-lora-extra", "2026-11-25-lora2",
                                   "2026-11-25-lor", "2026-11-25-lorb"]):
        ledger.add(experiment(slug=slug, job_id=str(number)))
    assert ledger.slugs_from("2026-11-25-lora") == {"2026-11-25-lora", "2026-11-25-lora-2", "2026-11-25-lora-extra"}


def test_a_ticks_states_are_recorded_only_where_the_lease_is_held_and_every_status_line_is_kept(tmp_path):
    ledger = Ledger(tmp_path / "experiments.sqlite")
    ledger.add(experiment(slug="2026-11-25-mine", job_id="1"))
    ledger.claim("me", 60)
    ledger.add(experiment(slug="2026-11-25-theirs", job_id="2"))
    ledger.claim("them", 60)
    first = ledger.latest()

    recorded_now = ledger.record_states("me", [
        StateChange("2026-11-25-mine", "COMPLETED", True, "job 1: COMPLETED", False),
        StateChange("2026-11-25-theirs", "FAILED", True, "job 2: FAILED", True)])

    assert recorded_now == {"2026-11-25-mine"}
    assert {t.experiment.slug: t.state for t in ledger.all()} == {"2026-11-25-mine": "COMPLETED",
                                                                  "2026-11-25-theirs": "PENDING"}
    assert ledger.notebook_status("2026-11-25-theirs") == "job 2: FAILED"
    ledger.add(experiment(slug="2026-11-25-new", job_id="3"))
    assert ledger.latest() > first


def test_a_damaged_notebook_is_left_as_it_is_while_its_job_and_the_others_are_recorded(tmp_path):
    workspace, record, path = recorded(tmp_path)
    other = record_submission(workspace, experiment(slug="2026-11-25-other", job_id="43"))
    path.write_text("{not json", encoding="utf-8")
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]

    updates = asyncio.run(watcher.tick())

    assert {(update.experiment.slug, update.written) for update in updates} == {
        (record.slug, ("page",)), (other.slug, ("page", "notebook"))}
    assert {tracked.state for tracked in watcher.ledger.all()} == {"COMPLETED"}
    assert path.read_text(encoding="utf-8") == "{not json"
    assert watcher.catch_up() == []
    assert [tracked.experiment.slug for tracked, _ in watcher.ledger.notebooks_behind()] == [record.slug]
    assert "COMPLETED" in (workspace.wiki / record.page).read_text()


def three_recorded(root: Path) -> tuple[Workspace, list[Experiment], dict[str, bytes]]:
    workspace = Workspace.at(root)
    workspace.wiki.mkdir()
    records = [record_submission(workspace, experiment(slug=f"2026-11-25-{name}", job_id=str(number)))
               for number, name in enumerate(["a", "b", "c"])]
    files_before = {}
    for record in records:
        files_before[record.page] = (workspace.wiki / record.page).read_bytes()
        files_before[record.notebook] = (workspace.root / record.notebook).read_bytes()
    return workspace, records, files_before


def test_a_page_failing_in_the_middle_of_a_tick_loses_no_other_update_and_the_tick_flushes_once(tmp_path,
                                                                                                 monkeypatch):
    workspace, (a, b, c), before = three_recorded(tmp_path)
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    synced = []
    make_durable = files.make_durable
    monkeypatch.setattr(files, "make_durable", lambda paths: synced.append(paths) or make_durable(paths))
    folders = []
    monkeypatch.setattr(files, "sync_directory", folders.append)
    fsync = os.fsync

    def only_in_the_flush(fd: int) -> None:
        if not threading.current_thread().name.startswith("betty-fsync"):
            pytest.fail("a file flushed on its own inside the batch")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", only_in_the_flush)
    create = files.temporary_name
    monkeypatch.setattr(files, "temporary_name", lambda path: create(path) if path.name != f"{b.slug}.md"
                        else (_ for _ in ()).throw(OSError(28, "No space left on device")))

    assert asyncio.run(watcher.tick()) == []  # the wiki erred: the watcher tries again later

    assert len(synced) == 1 and sorted(folders) == [workspace.root / "notebooks/experiments",
                                                    workspace.wiki / "experiments"]
    assert {t.experiment.slug: t.state for t in watcher.ledger.all()} == {a.slug: "COMPLETED", b.slug: "PENDING",
                                                                          c.slug: "PENDING"}
    for record in (a, b, c):  # a is new on both sides, b and c as they were; no half-written file anywhere
        for path in (workspace.wiki / record.page, workspace.root / record.notebook):
            relative = record.page if path.suffix == ".md" else record.notebook
            assert (path.read_bytes() == before[relative]) == (record is not a)
    assert not [path for path in tmp_path.rglob("*.tmp")]
    monkeypatch.setattr(files, "temporary_name", create)

    updates = asyncio.run(watcher.tick())

    assert {(update.experiment.slug, update.written) for update in updates} == {
        (b.slug, ("page", "notebook")), (c.slug, ("page", "notebook"))}
    assert len(synced) == 2 and {t.state for t in watcher.ledger.all()} == {"COMPLETED"}


def test_a_notebook_opened_before_its_rename_keeps_its_file_and_waits_behind(tmp_path, monkeypatch):
    workspace, (a, b, c), before = three_recorded(tmp_path)
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    write_files = watcher._write_files

    def and_then_b_is_opened(tracked, job, log, open_now):
        written = write_files(tracked, job, log, open_now)
        if tracked.experiment.slug == b.slug:  # queued for the flush; then the panel says it is open
            OpenNotebooks(workspace.ledger_path).hold("lab-1", [b.notebook])
        return written

    monkeypatch.setattr(watcher, "_write_files", and_then_b_is_opened)

    updates = asyncio.run(watcher.tick())

    assert {(u.experiment.slug, u.written, u.notebook_open) for u in updates} == {
        (a.slug, ("page", "notebook"), False), (b.slug, ("page",), True), (c.slug, ("page", "notebook"), False)}
    assert (workspace.root / b.notebook).read_bytes() == before[b.notebook]
    assert (workspace.root / a.notebook).read_bytes() != before[a.notebook]
    assert [tracked.experiment.slug for tracked, _ in watcher.ledger.notebooks_behind()] == [b.slug]
    assert not [path for path in tmp_path.rglob("*.tmp")]


def test_a_notebook_text_is_what_json_dumps_writes_for_any_values(tmp_path):
    """Betty's own encoder writes what ``json.dumps(indent=1, sort_keys=True, ensure_ascii=False)`` writes."""
    from betty_jupyter.experiments import notebook_file
    from hostile import hostile

    _, _, path = recorded(tmp_path)
    book = notebook_file.read_notebook(path)
    values = [*hostile(), HOSTILE, "", 0, -1, 10 ** 30, 1.5, -0.0, 1e300, float("inf"), float("nan"), True, False,
              None, [], {}, ("a", 2), [[], [{}], {"z": [1, "2"]}], {"b": 1, "a": {"c": None}}]
    book["metadata"].update({"signature": "sha256:x", "orig_nbformat": 3, "extra": values,
                             "keys": {"é": 1, "A": 2, "a": 3, "💥": values[:3]}})
    book["cells"][0]["metadata"]["trusted"] = True
    status = [cell for cell in book["cells"] if cell["cell_type"] == "code"][0]
    status["outputs"] = [notebook_file.stream_output(f"{value}\r\nnext\n") for value in values[:8]]
    status["outputs"].append({"output_type": "stream", "name": "stderr", "text": ["already\n", "split"]})
    unchanged = json.dumps(book, sort_keys=True)

    stored = json.loads(json.dumps(book))  # what Betty wrote before it had its own encoder
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        stored["metadata"].pop(key, None)
    for cell in stored["cells"]:
        cell.get("metadata", {}).pop("trusted", None)
        cell["source"] = cell["source"].splitlines(True) if isinstance(cell["source"], str) else cell["source"]
        for output in cell.get("outputs", []):
            if isinstance(output.get("text"), str):
                output["text"] = output["text"].splitlines(True)
    expected = json.dumps(stored, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)

    assert notebook_file.notebook_text(book) == expected
    assert json.dumps(book, sort_keys=True) == unchanged  # the book itself is left as it was


def test_a_notebook_that_cannot_be_put_in_place_leaves_its_job_for_the_next_tick_and_the_others_recorded(
        tmp_path, monkeypatch):
    workspace, (a, b, c), before = three_recorded(tmp_path)
    watcher = JobWatcher(workspace, lambda cluster: EndedSlurm())  # type: ignore[arg-type, return-value]
    replace = os.replace

    def replace_but_b(source, target):
        if Path(target).name == f"{b.slug}.ipynb":
            raise OSError(5, "Input/output error")
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_but_b)

    assert asyncio.run(watcher.tick()) == []  # the error is the watcher's trouble: it tries again later

    assert {t.experiment.slug: t.state for t in watcher.ledger.all()} == {a.slug: "COMPLETED", b.slug: "PENDING",
                                                                          c.slug: "COMPLETED"}
    assert (workspace.root / b.notebook).read_bytes() == before[b.notebook]
    assert (workspace.root / c.notebook).read_bytes() != before[c.notebook]
    assert not [path for path in tmp_path.rglob("*.tmp")]
    monkeypatch.setattr(os, "replace", replace)

    assert [(u.experiment.slug, u.written) for u in asyncio.run(watcher.tick())] == [(b.slug, ("page", "notebook"))]
