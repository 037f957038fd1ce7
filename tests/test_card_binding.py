"""A card is bound to exactly what runs: the answer names the card it answers (its digest), and the call runs
only while what it would run is still what the card showed. No cluster: the cards are wiki writes outside
experiments/ (tier 2, a card every time), on a local cluster profile, through a real Jupyter server's routes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from test_server_support import call, open_session, refusal, until

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.models import Preview, card_digest
from betty_jupyter.errors import CardChangedError
from betty_jupyter.wiki import init_workspace

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
OTHER = "sha256:" + "0" * 64


@pytest.fixture
def jp_server_config(jp_root_dir):
    init_workspace(jp_root_dir)
    return {"ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
            "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}]}}


def new_page(name: str, body: str = "x\n") -> dict[str, Any]:
    """A new wiki page outside experiments/: a card every time, whoever asks."""
    return {"page": f"notes/{name}.md", "mode": "create", "body": body,
            "frontmatter": {"name": name, "description": "a page to approve", "type": "note"}}


async def one_card(jp_fetch, page: str) -> dict[str, Any]:
    """The open card of the call writing ``page``."""
    async def card() -> dict[str, Any] | None:
        cards = [c for c in (await call(jp_fetch, "GET", "approvals"))["approvals"] if c["args"]["page"] == page]
        return cards[0] if cards else None

    return await until(f"the card for {page}", card)


async def open_ids(jp_fetch) -> set[str]:
    return {card["approval_id"] for card in (await call(jp_fetch, "GET", "approvals"))["approvals"]}


def test_the_digest_covers_what_runs_and_not_how_things_stand() -> None:
    shown = Preview(kind="command", title="cancel job 7 (train, PENDING)", text="scancel 7", details={"state": "P"})
    later = Preview(kind="command", title="cancel job 7 (train, RUNNING)", text="scancel 7", details={"state": "R"})
    assert card_digest("cluster_cancel", {"job_id": "7"}, shown) == card_digest("cluster_cancel", {"job_id": "7"}, later)
    assert DIGEST.fullmatch(card_digest("cluster_cancel", {"job_id": "7"}, shown))
    variants = {
        card_digest("cluster_cancel", {"job_id": "7"}, shown),
        card_digest("cluster_cancel", {"job_id": "8"}, shown),
        card_digest("cluster_submit", {"job_id": "7"}, shown),
        card_digest("cluster_cancel", {"job_id": "7"}, shown.model_copy(update={"text": "scancel 7 "})),
        card_digest("cluster_cancel", {"job_id": "7"}, shown.model_copy(update={"kind": "script"})),
        card_digest("cluster_cancel", {"job_id": "7"}, shown.model_copy(update={"inputs": {"cell.py": OTHER}})),
    }
    assert len(variants) == 6, "each part of what runs changes the digest"


async def test_the_broker_refuses_an_answer_naming_another_card_and_keeps_it_open() -> None:
    from betty_jupyter.agent.events import ApprovalRequest

    broker = ApprovalBroker()
    preview = Preview(kind="command", title="t", text="scancel 7")
    request = ApprovalRequest(approval_id="a1", call_id="c1", tool="cluster_cancel", tier=2, args={"job_id": "7"},
                              preview=preview, reason="r", digest=card_digest("cluster_cancel", {"job_id": "7"},
                                                                              preview))
    waiting = broker.request(request)
    for wrong in (OTHER, "", request.digest.upper(), request.digest + " "):
        with pytest.raises(CardChangedError, match="another card"):
            broker.respond("a1", "approved", "ada (notebook)", digest=wrong)
        assert not waiting.done() and [r.approval_id for r in broker.pending()] == ["a1"]
    broker.respond("a1", "approved", "ada (notebook)", digest=request.digest)
    assert (await waiting).approved


async def test_an_answer_to_another_card_is_refused_and_the_card_stays_open(jp_fetch, jp_root_dir):
    chat = (await open_session(jp_fetch))["session_id"]
    await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write",
               body={"args": new_page("bound"), "wait": False, "caller": "agent"})
    card = await one_card(jp_fetch, "notes/bound.md")
    assert DIGEST.fullmatch(card["digest"])

    code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"],
                                body={"decision": "approved", "digest": OTHER})
    assert code == 409 and "another card" in error and "\n" not in error
    for malformed in ("sha256:xyz", "md5:" + "0" * 32, "sha256:" + "0" * 63, card["digest"] + "\n", 7):
        code, error = await refusal(jp_fetch, "POST", "approvals", card["approval_id"],
                                    body={"decision": "approved", "digest": malformed})
        assert code == 400 and "digest" in error and "\n" not in error
    assert card["approval_id"] in await open_ids(jp_fetch), "a refused answer changes nothing"
    assert not (jp_root_dir / "wiki" / "notes" / "bound.md").exists()

    answered = await call(jp_fetch, "POST", "approvals", card["approval_id"],
                          body={"decision": "approved", "digest": card["digest"], "face": "side panel"})
    assert answered["decision"] == "approved"
    await until("the page", exists(jp_root_dir / "wiki" / "notes" / "bound.md"))
    records = await until("the record", lambda: _records(jp_fetch, "notes/bound.md"))
    assert [(r["decision"], r["digest"], r["ok"]) for r in records] == [("approved", card["digest"], True)]


async def test_a_page_changed_while_its_card_waited_is_not_overwritten(jp_fetch, jp_root_dir):
    """The card showed a diff against the page as it was; the person edited the page meanwhile, so the
    approved diff is no longer what would be written: nothing is written, and the person's edit survives."""
    chat = (await open_session(jp_fetch, mode="auto"))["session_id"]
    await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write",
               body={"args": new_page("plan", "first\n"), "wait": False})
    created = await one_card(jp_fetch, "notes/plan.md")
    await call(jp_fetch, "POST", "approvals", created["approval_id"], body={"decision": "approved"})
    page = jp_root_dir / "wiki" / "notes" / "plan.md"
    await until("the page", exists(page))

    rewrite = {"page": "notes/plan.md", "mode": "update", "body": "the model's whole new body\n"}
    await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write",
               body={"args": rewrite, "wait": False, "caller": "agent"})
    card = await one_card(jp_fetch, "notes/plan.md")
    assert card["preview"]["kind"] == "diff" and "first" in card["preview"]["text"]
    mine = page.read_text().replace("first\n", "first\nmy own line, typed while the card waited\n")
    page.write_text(mine)

    await call(jp_fetch, "POST", "approvals", card["approval_id"],
               body={"decision": "approved", "digest": card["digest"]})
    records = await until("the refusal", lambda: _records(jp_fetch, "notes/plan.md", "refused"))
    assert len(records) == 1 and records[0]["ok"] is False
    summary = records[0]["summary"]
    assert summary.startswith("not run: the diff changed after the card was shown") and "\n" not in summary
    assert records[0]["approver"] and records[0]["digest"] == card["digest"], "the log keeps who approved what"
    assert page.read_text() == mine, "the person's edit is kept; nothing the card did not show was written"


