"""Rewriting pages: the same bytes on LibYAML's emitter as on PyYAML's, and whole pages after an interrupted write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from betty_jupyter.errors import WikiError
from betty_jupyter.experiments import content
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.wiki import WikiStore, files, page
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


def test_many_pages_flush_their_folder_once_and_a_failed_one_stays_old(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = WikiStore(tmp_path)
    names = [f"p{number}.md" for number in range(4)]
    for name in names:
        store.create(name, VALID, f"# {name}\n\n{REGION}\nMine.\n")
    before = {name: (tmp_path / name).read_bytes() for name in names}
    flushed: list[Path] = []
    monkeypatch.setattr(files, "sync_directory", flushed.append)
    replace = os.replace

    def replace_but_p2(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "p2.md":
            raise OSError(5, "Input/output error")
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_but_p2)
    with pytest.raises(WikiError, match="cannot write p2.md"):
        with files.one_directory_sync():
            for name in names:
                store.update_auto(name, "## Status\n\nCOMPLETED", {"status": "COMPLETED"})
                assert flushed == []  # not yet: once, at the end
    assert flushed == [tmp_path]  # the renames that happened reach the disk even though one write failed
    for name in names:
        text = (tmp_path / name).read_text()
        assert (text.encode() == before[name]) == (name in ("p2.md", "p3.md"))
        assert "status: COMPLETED" in text or text.encode() == before[name]
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []
    store.update_auto("p0.md", "## Status\n\nFAILED", {"status": "FAILED"})  # outside a block: flushed at once
    assert flushed == [tmp_path, tmp_path]
