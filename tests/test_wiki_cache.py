"""Listing and searching the wiki through LibYAML and the frontmatter cache gives what PyYAML alone gave.

The reference is the store with the cache off and PyYAML's own parser (``LOADER = "python"``):
every list and search must match it page for page (name, frontmatter, body, stored text),
on a cold cache, a warm one, after edits the file's size and time do not show, and with a
cache file that is corrupt, forged or not a file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from conftest import betty_in_process

from betty_jupyter.wiki import WikiStore, page as page_module
from betty_jupyter.wiki.cache import CACHE_FILE, MAX_VALUES
from betty_jupyter.wiki.page import parse_frontmatter

_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + level)}: &{chr(98 + level)} [*{chr(97 + level)}, *{chr(97 + level)}, *{chr(97 + level)}, "
    f"*{chr(97 + level)}, *{chr(97 + level)}, *{chr(97 + level)}, *{chr(97 + level)}, *{chr(97 + level)}, "
    f"*{chr(97 + level)}, *{chr(97 + level)}]\n" for level in range(4))

TRICKY_BLOCKS = [
    "name: run\ndescription: a run\ntype: experiment\n",
    "submitted: 2026-11-22T10:31\nday: 2026-11-22\nspaced: 2026-11-22 10:31:00.5 +02:00\n",
    "explicit: !!timestamp 2026-11-22\nstamp: !!timestamp 2026-11-22T10:31:00Z\n",
    "yes_: yes\nno_: no\non_: on\noff_: off\ny: y\nN: N\ntilde: ~\nnull_: null\nempty:\n",
    "octal: 012\nocto: 0o12\nhex: 0x1F\nsep: 1_000\nsexa: 190:20:30\nbig: 123456789012345678901234567890\n",
    "inf: .inf\nninf: -.Inf\nnan: .NaN\nexp: 1e3\nexp2: 1.0e+3\nneg: -0.0\n",
    "base: &base {a: 1, b: [1, 2]}\nmerged:\n  <<: *base\n  c: 3\nagain: *base\n",
    "binary: !!binary aGVsbG8=\nset: !!set {a, b}\nomap: !!omap [{a: 1}, {b: 2}]\npairs: !!pairs [{a: 1}]\n",
    "evil: !!python/object/apply:os.system ['true']\n",
    "evil: !!python/name:os.system\n",
    "custom: !thing {a: 1}\n",
    "folded: >\n  one\n  two\n\nliteral: |-\n  keep\n   this\nquoted: 'it''s'\ndq: \"\\u00e9\\t\\x41\"\n",
    "unicode: Straße ÉTÉ 日本 😀\nzw: \"a\\u200bb\"\n",
    "bom: a\ufeffb\n",
    "bell: a\x07b\n",
    "nel: a\x85b\n",
    "ls: a\u2028b\n",
    "tab:\ta\n",
    "\tindented: a\n",
    "dup: 1\ndup: 2\n",
    "? [a, b]\n: complex\n",
    "? {a: 1}\n: complex\n",
    "1: int key\ntrue: bool key\n~: null key\n1.5: float key\n",
    "- a list\n- not a mapping\n",
    "just text\n",
    "# only a comment\n",
    "",
    "a: [unclosed\n",
    "a: b: c\n",
    "a: 'unterminated\n",
    "a: *undefined\n",
    "%YAML 1.1\na: 1\n",
    "a: 1\n---\nb: 2\n",
    "a: 1\n...\n",
    "key: value # comment\nurl: http://x.y/z#frag\ncolon: a:b\n",
    "deep: " + "[" * 40 + "x" + "]" * 40 + "\n",
    _BOMB,
    "lone: \"\\ud800\"\n",
    "nul: \"a\\0b\"\n",
]


def _outcome(load: Any) -> tuple[str, str]:
    try:
        value = load()
    except Exception as error:  # noqa: BLE001 - PyYAML fails in more ways than YAMLError; each is an outcome
        return "error", f"{type(error).__name__}: {error}"
    return "value", repr(value)


@pytest.mark.parametrize("block", TRICKY_BLOCKS)
def test_frontmatter_reads_as_pyyaml_alone_reads_it(block: str) -> None:
    python = _outcome(lambda: yaml.load(block, Loader=page_module._Loader))  # noqa: S506
    assert _outcome(lambda: page_module._load(block)) == python
    assert _outcome(lambda: parse_frontmatter("p.md", block)) == _outcome(lambda: _python_frontmatter(block))
    fast = _outcome(lambda: yaml.load(block, Loader=page_module._FastLoader))  # noqa: S506
    plain = not page_module._PYYAML_ONLY.search(block) and not page_module._NON_PRINTABLE.search(block)
    if fast[0] == "value" and plain:
        assert fast == python  # what LibYAML accepts it reads as PyYAML does (no fallback hides a difference)


_PIECES = list(" \n\t:-[]{},#&*!|>'\"%@`?~.0123456789abcxyz\\") + [
    "\u00e9", "\ufeff", "\r", "\r\n", "  ", "- ", ": ", "---", "...", "\x85", "\u2028", "\x07"]


@pytest.mark.parametrize("seed", range(4))
def test_frontmatter_mutated_at_random_reads_as_pyyaml_alone_reads_it(seed: int) -> None:
    chance = random.Random(seed)
    for _ in range(1500):
        block = list(chance.choice(TRICKY_BLOCKS))
        for _ in range(chance.randint(1, 4)):
            at = chance.randint(0, len(block))
            roll = chance.random()
            if roll < 0.5 or not block:
                block[at:at] = [chance.choice(_PIECES)]
            elif roll < 0.8:
                del block[min(at, len(block) - 1)]
            else:
                block[min(at, len(block) - 1)] = chance.choice(_PIECES)
        text = "".join(block)
        assert _outcome(lambda: page_module._load(text)) == _outcome(
            lambda: yaml.load(text, Loader=page_module._Loader)), text  # noqa: S506


def test_libyaml_reads_frontmatter_where_pyyaml_has_it() -> None:
    assert page_module.LOADER == ("libyaml" if hasattr(yaml, "CSafeLoader") else "python")
    assert issubclass(page_module._FastLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    dates = yaml.load("d: 2026-11-22\nt: 2026-11-22T10:31\n", Loader=page_module._FastLoader)  # noqa: S506
    assert dates == {"d": "2026-11-22", "t": "2026-11-22T10:31"}


def _python_frontmatter(block: str) -> Any:
    saved = page_module.LOADER
    page_module.LOADER = "python"
    try:
        return parse_frontmatter("p.md", block)
    finally:
        page_module.LOADER = saved


def _write_fixture(wiki: Path) -> None:
    pages: dict[str, str | bytes] = {
        f"t{number:02d}.md": f"---\n{block}---\nbody {number} Straße diverged\n"
        for number, block in enumerate(TRICKY_BLOCKS)
    }
    pages.update({
        "experiments/run-a.md": "---\nname: run a\ndescription: lora sweep\ntype: experiment\njob_id: '123'\n"
                                "tags: [lora, llama]\nsubmitted: 2026-11-22T10:31\n---\n# A\nThe loss DIVERGED.\n",
        "experiments/run-b.md": "---\nname: run b\ndescription: sweep\ntype: experiment\njob_id: 124\n---\n# B\nfine\n",
        "howtos/crlf.md": "---\r\nname: crlf\r\ntype: howto\r\n---\r\nbody\r\n",
        "howtos/bom.md": "\ufeff---\nname: bom\ntype: howto\n---\nbody\n",
        "notes/plain.md": "no frontmatter at all, STRASSE\n",
        "notes/unclosed.md": "---\nname: never closed\n",
        "notes/huge.md": "---\nbig: " + "x" * (70 * 1024) + "\n---\nbody\n",
        "notes/latin1.md": b"---\nname: caf\xe9\ntype: note\n---\ncaf\xe9 \xff\xfe body\n",
        "notes/bad-body.md": b"---\nname: ok\ntype: note\n---\n\xc3\x28 diverged\n",
        "notes/keys.md": "---\n1: one\n2: [a, {3: b}]\n---\nint keys\n",
        "notes/wide.md": "---\nitems: [" + ", ".join(str(n) for n in range(MAX_VALUES + 5)) + "]\n---\nwide\n",
        "notes/ünï.md": "---\nname: unicode name\ntype: note\n---\nbody\n",
    })
    for name, text in pages.items():
        path = wiki / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", newline="")
    (wiki / "notes" / "link.md").symlink_to(wiki / "experiments" / "run-b.md")
    outside = wiki.parent / "outside.md"
    outside.write_text("---\nname: outside\n---\nsecret diverged\n", encoding="utf-8")
    (wiki / "notes" / "out.md").symlink_to(outside)
    (wiki / ".locks").mkdir()
    (wiki / ".locks" / "x.md").write_text("---\nname: hidden\n---\n", encoding="utf-8")
    os.mkfifo(wiki / "notes" / "fifo.txt")


@pytest.fixture
def workspaces(tmp_path: Path) -> Iterator[tuple[WikiStore, WikiStore]]:
    """(with the cache, without it): two workspaces holding the same fixture wiki."""
    cached, plain = tmp_path / "cached", tmp_path / "plain"
    for workspace in (cached, plain):
        (workspace / "wiki").mkdir(parents=True)
        _write_fixture(workspace / "wiki")
    (cached / ".betty").mkdir()
    yield WikiStore(cached / "wiki"), WikiStore(plain / "wiki")


def _seen(pages: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(page.name, repr(page.frontmatter), page.body, page.text) for page in pages]


def _before(store: WikiStore, call: str, *args: Any, **fields: str) -> list[tuple[str, str, str, str]]:
    """What the store gave before: no cache, PyYAML's own parser."""
    saved = page_module.LOADER
    page_module.LOADER = "python"
    try:
        return _seen(getattr(store, call)(*args, **fields))
    finally:
        page_module.LOADER = saved


