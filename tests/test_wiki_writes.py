"""Rewriting pages: the same bytes on LibYAML's emitter as on PyYAML's, and whole pages after an interrupted write."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml

from betty_jupyter.errors import WikiError
from betty_jupyter.experiments import content
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.wiki import WikiStore, files, page, simple_yaml
from hostile import hostile
from wiki_pages_fixture import GOLDEN, TRICKY, pages

VALID = {"name": "LoRA sweep", "description": "Rank sweep for a LoRA fine-tune.", "type": "experiment"}
REGION = "<!-- betty:auto-start -->\n## Status\n\nPENDING\n<!-- betty:auto-end -->\n"


def python_rendered(frontmatter: dict) -> str:
    """The ``---`` block as PyYAML's own emitter writes it."""
    return "---\n" + yaml.dump(frontmatter, Dumper=page._Dumper, sort_keys=False, allow_unicode=True,
                               default_flow_style=False, width=1000) + "---\n"


def test_experiment_pages_are_the_bytes_they_were(tmp_path: Path) -> None:
    """Hostile goals, job names, logs and a person's own fields: each page as the pure-Python writer wrote it."""
    assert pages(tmp_path) == json.loads(GOLDEN.read_text())


def test_frontmatter_renders_as_pyyaml_renders_it() -> None:
    experiment = Experiment(slug="2026-11-25-lora", job_id="42", cluster="betty-dev", submitted="2026-11-25T01:00:00",
                            goal="Rank sweep: r=8, α=16 — does it beat full fine-tuning?", script="true\n",
                            script_path="/home/ada/lora.sbatch")
    betty = content.page_frontmatter(experiment)
    assert page._plain(betty)  # Betty's own frontmatter takes LibYAML's emitter
    values = hostile() + TRICKY + [1, 1.5, float("inf"), True, None, [], {}, ["a", 2], {"k": ["v"]}, 10 ** 30]
    fast = 0
    for value in values:
        for frontmatter in ({**betty, "status": value}, {**betty, "tags": [value, "x"]},
                            {**betty, "extra": {"k": value}}, {**betty, str(value) or "k": value}):
            fast += page._plain(frontmatter)
            breaks = any(char in str(value) for char in "\x85\u2028\u2029")
            if breaks and simple_yaml.emit(frontmatter, page._dump_text):
                # PyYAML writes these breaks raw and reads them back as spaces: Betty escapes them instead
                block = page.render_frontmatter(frontmatter)
                assert page.parse_frontmatter("p.md", block[4:-4]) == frontmatter, block
                continue
            assert page.render_frontmatter(frontmatter) == python_rendered(frontmatter), frontmatter
    assert fast > len(values)  # most went through LibYAML's emitter, the rest through PyYAML's


