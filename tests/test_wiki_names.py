"""Hostile page names: every one refused by every operation, naming its rule, writing nothing outside."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from betty_jupyter.errors import WikiError
from betty_jupyter.wiki import WikiStore
from betty_jupyter.wiki.names import check_folder_name, check_page_name

AUTO = "<!-- betty:auto-start -->\n## Status\n\nnew\n<!-- betty:auto-end -->\n"
FRONTMATTER = {"name": "x", "description": "a test page", "type": "note"}

# (name, a fragment of the rule the refusal must name)
HOSTILE = [
    ("../x.md", "'..'"),
    ("/etc/passwd", "absolute"),
    ("/tmp/x.md", "absolute"),
    ("experiments/../../x", "'..'"),
    ("experiments/../../x.md", "'..'"),
    ("./x.md", "'.'"),
    ("x\0.md", "NUL"),
    ("C:\\x.md", "backslash"),
    ("C:x.md", "drive letters"),
    ("a\\..\\b.md", "backslash"),
    ("\\\\server\\share\\x.md", "backslash"),
    ("x" * 300 + ".md", "longer than 255 characters"),
    ("é" * 150 + ".md", "longer than 200 bytes"),
    ("a/" * 127 + "x.md", "longer than 255 characters"),
    ("．．／x.md", "NFKC"),
    ("\uff0e\uff0e/x.md", "NFKC"),
    ("..\uff0fx.md", "NFKC"),
    ("\u2024\u2024/x.md", "NFKC"),
    ("experiments\uff0f\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fx.md", "NFKC"),
    ("\ufb01le.md", "NFKC"),
    ("%2e%2e/x.md", "'%'"),
    ("%2e%2e%2fx.md", "'%'"),
    ("..%2fx.md", "'%'"),
    ("", "empty"),
    (".", "'.'"),
    ("..", "'..'"),
    ("x.md/", "empty part"),
    ("a//b.md", "empty part"),
    ("x\n.md", "U+000A"),
    ("x\r\n.md", "U+000D"),
    ("x\t.md", "U+0009"),
    ("x\u2028.md", "U+2028"),
    ("x\u202egpj.md", "U+202E"),
    ("x\u200b.md", "U+200B"),
    ("\x1b[31mx.md", "U+001B"),
    (".hidden.md", "starting with '.'"),
    (".locks/log.md.lock", "starting with '.'"),
    ("x.txt", "'.md'"),
    ("x", "'.md'"),
    ("x.MD", "'.md'"),
    ("CON.md", "Windows device"),
    ("x?.md", "Windows"),
    (" x.md", "space"),
    ("notes /x.md", "space"),
    ("x..md/..", "'..'"),
]
OPERATIONS = {
    "path": lambda store, name: store.path(name),
    "exists": lambda store, name: store.exists(name),
    "read": lambda store, name: store.read(name),
    "create": lambda store, name: store.create(name, FRONTMATTER, "body\n"),
    "update": lambda store, name: store.update(name, body="changed\n"),
    "update_auto": lambda store, name: store.update_auto(name, "## Status\n\nchanged"),
    "append": lambda store, name: store.append(name, "more\n"),
}


def tree(top: Path, skip: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``top`` except ``skip``: kind, size and content hash (links not followed)."""
    entries = {}
    for directory, folders, files in os.walk(top):
        folders[:] = [name for name in folders if Path(directory, name) != skip]
        for name in folders + files:
            path = Path(directory, name)
            if path.is_symlink():
                entries[str(path)] = ("link", 0, os.readlink(path))
            elif path.is_file():
                entries[str(path)] = ("file", path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                entries[str(path)] = ("dir", 0, "")
    return entries


@pytest.fixture
def sandbox(tmp_path: Path):
    """A wiki at tmp/ws/deep/wiki, with an outside folder and links from the wiki to it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.md").write_text("---\nname: t\ndescription: t\ntype: note\n---\nsecret\n" + AUTO)
    (tmp_path / "x.md").write_text("outside the wiki\n")
    root = tmp_path / "ws" / "deep" / "wiki"
    (root / "experiments").mkdir(parents=True)
    (root / "log.md").write_text("---\nname: Log\ndescription: log\ntype: note\n---\n# Log\n")
    (root / "evil.md").symlink_to(outside / "target.md")
    (root / "dangling.md").symlink_to(outside / "created-through-link.md")
    (root / "linkdir").symlink_to(outside)
    (root / "loop.md").symlink_to(root / "loop.md")
    (root / "experiments" / "up.md").symlink_to("../../x.md")
    (root / "sneaky.md").symlink_to(root / ".locks" / "log.md.lock")
    before = tree(tmp_path, skip=root)
    passwd = os.stat("/etc/passwd")
    yield WikiStore(root)
    assert tree(tmp_path, skip=root) == before
    assert os.stat("/etc/passwd").st_mtime_ns == passwd.st_mtime_ns


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize(("name", "rule"), HOSTILE, ids=[ascii(name)[:40] for name, _ in HOSTILE])
def test_hostile_names_are_refused_naming_the_rule(sandbox: WikiStore, operation: str, name: str, rule: str) -> None:
    with pytest.raises(WikiError, match="^refused") as refused:
        OPERATIONS[operation](sandbox, name)
    assert rule in str(refused.value)
    assert "\n" not in str(refused.value)


LINKS = ["evil.md", "dangling.md", "linkdir/target.md", "linkdir/new.md", "linkdir/sub/new.md", "loop.md",
         "experiments/up.md", "sneaky.md"]


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("name", LINKS)
def test_links_out_of_the_wiki_are_refused(sandbox: WikiStore, operation: str, name: str) -> None:
    with pytest.raises(WikiError, match="^refused.*symbolic link"):
        OPERATIONS[operation](sandbox, name)


def test_links_out_are_not_listed_or_searched(sandbox: WikiStore) -> None:
    names = [page.name for page in sandbox.list()]
    assert names == ["log.md"]
    assert sandbox.search("secret") == []


def test_a_link_inside_the_wiki_is_followed_but_keeps_the_target_rules(sandbox: WikiStore) -> None:
    (sandbox.root / "alias.md").symlink_to("log.md")
    assert sandbox.read("alias.md").frontmatter["name"] == "Log"
    assert sandbox.path("alias.md") == sandbox.root / "log.md"
    with pytest.raises(WikiError, match="log.md is append-only"):
        sandbox.update("alias.md", body="gone\n")
    sandbox.append("alias.md", "- through the alias")
    assert sandbox.read("log.md").body.endswith("- through the alias\n")


def test_the_name_rules_accept_ordinary_names() -> None:
    for name in ["index.md", "experiments/2026-11-22-lora-r16.md", "notes/Müller et al. (2024).md",
                 "clusters/dev_cluster+gpu.md", "日本語/ノート.md", "a" * 196 + ".md"]:
        assert check_page_name(name) == name
    assert check_folder_name("experiments/2026") == "experiments/2026"


@pytest.mark.parametrize("value", [None, 3, b"x.md", ["x.md"]])
def test_a_name_that_is_not_text_is_refused(value: object) -> None:
    with pytest.raises(WikiError, match="must be text"):
        check_page_name(value)


def test_long_names_are_shown_shortened_in_the_message() -> None:
    with pytest.raises(WikiError) as refused:
        check_page_name("y" * 5000 + ".md")
    assert len(str(refused.value)) < 200
