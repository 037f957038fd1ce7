"""``GET approvals`` says whose card each is: the session whose call waits on it, and whom that session works for
(an MCP client's name), so a front-end can show every card waiting for a person with its owner. No cluster: the
cards are new wiki pages, on a local cluster profile."""

from __future__ import annotations

from typing import Any

import pytest
from test_server_support import call, open_session, until

from betty_jupyter.wiki import init_workspace


@pytest.fixture
def jp_server_config(jp_root_dir):
    init_workspace(jp_root_dir)
    return {"ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
            "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}]}}


def page(name: str) -> dict[str, Any]:
    """The arguments of a new wiki page outside experiments/: a card every time, whoever asks."""
    return {"page": f"notes/{name}.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": name, "description": "a page nobody approves", "type": "note"}}


async def test_each_open_approval_names_its_session_and_that_sessions_task(jp_fetch, jp_root_dir):
    client = (await open_session(jp_fetch, agent="claude-code (MCP)", mode="auto"))["session_id"]
    chat = (await open_session(jp_fetch))["session_id"]
    await call(jp_fetch, "POST", "sessions", client, "tools", "wiki_write",
               body={"args": page("for-the-client"), "wait": False, "caller": "agent"})
    await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write", body={"args": page("mine"), "wait": False})

    async def both() -> list[dict[str, Any]] | None:
        approvals = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return approvals if len(approvals) == 2 else None

    cards = {card["args"]["page"]: card for card in await until("both cards", both)}
    assert {(c["session_id"], c["task"]) for c in cards.values()} == {(client, "claude-code (MCP)"), (chat, None)}
    assert cards["notes/for-the-client.md"]["session_id"] == client
    only = (await call(jp_fetch, "GET", "approvals", params={"session": client}))["approvals"]
    assert [(c["approval_id"], c["session_id"]) for c in only] == [(cards["notes/for-the-client.md"]["approval_id"],
                                                                     client)]
    for card in cards.values():
        await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "denied"})
    assert (await call(jp_fetch, "GET", "approvals"))["approvals"] == []
    assert not (jp_root_dir / "wiki" / "notes" / "mine.md").exists()
    assert not (jp_root_dir / "wiki" / "notes" / "for-the-client.md").exists()
