"""Betty's region: update_auto rewrites only what lies between the markers; the person's text survives byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betty_jupyter.errors import WikiError
from betty_jupyter.wiki import AUTO_END, AUTO_START, WikiStore, parse_page
from betty_jupyter.wiki.regions import MARKER_STEM

PAGE = "experiments/2026-11-22-lora.md"
FRONTMATTER = "---\nname: LoRA\ndescription: Rank sweep.\ntype: experiment\njob_id: '123'  # Betty's\n---\n"
# A page as a person leaves it after editing every part of it that is theirs.
PERSON_BEFORE = (
    "Written above the title, with CRLF.\r\n"
    "# LoRA rank sweep\n\n"
    "## Goal\n\nDoes rank 8 match rank 64?  \n\t- tab-indented note, trailing spaces  \n"
    "## Status\n(a heading of the person's own, outside the markers)\n\n"
)
OLD_AUTO = "## Status\n\nPENDING\n\n## Runtime\n\n(none yet)\n"
PERSON_AFTER = (
    "\n## Lessons\n\n* rank 8 was enough — ünïcödé ✓\n"
    "<!-- a comment the person wrote -->\n"
    "   ## Runtime?   \n"
    "```\n## Status inside a code block\n```\n"
    "last line without a final newline"
)
BODY = PERSON_BEFORE + AUTO_START + "\n" + OLD_AUTO + AUTO_END + "\n" + PERSON_AFTER


def contents(step: int) -> str:
    """Region contents of many shapes: CRLF, headings like the person's, empty, trailing blank lines."""
    shapes = [
        f"## Status\n\nRUNNING (step {step})\n\n## Runtime\n\n00:0{step}:00 elapsed",
        f"## Status\r\n\r\nCOMPLETED {step}\r\n",
        "",
        f"## Goal\n\nnot the person's goal {step}\n\n\n\n",
        f"## Status\n\n{'long line ' * 200}\n\n## Runtime\n\n" + "\n".join(f"log {i}" for i in range(50)),
    ]
    return shapes[step % len(shapes)]


def person_text(text: str) -> tuple[str, str]:
    """The bytes outside Betty's region: up to the start marker's line, and from the end marker's line on."""
    start = text.index(AUTO_START) + len(AUTO_START) + 1
    return text[:start], text[text.index(AUTO_END):]


@pytest.fixture
def store(tmp_path: Path) -> WikiStore:
    root = tmp_path / "wiki"
    (root / "experiments").mkdir(parents=True)
    (root / PAGE).write_bytes((FRONTMATTER + BODY).encode())
    return WikiStore(root)


def test_ten_updates_keep_every_byte_of_the_person_s_text(store: WikiStore) -> None:
    original = (store.root / PAGE).read_bytes().decode()
    for step in range(10):
        page = store.update_auto(PAGE, contents(step))
        stored = (store.root / PAGE).read_bytes().decode()
        assert page.text == stored
        assert person_text(stored) == person_text(original)
        assert page.auto == (contents(step).rstrip("\r\n") + "\n" if contents(step).strip() else "")
    assert store.read(PAGE).head == FRONTMATTER  # the YAML comment included


def test_updates_that_merge_frontmatter_keep_the_body_outside_the_markers(store: WikiStore) -> None:
    for step in range(10):
        page = store.update_auto(PAGE, contents(step), {"status": f"S{step}", f"step_{step}": step})
        assert person_text(page.body) == person_text(BODY)
    frontmatter = store.read(PAGE).frontmatter
    assert frontmatter["status"] == "S9"
    assert [frontmatter[f"step_{step}"] for step in range(10)] == list(range(10))
    assert frontmatter["job_id"] == "123" and frontmatter["name"] == "LoRA"