QUERIES: list[tuple[str, dict[str, str]]] = [
    ("", {}), ("diverged", {}), ("strasse", {}), ("straße body", {}), ("DIVERGED loss", {}),
    ("", {"type": "experiment"}), ("", {"job_id": "124"}), ("sweep", {"tags": "lora"}), ("café", {}),
    ("nothing-matches-this", {}), ("", {"yes_": "true"}),
]


def test_list_and_search_are_the_same_with_the_cache_cold_and_warm(workspaces: tuple[WikiStore, WikiStore]) -> None:
    cached, plain = workspaces
    expected_list = _before(plain, "list")
    assert "notes/out.md" not in [name for name, *_ in expected_list] and len(expected_list) > 40
    cache = cached.root.parent / ".betty" / CACHE_FILE
    assert not cache.exists()
    assert _seen(cached.list()) == expected_list
    assert cache.is_file() and not (plain.root.parent / ".betty").exists()
    assert not any(path.name == CACHE_FILE for path in cached.root.rglob("*"))
    assert _seen(cached.list()) == expected_list  # warm
    assert _seen(cached.list("notes")) == _before(plain, "list", "notes")
    for query, fields in QUERIES:
        expected = _before(plain, "search", query, **fields)
        assert _seen(cached.search(query, **fields)) == expected, (query, fields)
        assert _seen(cached.search(query, **fields)) == expected, (query, fields)
    found = [name for name, *_ in _before(plain, "search", "diverged")]
    assert "notes/bad-body.md" in found and "t00.md" in found and "notes/out.md" not in found


