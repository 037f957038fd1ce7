"""Betty and the open notebook, in Debian's Chromium: with a notebook open, the chat shows the context chip; the agent,
driven by the scripted model, reads the active notebook, proposes a cell edit shown as a diff, the person approves it
and the cell changes in the open notebook (the person's unsaved typing in another cell kept); changing a code cell
is tier 2; running a cell is tier 2 and waits for the person, then runs in the notebook's own kernel, and only the
code its card showed: a cell changed in the open notebook while the card waits is not run, and the model is told;
a removed chip sends none of it.

Everything is real: JupyterLab with Betty's extension, the notebook's kernel, the dev cluster the session is
opened on, and the scripted model over HTTP, whose requests show exactly what the model was sent.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any

import nbformat
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    REPO,
    lab,
    page,
    screenshot,
    screenshot_on_failure,
    served_panel_build,
)
from playwright.sync_api import Page, expect

NOTEBOOK = "analysis/train.ipynb"
TYPED = "# typed by the person, not saved"
HOSTILE_ERROR = "<img src=x onerror=alert(1)> \u202egnp.exe"


def write_notebook(root) -> None:  # type: ignore[no-untyped-def]
    """A notebook of three code cells, the first showing an error, in a git repository with uncommitted work."""
    book = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                             "language": "python"}})
    failed = nbformat.v4.new_code_cell("import math")
    failed.outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue=HOSTILE_ERROR, traceback=[])]
    book.cells = [failed, nbformat.v4.new_code_cell("lr = 1e-3"), nbformat.v4.new_code_cell("print(6 * 7)")]
    (root / "analysis").mkdir(exist_ok=True)
    nbformat.write(book, root / NOTEBOOK)
    git = ["git", "-C", str(root), "-c", "user.name=Test", "-c", "user.email=test@example.org"]
    for argv in (["init", "-q", "-b", "nb-tools"], ["add", "analysis"], ["commit", "-q", "-m", "start"]):
        subprocess.run(git + argv, check=True, capture_output=True)
    (root / "analysis" / "notes.txt").write_text("x")
    subprocess.run(git + ["add", "analysis/notes.txt"], check=True, capture_output=True)


def last_user_message(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def test_betty_reads_edits_and_runs_the_open_notebook_only_as_the_person_approves(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        project: dict) -> None:  # type: ignore[type-arg]  # noqa: F811
    root = project["root"]
    write_notebook(root)
    with screenshot_on_failure(page, "failure", prefix="notebook-tools"):
        page.goto(f"{lab.url}lab/tree/{NOTEBOOK}?reset&token={lab.token}")
        cells = page.locator(".jp-NotebookPanel .jp-Cell")
        expect(cells.nth(2)).to_be_visible()
        built = json.loads((REPO / "betty_jupyter" / "labextension" / "package.json").read_text())
        assert served_panel_build(page) == built["jupyterlab"]["_build"]["load"], (
            "this JupyterLab serves another build of Betty's extension: reinstall with .venv/bin/pip install -e .")
        page.locator('.lm-TabBar-tab[data-id="betty-panel"]').click()
        panel = page.get_by_test_id("betty-panel")
        expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open")

        # The person types in the first cell (unsaved), then selects the second.
        cells.nth(0).locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n" + TYPED)
        cells.nth(1).locator(".jp-InputPrompt").click()
        chip = panel.get_by_test_id("betty-context-chip")
        expect(chip).to_contain_text(f"{NOTEBOOK}, cell 1")
        expect(chip).to_contain_text("git nb-tools (uncommitted changes)")
        expect(chip).to_contain_text("ValueError: <img src=x onerror=alert(1)> \\u202egnp.exe")
        assert chip.locator("img").count() == 0

        llm.add(call("notebook_read", {}),
                call("notebook_edit", {"action": "replace", "index": 1, "source": "lr = 3e-4"}),
                say("I lowered the learning rate in cell 1."))
        panel.get_by_test_id("betty-prompt").fill("lower the learning rate in my notebook")
        screenshot(page, "1-context-chip", prefix="notebook-tools")
        panel.get_by_test_id("betty-send").click()
        card = panel.get_by_test_id("betty-approval-card")
        expect(card).to_be_visible()
        expect(card.get_by_test_id("betty-approval-tier")).to_contain_text("2")
        expect(card).to_contain_text("-lr = 1e-3")
        expect(card).to_contain_text("+lr = 3e-4")
        read_row = panel.get_by_test_id("betty-tool-row").first
        expect(read_row).to_contain_text("notebook_read")
        expect(read_row).to_contain_text(f"read cells 0–2 of 3 in {NOTEBOOK}")
        screenshot(page, "2-edit-as-a-diff", prefix="notebook-tools")
        card.get_by_test_id("betty-approve").click()

        expect(cells.nth(1).locator(".cm-content")).to_have_text("lr = 3e-4")
        expect(cells.nth(0).locator(".cm-content")).to_contain_text(TYPED)
        expect(panel.get_by_test_id("betty-tool-row").nth(1)).to_contain_text(
            f"cell 1 of {NOTEBOOK} in the open notebook: replaced")
        expect(panel.get_by_test_id("betty-message-assistant").last).to_contain_text("lowered the learning rate")
        assert "lr = 1e-3" in nbformat.read(root / NOTEBOOK, as_version=4).cells[1].source, (
            "the open notebook's file is left for the person's own save")
        sent = last_user_message(llm.requests[0])
        assert sent.startswith("lower the learning rate in my notebook\n\n[context from the person's JupyterLab")
        assert f"| active notebook: {NOTEBOOK}, selected cell 1" in sent and "| git branch: nb-tools" in sent
        told = next(m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool")
        assert "> ValueError: " + HOSTILE_ERROR.replace("\u202e", "\\u202e") in told
        screenshot(page, "3-edit-in-the-open-notebook", prefix="notebook-tools")

        # Running a cell executes code in the person's kernel: it waits for them, even in auto.
        panel.get_by_test_id("betty-mode-auto").click()
        expect(panel.get_by_test_id("betty-mode-switch")).to_have_attribute("data-mode", "auto")
        llm.add(call("notebook_run_cell", {"index": 2}), say("It printed 42."))
        cells.nth(2).locator(".jp-InputPrompt").click()
        expect(chip).to_contain_text(f"{NOTEBOOK}, cell 2")
        panel.get_by_test_id("betty-prompt").fill("run the print cell")
        panel.get_by_test_id("betty-send").click()
        run_card = panel.get_by_test_id("betty-approval-card").last
        expect(run_card.get_by_test_id("betty-approval-tier")).to_contain_text("2")
        expect(run_card).to_contain_text("print(6 * 7)")
        expect(run_card).to_contain_text("Python 3 (ipykernel)")
        expect(run_card).to_contain_text(hashlib.sha256(b"print(6 * 7)").hexdigest())  # the digest the run is bound to
        assert "selected cell 2" in last_user_message(llm.requests[-1])
        expect(run_card.get_by_test_id("betty-approve")).to_be_enabled()
        assert cells.nth(2).locator(".jp-OutputArea-output").count() == 0, "nothing ran before the approval"
        screenshot(page, "4-run-waits", prefix="notebook-tools")
        run_card.get_by_test_id("betty-approve").click()
        expect(cells.nth(2).locator(".jp-OutputArea-output")).to_contain_text("42")
        expect(panel.get_by_test_id("betty-message-assistant").last).to_contain_text("It printed 42.")
        expect(panel.get_by_test_id("betty-tool-row").last).to_contain_text(f"cell 2 of {NOTEBOOK}: ran")

        # A cell changed in the open notebook (not saved) while its card waits is not run: the card's code or nothing.
        llm.add(call("notebook_run_cell", {"index": 2}), say("It did not run."))
        panel.get_by_test_id("betty-prompt").fill("run the print cell again")
        panel.get_by_test_id("betty-send").click()
        again = panel.get_by_test_id("betty-approval-card").last
        expect(again.get_by_test_id("betty-approve")).to_be_enabled()
        expect(again).to_contain_text("print(6 * 7)")
        cells.nth(2).locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("  # ; print('PLANTED')")
        expect(cells.nth(2).locator(".cm-content")).to_contain_text("PLANTED")
        again.get_by_test_id("betty-approve").click()
        expect(panel.get_by_test_id("betty-message-assistant").last).to_contain_text("It did not run.")
        expect(panel.get_by_test_id("betty-tool-row").last).to_contain_text(
            f"cell 2 of {NOTEBOOK}: not run: cell 2 no longer holds the approved code")
        expect(cells.nth(2).locator(".jp-OutputArea-output")).to_have_count(1)
        expect(cells.nth(2).locator(".jp-OutputArea-output")).not_to_contain_text("PLANTED")
        told = next(m["content"] for m in reversed(llm.requests[-1]["messages"]) if m["role"] == "tool")
        assert "not run: cell 2 no longer holds the approved code" in told, "the model hears it did not run"

        # A removed chip sends none of it.
        panel.get_by_test_id("betty-mode-confirm").click()
        expect(panel.get_by_test_id("betty-mode-switch")).to_have_attribute("data-mode", "confirm")
        llm.add(say("Noted."))
        asked = len(llm.requests)
        panel.get_by_test_id("betty-prompt").fill("just a question")
        panel.get_by_test_id("betty-context-chip-remove").click()
        expect(panel.get_by_test_id("betty-context-chip")).to_have_count(0)
        panel.get_by_test_id("betty-send").click()
        expect(panel.get_by_test_id("betty-message-assistant").last).to_contain_text("Noted.")
        expect(panel.get_by_test_id("betty-context-chip")).to_be_visible()  # back for the next message
        assert last_user_message(llm.requests[asked]) == "just a question", "nothing of the removed chip is sent"
