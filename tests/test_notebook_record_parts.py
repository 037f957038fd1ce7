"""The records an approval card leaves, built in this process (the kernel tests show them saved)."""

from __future__ import annotations

import re

from betty_jupyter.agent.events import ApprovalRequest
from betty_jupyter.agent.models import Preview
from betty_jupyter.notebook.widgets.approval import ApprovalCard, preview_html
from betty_jupyter.notebook.widgets.record import WIDGET_VIEW
from betty_jupyter.saved_records import keep_records
from hostile import live_html, shown_text

NAME = "<img src=x onerror=window.__pwned=1>\u202e"
SCRIPT = f"#!/bin/bash\n#SBATCH --job-name={NAME}\n#SBATCH --mem=100M\necho hi\n"


def card() -> ApprovalCard:
    request = ApprovalRequest(approval_id="a1", call_id="c1", tool="cluster_submit", tier=2, args={"script": SCRIPT},
                              preview=Preview(kind="script", title=f"submit {NAME}", text=SCRIPT), reason="tier 2")
    return ApprovalCard(request, lambda *_: None)


def test_a_waiting_card_keeps_its_view_and_says_what_is_asked() -> None:
    bundle = card()._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and live_html(bundle["text/html"]) == []
    assert "waiting for a person's answer" in bundle["text/plain"] and "\u202e" not in bundle["text/plain"]
    assert f"#SBATCH --job-name={NAME}".replace("\u202e", "\\u202e") in shown_text(bundle["text/html"])


def test_an_edited_approval_records_what_was_approved_and_what_was_asked() -> None:
    answered = card()
    edited = SCRIPT.replace("--mem=100M", "--mem=2G")
    answered.resolved("edited", "alice (notebook)", {"script": edited, "goal": "<b>more memory</b>"})
    bundle = answered._repr_mimebundle_()
    assert WIDGET_VIEW not in bundle, "an answered card is its record alone"
    text = bundle["text/plain"]
    assert "✎ approved with edits by alice (notebook) — cluster_submit: as edited:" in text
    assert text.index("--mem=2G") < text.index("asked: ") < text.index("--mem=100M")
    assert "goal: <b>more memory</b>" in text
    assert live_html(bundle["text/html"]) == [] and "&lt;b&gt;more memory&lt;/b&gt;" in bundle["text/html"]


def test_an_approval_that_was_not_edited_records_no_edit() -> None:
    answered = card()
    answered.resolved("approved", "alice (notebook)", {"script": "ignored"})
    assert "as edited" not in answered._repr_mimebundle_()["text/plain"]


def test_a_cards_buttons_wrap_and_its_script_takes_the_themes_colours() -> None:
    shown = card()
    assert shown.buttons.layout.flex_flow == "row wrap"
    assert all(button.layout.width == "auto" for button in shown.buttons.children)
    preview = preview_html(shown.request)
    assert "var(--jp-cell-editor-background)" in preview and "var(--jp-mirror-editor-comment-color)" in preview
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", preview), preview


def test_a_saved_notebook_keeps_a_waiting_widgets_record_alone_and_other_widgets_as_they_are() -> None:
    waiting = card()._repr_mimebundle_()
    other = {WIDGET_VIEW: {"model_id": "m2", "version_major": 2, "version_minor": 0},
             "text/html": "<div>someone else's widget</div>", "text/plain": "Slider()"}
    as_lines = {**waiting, "text/html": waiting["text/html"].splitlines(keepends=True)}  # nbformat's list form
    outputs = [{"output_type": "display_data", "data": dict(each), "metadata": {}}
               for each in (waiting, other, as_lines)]
    cells = [{"cell_type": "code", "outputs": outputs}, {"cell_type": "markdown"}]
    model = {"type": "notebook", "content": {"cells": cells}}
    keep_records(model)
    saved, kept, listed = (output["data"] for output in outputs)
    assert WIDGET_VIEW not in saved and saved["text/html"] == waiting["text/html"]
    assert saved["text/plain"] == waiting["text/plain"]
    assert kept == other
    assert WIDGET_VIEW not in listed
    keep_records({"type": "file", "content": "x"})  # anything but a notebook is left alone
