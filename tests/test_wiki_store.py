"""WikiStore: reading, the schema lint, searching, log.md, index.md and atomic locked writes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from filelock import FileLock

from betty_jupyter.errors import WikiError
from betty_jupyter.wiki import WikiStore, lint, parse_page

VALID = {"name": "LoRA sweep", "description": "Rank sweep for a LoRA fine-tune.", "type": "experiment"}
LOG_ENTRY = re.compile(r"^- \d{4}-\d\d-\d\d \d\d:\d\d — (.+)$")


@pytest.fixture
def store(tmp_path: Path) -> WikiStore:
    root = tmp_path / "wiki"
    root.mkdir()
    (root / "log.md").write_text("---\nname: Log\ndescription: log\ntype: note\n---\n# Log\n\n")
    return WikiStore(root)


def test_a_missing_root_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WikiError, match="no wiki at .*betty init"):
        WikiStore(tmp_path / "nowhere")


def test_create_then_read_round_trips(store: WikiStore) -> None:
    page = store.create("experiments/2026-11-22-lora.md", {**VALID, "job_id": "123", "tags": ["lora"]}, "# Hi\n")
    assert page.name == "experiments/2026-11-22-lora.md"
    again = store.read(page.name)
    assert again == page
    assert again.frontmatter == {**VALID, "job_id": "123", "tags": ["lora"]}
    assert again.body == "# Hi\n"
    assert (store.root / page.name).read_text() == again.text
    assert store.exists(page.name) and not store.exists("experiments/other.md")


def test_created_pages_get_the_usual_file_mode(store: WikiStore) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    store.create("mode.md", VALID, "x\n")
    assert (store.root / "mode.md").stat().st_mode & 0o777 == 0o666 & ~umask


def test_read_keeps_the_stored_text_exactly(store: WikiStore) -> None:
    text = "\ufeff---\r\nname: n  # a comment\r\ndescription: d\r\ntype: note\r\nwhen: 2026-11-22\r\n---\r\nbody\r\n"
    (store.root / "crlf.md").write_bytes(text.encode())
    page = store.read("crlf.md")
    assert page.text == text
    assert page.body == "body\r\n"
    assert page.frontmatter["when"] == "2026-11-22"  # dates stay text


def test_read_errors_name_the_page_and_the_fix(store: WikiStore) -> None:
    with pytest.raises(WikiError, match="no page missing.md"):
        store.read("missing.md")
    (store.root / "broken.md").write_text("---\nname: x\ndescription: [unclosed\ntype: note\n---\nbody\n")
    with pytest.raises(WikiError, match=r"broken.md: the frontmatter is not valid YAML \(line \d+"):
        store.read("broken.md")
    (store.root / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(WikiError, match="not UTF-8"):
        store.read("latin1.md")
    (store.root / "list.md").write_text("---\n- a\n- b\n---\nbody\n")
    with pytest.raises(WikiError, match="must be 'key: value' lines"):
        store.read("list.md")
    (store.root / "folder.md").mkdir()
    with pytest.raises(WikiError, match="is a folder"):
        store.read("folder.md")


def test_create_refuses_an_existing_page(store: WikiStore) -> None:
    store.create("a.md", VALID, "first\n")
    with pytest.raises(WikiError, match="a.md already exists"):
        store.create("a.md", VALID, "second\n")
    assert store.read("a.md").body == "first\n"


@pytest.mark.parametrize(("frontmatter", "messages"), [
    ({}, ["'name' is missing (a short title, one line)", "'description' is missing (one line saying",
          "'type' is missing (one of experiment, cluster, howto, persona, note)"]),
    ({**VALID, "description": "  "}, ["'description' is missing"]),
    ({**VALID, "type": "blog"}, ["'type' is 'blog', not one of experiment, cluster, howto, persona, note (see SCHEMA.md)"]),
    ({**VALID, "name": "two\nlines"}, ["'name' must be one line"]),
    ({**VALID, "name": 42}, ["'name' must be text, not a number"]),
    ({**VALID, "type": ["note"]}, ["'type' must be text, not a list"]),
    ({**VALID, "job_id": "12; rm -rf ~"}, ["'job_id' is '12; rm -rf ~', not a Slurm job id"]),
    ({**VALID, "job_id": True}, ["not a Slurm job id"]),
    ({**VALID, "tags": "lora"}, ["'tags' must be a list of words"]),
    ({**VALID, "cluster": 3}, ["'cluster' must be text, not a number"]),
    ({**VALID, 7: "x"}, ["the key 7 is not text"]),
    ({**VALID, "extra": object()}, ["frontmatter values must be text, numbers, true/false, lists or mappings"]),
])
def test_the_schema_lint_says_what_is_wrong(store: WikiStore, frontmatter: dict, messages: list[str]) -> None:
    problems = "; ".join(lint(frontmatter))
    for message in messages:
        assert message in problems
    with pytest.raises(WikiError) as refused:
        store.create("bad.md", frontmatter, "body\n")
    assert str(refused.value).startswith("bad.md: ")
    assert "\n" not in str(refused.value)
    assert not store.exists("bad.md")


def test_valid_frontmatter_with_optional_fields_passes() -> None:
    assert lint({**VALID, "job_id": 123, "tags": [], "cluster": "c", "submitted": "2026-11-22T10:31:00",
                 "script": "run.sbatch", "notebook": "nb.ipynb", "anything": {"else": [1, 2.5, None]}}) == []
    assert lint({**VALID, "job_id": "123_4"}) == []


def test_update_merges_frontmatter_and_lints_the_result(store: WikiStore) -> None:
    store.create("a.md", {**VALID, "owner": "ana"}, "body\n")
    page = store.update("a.md", frontmatter={"status": "RUNNING"})
    assert page.frontmatter == {**VALID, "owner": "ana", "status": "RUNNING"}
    assert page.body == "body\n"
    with pytest.raises(WikiError, match="'type' is 'blog'"):
        store.update("a.md", frontmatter={"type": "blog"})
    assert store.read("a.md").frontmatter["type"] == "experiment"
    assert store.update("a.md", body="new body\n").body == "new body\n"


def test_an_update_that_changes_nothing_keeps_the_file_and_its_comments(store: WikiStore) -> None:
    text = "---\nname: n # mine\ndescription: d\ntype: note\n---\nbody\n"
    (store.root / "c.md").write_text(text)
    inode = (store.root / "c.md").stat().st_ino
    store.update("c.md", frontmatter={"name": "n"}, body="body\n")
    assert (store.root / "c.md").read_text() == text
    assert (store.root / "c.md").stat().st_ino == inode
    store.update("c.md", body="other\n")
    assert (store.root / "c.md").read_text() == text.replace("body\n", "other\n")


def test_update_of_a_missing_page_is_an_error(store: WikiStore) -> None:
    with pytest.raises(WikiError, match="no page nope.md"):
        store.update("nope.md", body="x")


def test_log_md_is_append_only(store: WikiStore) -> None:
    before = (store.root / "log.md").read_bytes()
    with pytest.raises(WikiError, match="refused to create log.md: log.md is append-only"):
        store.create("log.md", VALID, "x\n")
    with pytest.raises(WikiError, match="refused to update log.md: log.md is append-only"):
        store.update("log.md", body="rewritten\n")
    with pytest.raises(WikiError, match="append-only"):
        store.update("log.md", frontmatter={"name": "x"})
    with pytest.raises(WikiError, match="append-only"):
        store.update_auto("log.md", "x")
    assert (store.root / "log.md").read_bytes() == before
    store.append("log.md", "- by hand")
    assert (store.root / "log.md").read_bytes() == before + b"- by hand\n"


def test_log_writes_one_dated_line(store: WikiStore) -> None:
    store.log("submitted job 123 on betty-dev: experiments/x.md")
    store.log("job 123 COMPLETED")
    lines = (store.root / "log.md").read_text().splitlines()
    assert [LOG_ENTRY.match(line).group(1) for line in lines[-2:]] == [  # type: ignore[union-attr]
        "submitted job 123 on betty-dev: experiments/x.md", "job 123 COMPLETED"]


@pytest.mark.parametrize("line", ["two\nlines", "cr\rreturn", "sep\u2028arator", "", "   ", "bell\x07",
                                  "<!-- betty:auto-end -->"])
def test_a_log_entry_is_one_line(store: WikiStore, line: str) -> None:
    with pytest.raises(WikiError, match="log entry"):
        store.log(line)


def test_log_creates_a_missing_log_md(store: WikiStore) -> None:
    (store.root / "log.md").unlink()
    store.log("first")
    page = store.read("log.md")
    assert lint(page.frontmatter) == []
    assert LOG_ENTRY.match(page.body.splitlines()[-1])


def test_append_starts_on_a_new_line_and_needs_the_page(store: WikiStore) -> None:
    (store.root / "n.md").write_text("no final newline")
    store.append("n.md", "more")
    store.append("n.md", "and more\n")
    store.append("n.md", "")
    assert (store.root / "n.md").read_text() == "no final newline\nmore\nand more\n"
    with pytest.raises(WikiError, match="no page gone.md"):
        store.append("gone.md", "x")
    with pytest.raises(WikiError, match="marker text"):
        store.append("n.md", "<!-- betty:auto-start -->\n")
    with pytest.raises(WikiError, match="NUL"):
        store.append("n.md", "a\0b")


def test_search_by_text_and_by_fields(store: WikiStore) -> None:
    store.create("experiments/a.md", {**VALID, "job_id": 123, "tags": ["lora", "llama"], "done": True},
                 "Learning rate 3e-4 on LLaMA.\n")
    store.create("experiments/b.md", {**VALID, "name": "QLoRA", "job_id": "456"}, "nf4 quantised run\n")
    store.create("howto/sbatch.md", {"name": "sbatch", "description": "How to write a batch script.",
                                     "type": "howto"}, "Use #SBATCH lines.\n")

    def names(*args: str, **fields: str) -> list[str]:
        return [page.name for page in store.search(*args, **fields)]

    assert names("llama") == ["experiments/a.md"]
    assert names("LORA") == ["experiments/a.md", "experiments/b.md"]
    assert names("lora   quantised") == ["experiments/b.md"]
    assert names("batch script") == ["howto/sbatch.md"]
    assert names(type="experiment") == ["experiments/a.md", "experiments/b.md"]
    assert names(job_id="123") == ["experiments/a.md"]
    assert names(job_id="456") == ["experiments/b.md"]
    assert names(job_id="12") == []
    assert names(tags="llama") == ["experiments/a.md"]
    assert names(done="true") == ["experiments/a.md"]
    assert names("run", type="experiment") == ["experiments/b.md"]
    assert names("nothing-like-this") == []
    assert len(names()) == 4  # with log.md


def test_list_is_sorted_and_shows_only_pages(store: WikiStore) -> None:
    store.create("b.md", VALID, "x\n")
    store.create("a/z.md", VALID, "x\n")
    store.create("a/b/c.md", VALID, "x\n")
    (store.root / "notes.txt").write_text("not a page")
    (store.root / ".b.md.1234.tmp").write_text("a temporary file")
    (store.root / ".git").mkdir()
    (store.root / ".git" / "x.md").write_text("hidden")
    (store.root / "bad name?.md").write_text("refused name")
    assert [page.name for page in store.list()] == ["a/b/c.md", "a/z.md", "b.md", "log.md"]
    assert [page.name for page in store.list("a")] == ["a/b/c.md", "a/z.md"]
    assert [page.name for page in store.list("a/")] == ["a/b/c.md", "a/z.md"]
    assert store.list("nothing-here") == []
    assert (store.root / ".locks").is_dir()  # the locks exist, but are not pages
    with pytest.raises(WikiError, match="refused folder name"):
        store.list("../")


def test_list_shows_a_page_with_broken_frontmatter_and_read_names_it(store: WikiStore) -> None:
    (store.root / "broken.md").write_text("---\nname: [x\n---\nbody\n")
    listed = {page.name: page for page in store.list()}
    assert listed["broken.md"].frontmatter == {}
    assert listed["broken.md"].text == "---\nname: [x\n---\nbody\n"
    with pytest.raises(WikiError, match="broken.md"):
        store.read("broken.md")


UNBUILDABLE = ["!!timestamp nonsense", "!!timestamp 2026-13-45", "!!int abc", "!!float x", "!!bool maybe",
               "[" * 3000 + "]" * 3000]
"""Frontmatter values PyYAML parses but cannot build: its constructors raise plain Python errors for them."""


@pytest.mark.parametrize("value", UNBUILDABLE, ids=["timestamp", "bad-date", "int", "float", "bool", "deep"])
def test_a_value_yaml_cannot_build_is_a_broken_page_not_a_crash(store: WikiStore, value: str) -> None:
    text = f"---\nname: odd\nwhen: {value}\n---\nthe run diverged\n"
    (store.root / "odd.md").write_text(text)
    listed = {page.name: page for page in store.list()}
    assert listed["odd.md"].frontmatter == {} and listed["odd.md"].text == text
    assert [page.name for page in store.search("diverged")] == ["odd.md"]
    with pytest.raises(WikiError, match=r"^odd.md: the frontmatter holds a value YAML cannot build") as raised:
        store.read("odd.md")
    assert "\n" not in str(raised.value)


def test_add_to_index_appends_to_the_section_and_keeps_the_rest(store: WikiStore) -> None:
    head = "---\nname: Index\ndescription: d\ntype: note\n---\n# Index\n\n## Experiments\n\nOne line each.\n"
    tail = "\n## Other\n\nkept\n"
    (store.root / "index.md").write_text(head + tail)
    store.add_to_index("Experiments", "[a](experiments/a.md) — first")
    store.add_to_index("Experiments", "- [b](experiments/b.md) — second")
    assert (store.root / "index.md").read_text() == (
        head + "\n- [a](experiments/a.md) — first\n- [b](experiments/b.md) — second\n" + tail)
    store.add_to_index("Datasets", "[imagenet](data/imagenet.md)")
    assert (store.root / "index.md").read_text().endswith("kept\n\n## Datasets\n\n- [imagenet](data/imagenet.md)\n")


def test_add_to_index_creates_index_md_and_checks_its_input(store: WikiStore) -> None:
    store.add_to_index("Experiments", "[a](experiments/a.md)")
    page = store.read("index.md")
    assert lint(page.frontmatter) == []
    assert page.body.endswith("## Experiments\n\n- [a](experiments/a.md)\n")
    for section, line in [("## Experiments", "x"), ("Experiments", "two\nlines"), ("", "x"), ("A\nB", "x")]:
        with pytest.raises(WikiError):
            store.add_to_index(section, line)


def test_a_failed_write_leaves_the_page_and_no_temporary_file(store: WikiStore,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store.create("a.md", VALID, "before\n")
    before = (store.root / "a.md").read_bytes()

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(WikiError, match="cannot write a.md: No space left on device"):
        store.update("a.md", body="after\n")
    assert (store.root / "a.md").read_bytes() == before
    assert [path.name for path in store.root.iterdir() if path.name.endswith(".tmp")] == []


def test_a_held_lock_makes_a_writer_give_up_with_a_clear_error(store: WikiStore) -> None:
    store.create("a.md", VALID, "x\n")
    store.lock_timeout = 0.2
    with FileLock(store.root / ".locks" / "a.md.lock"):
        with pytest.raises(WikiError, match="a.md is being written by another process"):
            store.update("a.md", body="y\n")
    assert store.update("a.md", body="y\n").body == "y\n"


def test_a_page_lock_held_by_betty_keeps_filelock_out_until_released(store: WikiStore) -> None:
    from filelock import Timeout

    from betty_jupyter.wiki.page_lock import acquire

    lock_file = store.root / "held.lock"
    release = acquire(lock_file, timeout=1)
    with pytest.raises(Timeout):
        FileLock(lock_file, timeout=0.05).acquire()
    release()
    release()  # a second release does nothing
    with FileLock(lock_file, timeout=1):
        pass


def test_parse_page_without_frontmatter() -> None:
    page = parse_page("plain.md", "# Just markdown\n\n---\n\nA rule above.\n")
    assert page.frontmatter == {} and page.body == page.text
