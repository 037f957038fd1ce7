"""The notebook's job table with more jobs than a page, in a real kernel against the dev cluster:
one page shown with the total, paging, one cancel action for the person's own jobs, and a first
``%betty squeue`` that imports no chat client and no plotting library."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from betty_jupyter.notebook.widgets.jobs import PAGE_ROWS
from betty_jupyter.safe_text import visible
from hostile import hostile, live_html, shown_text
from kernel_driver import Kernel
from notebook_support import betty_kernel, kernel, llm, project  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster

NAMES = hostile("job_names")
HELD = PAGE_ROWS + 12


def slurm(project: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[str]:
    """A Slurm command run by hand on the dev cluster."""
    return subprocess.run(list(argv), env=project["env"], cwd=project["root"], capture_output=True, text=True,
                          timeout=120)


def hold(project: dict[str, Any], name: str, *more: str) -> str:
    """Submit a held job named ``name``; its id."""
    done = slurm(project, "sbatch", "--parsable", "--hold", f"--job-name={name}", "--output=/dev/null", *more,
                 "--wrap", "true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def queued(project: dict[str, Any], jobs: list[str]) -> set[str]:
    """Which of ``jobs`` still wait in the queue."""
    done = slurm(project, "squeue", "--noheader", "--states=PENDING", "--format=%i", "--jobs", ",".join(jobs))
    return set(done.stdout.split()) & set(jobs)


@pytest.fixture(scope="module")
def held(project: dict[str, Any]) -> Iterator[dict[str, str]]:
    """Job id → name of more of the person's own held jobs than one page shows: the hostile names in the
    gpu partition (one page of their own), the others in the default one; every one cancelled afterwards."""
    jobs: dict[str, str] = {}
    try:
        for number in range(HELD):
            name = NAMES[number] if number < len(NAMES) else f"sweep-{number}"
            jobs[hold(project, name, *(["--partition=gpu"] if name in NAMES else []))] = name
        yield jobs
    finally:
        if jobs:
            slurm(project, "scancel", *jobs)


def html_of(kernel: Kernel, model: str) -> str:
    return str(kernel.models[model].get("value", ""))


def page_ids(kernel: Kernel, table: str) -> list[str]:
    """The job ids in the rows the table's page shows (the first cell of each row)."""
    return re.findall(r"<tr><td>(\d+)</td>", html_of(kernel, kernel.find(table, "betty-job-table")[0]))


def test_the_table_shows_one_page_with_the_total_and_pages_through(kernel: Kernel, held: dict[str, str]) -> None:
    cell = kernel.run("%betty squeue --me")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    table = cell.widgets[0]
    total = int(kernel.run("_jobs = _\nlen(_jobs)").text)
    assert total >= HELD, "the returned DataFrame holds every job, not the page"
    position = kernel.find(table, "betty-page-position")[0]
    assert f"rows 1–{PAGE_ROWS} of {total:,}" in html_of(kernel, position)
    first = page_ids(kernel, table)
    assert len(first) == PAGE_ROWS

    kernel.click(kernel.find(table, "betty-page-next")[0])
    kernel.wait_for(lambda: f"rows {PAGE_ROWS + 1}–" in html_of(kernel, position), what="the second page")
    second = page_ids(kernel, table)
    assert second and not set(second) & set(first), "the next page shows other rows"
    assert set(held) <= set(re.findall(r"'(\d+)'", kernel.run("list(_jobs['job_id'].astype(str))").text))
    kernel.click(kernel.find(table, "betty-page-previous")[0])
    kernel.wait_for(lambda: page_ids(kernel, table) == first, what="the first page again")

    # The state filter counts and pages the rows in that state alone, from the first page.
    kernel.click(kernel.find(table, "betty-page-next")[0])
    kernel.wait_for(lambda: f"rows {PAGE_ROWS + 1}–" in html_of(kernel, position), what="the second page")
    pending = int(kernel.run("int((_jobs['state'].astype(str).str.split(' ').str[0] == 'PENDING').sum())").text)
    chooser = kernel.find(table, "betty-state-filter")[0]
    kernel.set_value(chooser, index=kernel.models[chooser]["_options_labels"].index("PENDING"))
    kernel.wait_for(lambda: f"rows 1–{min(pending, PAGE_ROWS)} of {pending:,}" in html_of(kernel, position),
                    what="the pending jobs' first page")
    kernel.set_value(chooser, index=0)
    kernel.wait_for(lambda: f"of {total:,}" in html_of(kernel, position), what="every state again")

    # The output a saved notebook keeps: the page shown and the total, never every row.
    [record] = [item["text/html"] for item in cell.result + cell.displays if "text/html" in item]
    assert f"of {total:,}" in record and len(re.findall(r"<tr><td>", record)) == PAGE_ROWS
    text = "".join(item.get("text/plain", "") for item in cell.result + cell.displays)
    assert f"rows 1–{PAGE_ROWS} of {total:,}" in text


