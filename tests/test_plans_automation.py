"""A plan from an automation waits for a person as one card, answered per step over the server API, on the dev
cluster with a scripted model over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from llm_server import call as model_calls
from llm_server import say
from test_server_support import call, llm, server_config, until  # noqa: F401

pytestmark = pytest.mark.cluster


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):  # noqa: F811
    return server_config(llm, ssh_profile, jp_root_dir)


def note(name: str) -> dict[str, Any]:
    return {"page": f"notes/{name}.md", "mode": "create", "body": f"{name}\n",
            "frontmatter": {"name": name, "description": "made by an automation's plan", "type": "note"}}


async def test_an_automation_s_plan_waits_for_a_person_as_one_card(jp_fetch, llm, jp_root_dir):  # noqa: F811
    llm.add(model_calls("propose_plan", {"goal": "two notes", "steps": [{"tool": "wiki_write", "args": note("a")},
                                                                       {"tool": "wiki_write", "args": note("b")}]}),
            model_calls("wiki_write", note("a")), model_calls("wiki_write", note("b")), say("Wrote what I could."))
    made = await call(jp_fetch, "POST", "automations", body={"name": "Planner", "prompt": "Write the notes.",
                                                             "mode": "auto"})
    run_id = (await call(jp_fetch, "POST", "automations", made["id"], "run"))["run_id"]

    async def card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return pending[0] if pending else None

    waiting = await until("the plan's card", card)
    assert (waiting["tool"], waiting["tier"], waiting["task"]) == ("propose_plan", 2, "Planner")
    answer = {"steps": [{"decision": "approved"}, {"decision": "denied"}]}
    await call(jp_fetch, "POST", "approvals", waiting["approval_id"], body={"decision": "edited", "args": answer})

    async def ended() -> dict[str, Any] | None:
        run = await call(jp_fetch, "GET", "automations", made["id"], "runs", run_id)
        return run if run["status"] in ("done", "failed", "breaker", "killed") else None

    run = await until("the run's end", ended)
    assert run["status"] == "done"
    assert (await call(jp_fetch, "GET", "approvals"))["approvals"] == [], "the granted step asked nothing more"
    assert (jp_root_dir / "wiki" / "notes" / "a.md").exists() and not (jp_root_dir / "wiki" / "notes" / "b.md").exists()
    actions = (await call(jp_fetch, "GET", "actions", params={"session": run["session_id"]}))["actions"]
    assert [(a["tool"], a["decision"]) for a in actions] == [
        ("propose_plan", "edited"), ("wiki_write", "approved"), ("wiki_write", "refused")]