def test_an_interrupted_rewrite_leaves_the_old_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = WikiStore(tmp_path)
    store.create("a.md", VALID, f"# A\n\n{REGION}\nMine.\n")
    before = (tmp_path / "a.md").read_bytes()

    def crash(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(WikiError, match="cannot write a.md: Input/output error"):
        store.update_auto("a.md", "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
    assert (tmp_path / "a.md").read_bytes() == before
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []


def write_pages(tmp_path: Path, count: int) -> tuple[WikiStore, list[str], dict[str, bytes]]:
    store = WikiStore(tmp_path)
    names = [f"p{number}.md" for number in range(count)]
    for name in names:
        store.create(name, VALID, f"# {name}\n\n{REGION}\nMine.\n")
    return store, names, {name: (tmp_path / name).read_bytes() for name in names}


def flushes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Count the batch's flushes (each the files it made durable together), the files flushed on their own
    and the folders flushed."""
    seen: dict[str, list] = {"batches": [], "files": [], "folders": []}
    make_durable = files.make_durable
    inside = threading.Event()

    def durable(paths: list[Path]) -> None:
        seen["batches"].append([path.parent for path in paths])
        inside.set()
        try:
            make_durable(paths)
        finally:
            inside.clear()

    monkeypatch.setattr(files, "make_durable", durable)
    fsync = os.fsync

    def counted(fd: int) -> None:
        if not inside.is_set():
            seen["files"].append(fd)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    monkeypatch.setattr(files, "sync_directory", seen["folders"].append)
    return seen


def test_pages_written_together_reach_the_disk_in_one_flush_then_each_is_renamed(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store, names, before = write_pages(tmp_path, 4)
    seen = flushes(monkeypatch)
    with files.written_together():
        for name in names:
            store.update_auto(name, "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
            assert (tmp_path / name).read_bytes() == before[name]  # not yet: its new text waits for the flush
    assert seen == {"batches": [[tmp_path] * 4], "files": [], "folders": [tmp_path]}
    for name in names:
        assert "status: COMPLETED" in (tmp_path / name).read_text()
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []
    store.update_auto("p0.md", "## Status\n\nFAILED", {"status": "FAILED"})  # outside a batch: flushed at once
    assert len(seen["files"]) == 1 and seen["folders"] == [tmp_path, tmp_path]


def test_a_page_failing_in_the_middle_of_a_batch_stays_old_and_the_ones_before_are_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, names, before = write_pages(tmp_path, 4)
    seen = flushes(monkeypatch)
    create = files.temporary_name

    def no_room_for_p2(path: Path) -> Path:
        if path.name == "p2.md":
            raise OSError(28, "No space left on device")
        return create(path)

    monkeypatch.setattr(files, "temporary_name", no_room_for_p2)
    with pytest.raises(WikiError, match="cannot write p2.md: No space left on device"):
        with files.written_together():
            for name in names:
                store.update_auto(name, "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
    assert seen == {"batches": [[tmp_path] * 2], "files": [], "folders": [tmp_path]}  # once, the error included
    for name in names:  # the ones before are new, the failed one and the ones after it are as they were
        assert ((tmp_path / name).read_bytes() == before[name]) == (name in ("p2.md", "p3.md"))
    assert "status: COMPLETED" in (tmp_path / "p1.md").read_text()
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []
    monkeypatch.setattr(files, "temporary_name", create)
    store.update_auto("p2.md", "## Status\n\nCOMPLETED", {"status": "COMPLETED"})  # every page's lock was released


def test_a_rename_failing_at_the_flush_leaves_that_page_old_and_puts_every_other_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, names, before = write_pages(tmp_path, 4)
    seen = flushes(monkeypatch)
    replace = os.replace

    def replace_but_p2(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "p2.md":
            raise OSError(5, "Input/output error")
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_but_p2)
    with pytest.raises(OSError, match="Input/output error") as raised:
        with files.written_together() as batch:
            for name in names:
                store.update_auto(name, "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
    assert raised.value.filename == str(tmp_path / "p2.md") and list(batch.failed) == [tmp_path / "p2.md"]
    assert seen == {"batches": [[tmp_path] * 4], "files": [], "folders": [tmp_path]}
    for name in names:
        assert ((tmp_path / name).read_bytes() == before[name]) == (name == "p2.md")
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []


def test_a_batch_flushes_each_of_its_own_files_before_any_rename_and_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, names, before = write_pages(tmp_path, 3)
    events: list[str] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(os.readlink(f"/proc/self/fd/{fd}")) or fsync(fd))
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: events.append(f"rename {Path(target).name}")
                        or replace(source, target))
    monkeypatch.setattr(files, "sync_directory", lambda folder: events.append(f"folder {folder}"))
    with files.written_together():
        for name in names:
            store.update_auto(name, "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
            assert events == []
    flushed, renamed = events[:3], events[3:]
    # each waiting temporary file is flushed by itself (never the whole file system), then renamed, then the folder
    assert sorted(Path(path).name[1:].rsplit(".", 2)[0] for path in flushed) == sorted(names)
    assert all(Path(path).parent == tmp_path and path.endswith(".tmp") for path in flushed)
    assert renamed == [f"rename {name}" for name in names] + [f"folder {tmp_path}"]


def test_a_batch_puts_its_files_in_place_every_limit_and_a_page_written_twice_is_read_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, names, _ = write_pages(tmp_path, 5)
    seen = flushes(monkeypatch)
    with files.written_together(limit=2):
        for name in names:
            store.update_auto(name, "## Status\n\nRUNNING", {"status": "RUNNING"})
        store.update_auto("p4.md", "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
    assert len(seen["batches"]) == 4  # p0 p1 | p2 p3 | p4 before it is read again | p4
    assert "COMPLETED" in (tmp_path / "p4.md").read_text() and "RUNNING" in (tmp_path / "p3.md").read_text()


def test_an_update_returns_the_page_as_it_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page an update returns is the one reading the file gives, for hostile values too."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # what is written is under test here, not that it is durable
    store = WikiStore(tmp_path)
    store.create("a.md", VALID, f"# A\n\n{REGION}\nMine.\n")
    values = hostile() + TRICKY + [1, 1.5, -0.0, float("inf"), True, None, [], {}, ["a", 2], {"k": ["v"]},
                                   10 ** 30, "2026-11-25", "yes", "0x10", "1e3", "~", "null", "---", "...", ""]
    plain = 0
    for value in values:
        for fields in ({"status": value}, {str(value) or "k": [value]}):
            try:
                returned = store.update_auto("a.md", "## Status\n\nCOMPLETED", fields)
            except WikiError:
                continue  # refused by the schema, or longer than a block may be: nothing written
            plain += page._plain({**VALID, **fields})
            stored = (tmp_path / "a.md").read_text(encoding="utf-8")
            assert returned.text == stored
            assert (returned.name, returned.frontmatter, returned.body) == (
                page.parse_page("a.md", stored).name, page.parse_page("a.md", stored).frontmatter,
                page.parse_page("a.md", stored).body), fields
            store.update("a.md", frontmatter={key: None for key in fields if key not in VALID})
    assert plain > len(values) // 2  # most took the way without reading the block back