def test_update_may_change_only_the_region(store: WikiStore) -> None:
    inside_only = BODY.replace(OLD_AUTO, "## Status\n\nchanged by update\n")
    assert store.update(PAGE, body=inside_only).body == inside_only
    for changed in [BODY.replace("Does rank 8", "Does rank 4"), BODY + "\n", BODY.replace("## Lessons", "## Lesson"),
                    BODY.replace(AUTO_START + "\n", "").replace(AUTO_END + "\n", ""), "short\n"]:
        with pytest.raises(WikiError, match="would change the person's text outside Betty's auto markers"):
            store.update(PAGE, body=changed)
    with pytest.raises(WikiError, match="keep exactly one pair"):
        store.update(PAGE, body=BODY.replace(AUTO_START + "\n", ""))
    assert store.read(PAGE).body == inside_only


def test_content_carrying_markers_is_refused(store: WikiStore) -> None:
    for content in [AUTO_END, f"## Status\n{AUTO_END}\n## Goal\nhijacked", f"x {MARKER_STEM}start -->"]:
        with pytest.raises(WikiError, match="marker text"):
            store.update_auto(PAGE, content)
    assert (store.root / PAGE).read_bytes() == (FRONTMATTER + BODY).encode()


def test_a_page_without_markers_has_no_region(store: WikiStore) -> None:
    store.create("notes.md", {"name": "n", "description": "d", "type": "note"}, "# Notes\n")
    with pytest.raises(WikiError, match="notes.md has no region for Betty"):
        store.update_auto("notes.md", "## Status\n")
    assert store.read("notes.md").auto is None


@pytest.mark.parametrize("body", [
    f"{AUTO_START}\n{AUTO_START}\n{AUTO_END}\n",
    f"{AUTO_START}\nx\n",
    f"{AUTO_END}\nx\n{AUTO_START}\n",
    f"{AUTO_START}\n{AUTO_END}\n{AUTO_START}\n{AUTO_END}\n",
])
def test_malformed_markers_are_refused(store: WikiStore, body: str) -> None:
    with pytest.raises(WikiError, match="marker|auto"):
        store.create("bad.md", {"name": "n", "description": "d", "type": "note"}, body)
    (store.root / "bad.md").write_text(FRONTMATTER + body)
    with pytest.raises(WikiError, match="keep exactly one pair|comes before"):
        store.update_auto("bad.md", "x")


def test_markers_count_only_on_a_line_of_their_own(store: WikiStore) -> None:
    body = f"Mention `{AUTO_START}` inline.\n\n  {AUTO_START}  \nold\n{AUTO_END}\nafter `{AUTO_END}`\n"
    (store.root / "inline.md").write_text(FRONTMATTER + body)
    page = store.update_auto("inline.md", "new")
    assert page.body == body.replace("old\n", "new\n")


def test_the_template_layout_holds_status_and_runtime_between_the_markers() -> None:
    template = (Path(__file__).resolve().parents[1] / "wiki" / "experiments" / "TEMPLATE.md").read_text()
    page = parse_page("experiments/TEMPLATE.md", template)
    assert page.auto is not None and "## Status" in page.auto and "## Runtime" in page.auto
    before, after = page.body.split(AUTO_START)[0], page.body.split(AUTO_END)[1]
    assert "## Goal" in before and "## Lessons" in after


person_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=200).filter(
    lambda text: MARKER_STEM not in text)


@settings(max_examples=60, deadline=None)
@given(before=person_texts, after=person_texts, updates=st.lists(person_texts, min_size=1, max_size=4))
def test_any_person_text_survives_any_updates(tmp_path_factory: pytest.TempPathFactory, before: str, after: str,
                                              updates: list[str]) -> None:
    root = tmp_path_factory.mktemp("wiki")
    text = f"{FRONTMATTER}{before}\n{AUTO_START}\nold\n{AUTO_END}\n{after}"
    (root / "p.md").write_bytes(text.encode())
    store = WikiStore(root)
    for content in updates:
        store.update_auto("p.md", content)
        assert person_text((root / "p.md").read_bytes().decode()) == person_text(text)