def test_hostile_names_stay_text_in_the_page_its_record_and_the_cancel_choices(kernel: Kernel,
                                                                                 held: dict[str, str]) -> None:
    cell = kernel.run("%betty squeue --me --state PENDING --partition gpu")
    table = cell.widgets[0]
    markups = [str(kernel.models[m].get("value", "")) for m in kernel.descendants(table)
               if kernel.models.get(m, {}).get("_model_name") == "HTMLModel"]
    records = [item["text/html"] for item in cell.result + cell.displays if "text/html" in item]
    assert [problem for markup in markups + records for problem in live_html(markup)] == []
    assert "&lt;img src=x onerror=" in "".join(markups) and "&lt;img src=x onerror=" in "".join(records)
    on_page = [name for ident, name in held.items() if ident in page_ids(kernel, table)]
    assert sorted(on_page) == sorted(NAMES), "every hostile name is on the page"
    for shown in ("\n".join(shown_text(markup) for markup in markups), "\n".join(map(shown_text, records))):
        assert all(visible(name) in shown for name in NAMES)
    choices = kernel.models[kernel.find(table, "betty-cancel-job")[0]]["_options_labels"]
    assert choices and all(not re.search(r"[\x00-\x1f\x7f\u202e]", label) for label in choices), choices


def test_the_one_cancel_action_cancels_exactly_the_chosen_job_after_its_card(kernel: Kernel, project: dict[str, Any],
                                                                              held: dict[str, str]) -> None:
    table = kernel.run("%betty squeue --me --state PENDING").widgets[0]
    chooser = kernel.find(table, "betty-cancel-job")[0]
    options = kernel.models[chooser]["_options_labels"]
    chosen = next(i for i, label in enumerate(options) if label.split(" ")[0] in held)
    victim = options[chosen].split(" ")[0]
    assert kernel.models[chooser]["index"] == 0, "the page's first own job is chosen to begin with"
    assert set(page_ids(kernel, table)) >= {label.split(" ")[0] for label in options}, "choices come from the page"
    kernel.set_value(chooser, index=chosen)
    kernel.click(kernel.find(table, "betty-cancel")[0])
    root = kernel.wait_for(lambda: kernel.find(table, "betty-approve"), what="the card in the table")[0]
    assert f"scancel {victim}" in kernel.texts(table)
    waiting = queued(project, list(held))
    assert victim in waiting, "nothing is cancelled before the approval"
    kernel.click(root)
    kernel.wait_for(lambda: f"cancelled job {victim}" in kernel.texts(table), what="the cancellation")
    assert queued(project, list(held)) == waiting - {victim}, "exactly the chosen job is cancelled"


def test_another_users_job_is_never_a_cancel_choice(kernel: Kernel, project: dict[str, Any],
                                                    held: dict[str, str]) -> None:
    stranger = hold(project, "someone-elses", "--uid=nobody")
    try:
        table = kernel.run("%betty squeue --state PENDING").widgets[0]
        # the newest job first: the stranger's, on the page beside the person's own
        sort = [m for m in kernel.descendants(table) if kernel.models[m].get("description") == "sort by"][0]
        kernel.set_value(sort, index=kernel.models[sort]["_options_labels"].index("job_id"))
        descending = [m for m in kernel.descendants(table) if kernel.models[m].get("description") == "descending"][0]
        kernel.set_value(descending, value=True)
        kernel.wait_for(lambda: page_ids(kernel, table)[:1] == [stranger], what="the stranger's job first")
        labels = kernel.models[kernel.find(table, "betty-cancel-job")[0]]["_options_labels"]
        assert labels, "the person's own jobs on the page are choices"
        assert not any(label.split(" ")[0] == stranger for label in labels), labels
        # Even asked from the kernel itself, the table refuses a job that is not the person's own.
        refused = kernel.run("from ipywidgets.widgets.widget import _instances\n"
                             f"_t = _instances[{table!r}]\n_t._start_cancel({stranger!r})\n"
                             "print(_t.actions.children[-1].value)")
        assert f"job {stranger} is not one of your active jobs on this page" in refused.stdout, refused.errors
        assert queued(project, [stranger]) == {stranger}
    finally:
        slurm(project, "scancel", stranger)


def test_a_first_squeue_in_a_new_kernel_imports_no_chat_client_and_no_plotting(project: dict[str, Any]) -> None:
    modules = "import sys\nprint(sorted(m for m in ('openai', 'matplotlib', 'pandas', 'ipywidgets') if m in sys.modules))"
    with betty_kernel(project["root"], project["env"]) as fresh:
        kept = fresh.run("_q = %betty squeue --me")
        assert kept.status == "ok" and not kept.stderr and not kept.widgets, kept.stderr
        assert fresh.run(modules).stdout.strip() == "['pandas']", \
            "the DataFrame needs pandas; nothing needs a chart or a model, and a table kept unshown needs no widgets"
        cell = fresh.run("_q")
        assert cell.status == "ok" and not cell.stderr and cell.widgets, cell.stderr
        assert fresh.run(modules).stdout.strip() == "['ipywidgets', 'pandas']"
        assert fresh.run("type(_).__mro__[1].__name__").text == "'DataFrame'"
