"""``GET approvals`` says whose card each is: the session whose call waits on it, and whom that session works for
(an MCP client's name), so a front-end can show every card waiting for a person with its owner. No cluster: the
cards are new wiki pages, on a local cluster profile."""

from __future__ import annotations

import getpass
import re
from typing import Any

import pytest
from jupyter_server.auth import User
from test_server_support import call, open_session, refusal, until

from betty_jupyter.agent.vocabulary import Face
from betty_jupyter.server.base import approver, person_name
from betty_jupyter.wiki import init_workspace

HEX_ID = re.compile(r"[0-9a-f]{32}")


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


async def test_an_answer_names_the_person_and_the_face_they_answered_in(jp_fetch):
    """Under token auth Jupyter's identity is an anonymous hex id: the record names the server's own account."""
    chat = (await open_session(jp_fetch))["session_id"]
    for name in ("over-rest", "in-the-panel", "in-the-notebook"):
        await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write", body={"args": page(name), "wait": False})

    async def three() -> list[dict[str, Any]] | None:
        approvals = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return approvals if len(approvals) == 3 else None

    cards = {card["args"]["page"]: card["approval_id"] for card in await until("three cards", three)}
    faces = {"notes/over-rest.md": {}, "notes/in-the-panel.md": {"face": "side panel"},
             "notes/in-the-notebook.md": {"face": "notebook"}}
    code, error = await refusal(jp_fetch, "POST", "approvals", cards["notes/over-rest.md"],
                                body={"decision": "denied", "face": "<b>anyone</b> (side panel)"})
    assert code == 400 and "face" in error, "a face is one of Betty's words, never the client's text"
    answered = {page_: (await call(jp_fetch, "POST", "approvals", approval_id,
                                   body={"decision": "denied", **faces[page_]}))["approver"]
                for page_, approval_id in cards.items()}
    me = getpass.getuser()
    assert answered == {"notes/over-rest.md": f"{me} (server API)", "notes/in-the-panel.md": f"{me} (side panel)",
                        "notes/in-the-notebook.md": f"{me} (notebook)"}
    actions = (await call(jp_fetch, "GET", "actions", params={"session": chat}))["actions"]
    assert sorted(a["approver"] for a in actions) == sorted(answered.values())
    assert not any(HEX_ID.search(a["approver"]) for a in actions)


def test_an_anonymous_identity_is_the_account_the_server_runs_as():
    anonymous = User(username="0b8f3c5e9d2a4f6e8a1c3e5f7b9d1f2a", name="Anonymous Io", display_name="Anonymous Io")
    assert person_name(anonymous) == getpass.getuser() == person_name(None)
    assert approver(anonymous, Face.SIDE_PANEL) == f"{getpass.getuser()} (side panel)"


def test_a_person_s_identity_is_their_own_name():
    hub = User(username="alice")
    assert (person_name(hub), approver(hub, Face.NOTEBOOK)) == ("alice", "alice (notebook)")
    named = User(username="u123", name="alice", display_name="Alice L.")
    assert person_name(named) == "alice"
