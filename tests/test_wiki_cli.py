"""``betty init`` and ``betty wiki``: the seed wiki, pages a person already has, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, betty_in_process, run_betty

from betty_jupyter.wiki import AUTO_START, PAGE_TYPES, WikiStore, lint, parse_page
from betty_jupyter.wiki.seed import SEED_LOCATIONS, seed_dir, seed_pages

SEED_PAGES = ["SCHEMA.md", "clusters/dev-cluster.md", "experiments/TEMPLATE.md", "index.md", "log.md",
              "personas/betty.md", "personas/digest.md"]


def betty(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``betty`` in this process; (exit code, stdout, stderr)."""
    return betty_in_process(capsys, *argv)


@pytest.fixture
def workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, _, err = betty(capsys, "init", str(tmp_path / "ws"))
    assert code == 0, err
    return tmp_path / "ws"


def test_the_seed_is_this_checkout_s_wiki_folder_and_the_wheel_ships_it() -> None:
    import tomllib

    assert seed_dir() == REPO / "wiki"
    assert seed_pages() == SEED_PAGES
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    shipped = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert shipped == {"wiki": "betty_jupyter/seed_wiki", "docs/llm.md": "betty_jupyter/docs/llm.md"}
    assert SEED_LOCATIONS[0] == REPO / shipped["wiki"]


@pytest.mark.parametrize("name", SEED_PAGES)
def test_every_seed_page_passes_the_schema(name: str) -> None:
    page = parse_page(name, (seed_dir() / name).read_bytes().decode("utf-8"))
    assert lint(page.frontmatter) == []
    assert page.frontmatter["type"] in PAGE_TYPES


def test_the_seed_pages_say_what_later_parts_rely_on() -> None:
    store = WikiStore(seed_dir())
    assert "## Experiments" in store.read("index.md").body
    for kind in PAGE_TYPES:
        assert f"`{kind}`" in store.read("SCHEMA.md").body
    cluster = store.read("clusters/dev-cluster.md").body
    for fact in ["`cpu`", "`gpu`", "gpu:a100:4,gpu:h100:2", "betty-dev", "betty dev-cluster env"]:
        assert fact in cluster
    persona = store.read("personas/betty.md")
    assert len(persona.body) < 1500 and "approves" in persona.body and "capability" in persona.body
    assert store.read("experiments/TEMPLATE.md").auto is not None
    assert store.read("SCHEMA.md").auto is None  # it names the markers inline, which opens no region


def test_init_into_an_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = betty(capsys, "init", str(tmp_path / "new"))
    assert code == 0, err
    assert f"wiki/ with {len(SEED_PAGES)} page(s) added, 0 kept" in out
    for name in SEED_PAGES:
        assert f"added  {name}" in out
        assert (tmp_path / "new" / "wiki" / name).read_bytes() == (seed_dir() / name).read_bytes()
    assert (tmp_path / "new" / "notebooks" / "experiments").is_dir()
    assert (tmp_path / "new" / ".betty").is_dir()


def test_init_keeps_a_page_the_person_edited(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    edited = "---\nname: Index\ndescription: mine\ntype: note\n---\n# My own index\r\nwith CRLF\n"
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "index.md").write_bytes(edited.encode())
    monkeypatch.chdir(tmp_path)
    code, out, err = betty(capsys, "init", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["kept"] == ["index.md"]
    assert report["added"] == [name for name in SEED_PAGES if name != "index.md"]
    assert (tmp_path / "wiki" / "index.md").read_bytes() == edited.encode()
    code, out, _ = betty(capsys, "init", "--json")
    assert json.loads(out)["added"] == [] and len(json.loads(out)["kept"]) == len(SEED_PAGES)


def test_wiki_list_show_and_search(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = ["--dir", str(workspace)]
    code, out, _ = betty(capsys, "wiki", "list", *ws)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == SEED_PAGES
    code, out, _ = betty(capsys, "wiki", "list", "--type", "cluster", "--json", *ws)
    assert code == 0 and [row["name"] for row in json.loads(out)] == ["clusters/dev-cluster.md"]
    code, out, _ = betty(capsys, "wiki", "list", "personas", *ws)
    assert out.split()[0] == "personas/betty.md"
    code, out, _ = betty(capsys, "wiki", "show", "experiments/TEMPLATE.md", *ws)
    assert code == 0 and out == (seed_dir() / "experiments" / "TEMPLATE.md").read_text()
    code, out, _ = betty(capsys, "wiki", "show", "personas/betty.md", "--json", *ws)
    assert json.loads(out)["frontmatter"]["type"] == "persona"
    code, out, _ = betty(capsys, "wiki", "search", "SLURM", "partitions", *ws)
    assert code == 0 and out.split()[0] == "clusters/dev-cluster.md"
    code, out, _ = betty(capsys, "wiki", "search", "status", "--type", "experiment", "--json", *ws)
    assert [row["name"] for row in json.loads(out)] == ["experiments/TEMPLATE.md"]
    code, out, _ = betty(capsys, "wiki", "search", "no-such-words-anywhere", *ws)
    assert code == 0 and out == "no pages\n"


@pytest.mark.parametrize("argv", [
    ["wiki", "show", "../x.md"],
    ["wiki", "show", "/etc/passwd"],
    ["wiki", "show", "missing.md"],
    ["wiki", "show", "clusters/dev-cluster"],
    ["wiki", "show", "x\n.md"],
    ["wiki", "list", "../"],
    ["wiki", "list", "--type", "blog"],
    ["wiki", "search", "x", "--type", "nope"],
])
def test_bad_input_is_one_line_on_stderr(workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = betty(capsys, *argv, "--dir", str(workspace))
    assert (code, out) == (1, "")
    assert err.startswith("betty: error: ") and err.count("\n") == 1


def test_no_wiki_and_a_blocked_workspace_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = betty(capsys, "wiki", "list", "--dir", str(tmp_path / "empty"))
    assert code == 1 and err.count("\n") == 1 and "betty init" in err
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "wiki").write_text("a file where the wiki should be")
    code, _, err = betty(capsys, "init", str(tmp_path / "blocked"))
    assert code == 1 and err.startswith("betty: error: cannot set up a workspace") and err.count("\n") == 1


def test_the_installed_command_runs(workspace: Path) -> None:
    result = run_betty("wiki", "show", "index.md", "--dir", str(workspace))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("---\nname: Index\n")
    assert AUTO_START not in result.stdout
