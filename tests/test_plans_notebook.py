"""A plan in ``%betty ask``: one card in a real kernel, each step granted or denied there, then run as answered.
The scripted model speaks over real HTTP; the kernel talks to the dev cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hostile import live_html
from kernel_driver import Kernel
from llm_server import ScriptedLLM, call, say
from notebook_support import kernel, llm, project  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"


def note(name: str) -> dict[str, Any]:
    return {"page": f"notes/plan-{name}.md", "mode": "create", "body": f"{name} {HOSTILE}\n",
            "frontmatter": {"name": name, "description": "a note of a plan", "type": "note"}}


def test_a_plan_card_grants_and_denies_steps_then_runs_the_granted_ones(
        kernel: Kernel, llm: ScriptedLLM, project: dict[str, Any]) -> None:  # noqa: F811
    llm.add(call("propose_plan", {"goal": "two notes", "steps": [{"tool": "wiki_write", "args": note("a")},
                                                                 {"tool": "wiki_write", "args": note("b")}]}),
            call("wiki_write", note("a")), call("wiki_write", note("b")), say("Wrote what you granted."))
    cell = kernel.run('%betty ask "write two notes"')
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    chat = cell.widgets[0]
    steps = kernel.wait_for(lambda: kernel.find(chat, "betty-plan-step"), what="the plan's steps")
    shown = kernel.texts(chat)
    assert "1. wiki_write (tier 2)" in shown and "2. wiki_write (tier 2)" in shown
    assert live_html(shown) == [] and "&lt;script&gt;alert(2)" in shown, "the steps' previews are text"
    kernel.click(steps[1])
    kernel.wait_for(lambda: "✗ denied: 2. wiki_write" in kernel.texts(chat), what="step 2 denied")
    kernel.click(kernel.find(chat, "betty-plan-execute")[0])
    kernel.wait_for(lambda: "Wrote what you granted." in kernel.texts(chat), what="the reply")
    wiki = Path(project["root"]) / "wiki" / "notes"
    assert (wiki / "plan-a.md").exists() and not (wiki / "plan-b.md").exists()
    assert kernel.run("chat = _; chat.done.wait(30), chat.reason").text == "(True, 'finished')"