async def test_a_socket_answer_naming_another_card_is_refused(jp_fetch, jp_ws_fetch, jp_root_dir):
    import json

    chat = (await open_session(jp_fetch))["session_id"]
    socket = await jp_ws_fetch("betty", "api", "sessions", chat, "ws")
    try:
        await call(jp_fetch, "POST", "sessions", chat, "tools", "wiki_write",
                   body={"args": new_page("by-socket"), "wait": False, "caller": "agent"})
        card = await one_card(jp_fetch, "notes/by-socket.md")
        await socket.write_message(json.dumps({"type": "approval", "approval_id": card["approval_id"],
                                               "decision": "approved", "digest": OTHER}))
        while True:
            said = json.loads(await asyncio.wait_for(socket.read_message(), 60))
            if said.get("type") == "server_error":
                break
        assert "another card" in said["message"]
        assert card["approval_id"] in await open_ids(jp_fetch)
        await socket.write_message(json.dumps({"type": "approval", "approval_id": card["approval_id"],
                                               "decision": "approved", "digest": card["digest"]}))
        await until("the page", exists(jp_root_dir / "wiki" / "notes" / "by-socket.md"))
    finally:
        socket.close()


def exists(path: Path) -> Callable[[], Awaitable[bool]]:
    """A check for :func:`until`: whether ``path`` exists."""
    async def check() -> bool:
        return path.exists()

    return check


async def _records(jp_fetch, page: str, decision: str | None = None) -> list[dict[str, Any]] | None:
    """The action log's records of wiki writes of ``page`` other than its creation (of one decision, when given)."""
    actions = (await call(jp_fetch, "GET", "actions"))["actions"]
    found = [a for a in actions if a["tool"] == "wiki_write" and a["args"]["page"] == page
             and (a["args"]["mode"] != "create" or page == "notes/bound.md")
             and (decision is None or a["decision"] == decision)]
    return found or None
