"""A plan answered over Betty's REST API: the card's routes take a per-step answer, check each edit with the same
policy code as the model's call, and keep the card open while an answer is refused."""

from __future__ import annotations

from typing import Any

import pytest
from test_server_support import call, open_session, refusal, until

from betty_jupyter.wiki import init_workspace


@pytest.fixture
def jp_server_config(jp_root_dir):
    init_workspace(jp_root_dir)
    return {"ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
            "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}]}}


def page(name: str, body: str = "x\n") -> dict[str, Any]:
    return {"page": f"notes/{name}.md", "mode": "create", "body": body,
            "frontmatter": {"name": name, "description": "a page of the plan", "type": "note"}}


async def test_a_plan_card_is_answered_per_step_and_a_refused_edit_keeps_it_open(jp_fetch, jp_root_dir):
    chat = (await open_session(jp_fetch))["session_id"]
    plan = {"goal": "two notes", "steps": [{"tool": "wiki_write", "args": page("a")},
                                           {"tool": "wiki_write", "args": page("b")}]}
    await call(jp_fetch, "POST", "sessions", chat, "tools", "propose_plan", body={"args": plan, "wait": False})

    async def the_card() -> list[dict[str, Any]] | None:
        return (await call(jp_fetch, "GET", "approvals"))["approvals"] or None

    (card,) = await until("the plan's card", the_card)
    assert card["tool"] == "propose_plan" and card["tier"] == 2
    assert card["preview"]["details"] == {"steps": 2, "granted": 0}
    assert "1. wiki_write (tier 2)" in card["preview"]["text"] and "2. wiki_write (tier 2)" in card["preview"]["text"]
    edited = page("a", "the person's own body\n")
    bad = {"steps": [{"decision": "edited", "args": {**edited, "page": "../outside.md"}}, {"decision": "denied"}]}
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"], "preview", body={"args": bad})
    assert code == 400 and "step 1 (wiki_write): the edited call is refused" in error
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"],
                                body={"decision": "edited", "args": bad})
    assert code == 400 and "step 1 (wiki_write)" in error
    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"],
                                body={"decision": "edited", "args": {"steps": [{"decision": "approved"}]}})
    assert code == 400 and "the plan has 2" in error
    assert [c["approval_id"] for c in (await call(jp_fetch, "GET", "approvals"))["approvals"]] == [
        card["approval_id"]], "a refused answer loses nothing: the card is still open"
    good = {"steps": [{"decision": "edited", "args": edited}, {"decision": "denied"}]}
    preview = (await call(jp_fetch, "POST", "approvals", card["approval_id"], "preview", body={"args": good}))
    assert "the person's own body" in preview["preview"]["text"] and preview["preview"]["details"]["granted"] == 1
    first, second = preview["preview"]["details"]["calls"]  # each step as answered, its own preview
    assert (first["status"], second["status"]) == ("edited", "denied")
    assert first["args"]["body"] == "the person's own body\n" and "the person's own body" in first["preview"]["text"]
    answered = await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "edited", "args": good})
    assert answered["decision"] == "edited"
    # The edited step is covered: it runs without another card. The denied step never runs.
    ran = await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write", body={"args": edited})
    assert ran["ok"], ran
    denied = await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write", body={"args": page("b")})
    assert not denied["ok"] and "denied step 2" in denied["summary"]
    assert (jp_root_dir / "wiki" / "notes" / "a.md").read_text().endswith("the person's own body\n")
    assert not (jp_root_dir / "wiki" / "notes" / "b.md").exists()
    assert (await call(jp_fetch, "GET", "approvals"))["approvals"] == []
    actions = (await call(jp_fetch, "GET", "actions", params={"session": chat}))["actions"]
    assert [(a["tool"], a["decision"]) for a in actions] == [
        ("propose_plan", "edited"), ("wiki_write", "edited"), ("wiki_write", "refused")]