def test_an_edit_the_size_and_time_do_not_show_is_read(workspaces: tuple[WikiStore, WikiStore]) -> None:
    cached, _ = workspaces
    path = cached.root / "experiments" / "run-a.md"
    assert {page.name: page for page in cached.list()}["experiments/run-a.md"].frontmatter["job_id"] == "123"
    before = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("job_id: '123'", "job_id: '999'"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert {page.name: page for page in cached.list()}["experiments/run-a.md"].frontmatter["job_id"] == "999"
    assert [page.name for page in cached.search("", job_id="999")] == ["experiments/run-a.md"]
    assert cached.search("", job_id="123") == []


def test_added_and_deleted_pages_are_seen_and_unused_entries_go(workspaces: tuple[WikiStore, WikiStore]) -> None:
    cached, _ = workspaces
    cached.list()
    cache = cached.root.parent / ".betty" / CACHE_FILE
    entries = len(json.loads(cache.read_text(encoding="utf-8"))["pages"])
    cached.create("howtos/new.md", {"name": "new", "description": "a new page", "type": "howto"}, "diverged\n")
    (cached.root / "experiments" / "run-b.md").unlink()
    (cached.root / "notes" / "link.md").unlink()
    names = [page.name for page in cached.list()]
    assert "howtos/new.md" in names and "experiments/run-b.md" not in names
    assert "howtos/new.md" in [page.name for page in cached.search("diverged")]
    assert {page.name: page for page in cached.list()}["howtos/new.md"].frontmatter["description"] == "a new page"
    assert len(json.loads(cache.read_text(encoding="utf-8"))["pages"]) == entries  # one in, one out


def test_a_caller_changing_a_page_never_changes_the_cache(workspaces: tuple[WikiStore, WikiStore]) -> None:
    cached, _ = workspaces
    source = cached.root / "experiments" / "run-a.md"
    (cached.root / "experiments" / "run-a-copy.md").write_bytes(source.read_bytes())
    cached.list()
    pages = {page.name: page for page in cached.list()}  # warm: both pages from one cache entry
    first, copy = pages["experiments/run-a.md"], pages["experiments/run-a-copy.md"]
    first.frontmatter["tags"].append("changed")
    first.frontmatter["name"] = "changed"
    assert copy.frontmatter["name"] == "run a" and copy.frontmatter["tags"] == ["lora", "llama"]
    again = {page.name: page for page in cached.list()}["experiments/run-a.md"]
    assert again.frontmatter["name"] == "run a" and again.frontmatter["tags"] == ["lora", "llama"]


@pytest.mark.parametrize("content", [
    b"", b"not json", b'{"version": 1', b"[]", b'{"version": "0", "pages": {}}', b"[" * 100_000,
    b"\xff\xfe garbage", "forged", "wrong shapes",
])
def test_a_corrupt_or_forged_cache_is_ignored_and_rebuilt(workspaces: tuple[WikiStore, WikiStore],
                                                          content: bytes | str) -> None:
    cached, plain = workspaces
    cache = cached.root.parent / ".betty" / CACHE_FILE
    expected = _before(plain, "list")
    cached.list()
    if isinstance(content, str):
        data = json.loads(cache.read_text(encoding="utf-8"))
        for key in data["pages"]:
            # "forged": every entry a value the cache never writes; "wrong shapes": not frontmatter at all
            data["pages"][key] = {"x": {"__class__": [1, 2]}, 1: 2} if content == "forged" else [["x"], 3]
            if content == "forged":
                data["pages"][key] = [data["pages"][key]]
        cache.write_text(json.dumps(data), encoding="utf-8")
    else:
        cache.write_bytes(content)
    assert _seen(cached.list()) == expected
    assert json.loads(cache.read_text(encoding="utf-8"))["version"].startswith("1 ")
    assert _seen(cached.list()) == expected


def test_a_cache_that_is_a_link_or_a_folder_is_not_read(workspaces: tuple[WikiStore, WikiStore],
                                                        tmp_path: Path) -> None:
    cached, plain = workspaces
    cache = cached.root.parent / ".betty" / CACHE_FILE
    decoy = tmp_path / "decoy.json"
    cached.list()
    shutil.copy(cache, decoy)
    data = json.loads(decoy.read_text(encoding="utf-8"))
    data["pages"] = {key: {"name": "forged"} for key in data["pages"]}
    decoy.write_text(forged := json.dumps(data), encoding="utf-8")
    cache.unlink()
    cache.symlink_to(decoy)
    assert _seen(cached.list()) == _before(plain, "list")
    assert not cache.is_symlink() and decoy.read_text(encoding="utf-8") == forged  # replaced, not written through
    cache.unlink()
    cache.mkdir()
    assert _seen(cached.list()) == _before(plain, "list")


def _list_many(root: str, times: int) -> list[str]:
    store = WikiStore(root)
    return [repr(_seen(store.list())) for _ in range(times)][-1:]


def test_concurrent_listers_and_writers_leave_a_whole_cache(workspaces: tuple[WikiStore, WikiStore]) -> None:
    cached, plain = workspaces
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        pending = [pool.apply_async(_list_many, (str(cached.root), 5)) for _ in range(3)]
        for number in range(20):
            for store in (cached, plain):
                store.update("experiments/run-a.md", frontmatter={"description": f"edit {number}"})
        results = [job.get(timeout=300) for job in pending]
    assert all(result for result in results)
    cache = cached.root.parent / ".betty" / CACHE_FILE
    assert json.loads(cache.read_text(encoding="utf-8"))["version"].startswith("1 ")
    assert _seen(cached.list()) == _before(plain, "list")
    assert {page.name: page for page in cached.list()}["experiments/run-a.md"].frontmatter["description"] == "edit 19"


def test_betty_wiki_list_and_search_print_the_same_with_the_cache(workspaces: tuple[WikiStore, WikiStore],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cached, plain = workspaces
    for argv in (["list"], ["list", "--json"], ["search", "diverged"],
                 ["search", "--json", "run", "--type", "experiment"]):
        saved = page_module.LOADER
        page_module.LOADER = "python"
        try:
            expected = betty_in_process(capsys, "wiki", *argv, "--dir", str(plain.root.parent))
        finally:
            page_module.LOADER = saved
        assert expected[0] == 0 and expected[1].strip()
        (cached.root.parent / ".betty" / CACHE_FILE).unlink(missing_ok=True)
        assert betty_in_process(capsys, "wiki", *argv, "--dir", str(cached.root.parent)) == expected  # cold
        assert betty_in_process(capsys, "wiki", *argv, "--dir", str(cached.root.parent)) == expected  # warm
