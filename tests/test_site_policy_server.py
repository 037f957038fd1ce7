"""The site's policy over the server's routes: the person cannot loosen it through the REST API the panel and the
notebooks use (a session's mode, a new session's mode, a tool the site denies), the MCP face (off, or a client's
``?mode=auto``), or an automation (whose mode is auto unless it says otherwise: refused when it is defined, and at each run
of one defined before the site's file said so); ``GET policy`` and each session
say what the site decided. No cluster: a local cluster profile, the site's file named by ``$BETTY_SITE_POLICY``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_server_support import call, open_session, refusal, until

from betty_jupyter import config as config_module
from betty_jupyter.errors import SiteRefusal
from betty_jupyter.mcp_server import SessionOptions
from betty_jupyter.server.mcp_http import ServerBetty
from betty_jupyter.wiki import init_workspace

SITE = {"modes": ["off", "propose", "confirm"], "default_mode": "confirm",
        "tools": {"deny": ["wiki_write(page=notes/*)"]}, "mcp": False}


@pytest.fixture
def site_file(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    path = folder / "policy.json"
    path.write_text(json.dumps(SITE))
    path.chmod(0o644)
    return path


@pytest.fixture
def jp_server_config(jp_root_dir, site_file: Path, monkeypatch: pytest.MonkeyPatch):
    """Betty on a local cluster; the person's own server configuration asks for auto mode and allows everything."""
    init_workspace(jp_root_dir)
    monkeypatch.setenv("BETTY_SITE_POLICY", str(site_file))
    monkeypatch.setattr(config_module, "site_config_dirs", lambda: [])
    return {"ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
            "BettyApp": {"mode": "auto"},
            "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}],
                            "rules": {"allow": ["*"]}}}


def page(name: str) -> dict[str, Any]:
    return {"page": f"notes/{name}.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": name, "description": "a page the site refuses", "type": "note"}}


async def test_each_session_and_get_policy_say_what_the_site_decided(jp_fetch, site_file: Path) -> None:
    session = await open_session(jp_fetch)
    assert session["mode"] == "confirm", "the server's auto falls back to the site's default"
    assert session["allowed_modes"] == ["off", "propose", "confirm"] and session["site_policy"] == str(site_file)
    policy = await call(jp_fetch, "GET", "policy")
    assert policy["source"] == str(site_file) and policy["modes"] == ["off", "propose", "confirm"]
    assert policy["mcp"] is False
    fields = {row["field"]: row for row in policy["fields"]}
    assert fields["modes"] == {"field": "modes", "value": "off, propose, confirm", "origin": f"site file {site_file}"}
    assert fields["limits.nodes"]["origin"] == "default"


async def test_a_mode_the_site_refuses_is_403_over_rest_whichever_way_it_is_asked(jp_fetch) -> None:
    session = (await open_session(jp_fetch))["session_id"]
    code, error = await refusal(jp_fetch, "PUT", "sessions", session, "mode", body={"mode": "auto"})
    assert code == 403 and error.startswith("your site does not allow auto mode; it allows off, propose, confirm")
    assert (await call(jp_fetch, "GET", "sessions", session))["mode"] == "confirm"
    assert (await call(jp_fetch, "PUT", "sessions", session, "mode", body={"mode": "propose"}))["mode"] == "propose"
    code, error = await refusal(jp_fetch, "POST", "sessions", body={"mode": "auto"})
    assert code == 403 and "your site does not allow auto mode" in error


async def test_a_tool_the_site_denies_is_refused_for_the_person_and_another_agent(jp_fetch, jp_root_dir) -> None:
    session = (await open_session(jp_fetch))["session_id"]
    for caller in ("person", "agent"):
        outcome = await call(jp_fetch, "POST", "sessions", session, "tools", "wiki_write",
                             body={"args": page(f"by-{caller}"), "caller": caller})
        assert outcome["ok"] is False
        assert "your site does not allow it (its rule deny wiki_write(page=notes/*)" in outcome["summary"]
        assert not (jp_root_dir / "wiki" / "notes" / f"by-{caller}.md").exists()
    assert (await call(jp_fetch, "GET", "approvals"))["approvals"] == []


async def test_the_mcp_face_is_off_and_a_clients_auto_mode_is_refused(jp_fetch, jp_serverapp, site_file) -> None:
    code, error = await refusal(jp_fetch, "POST", "mcp", "credentials", body={"name": "claude-code"})
    assert code == 403 and error == f"your site does not allow Betty's MCP face (mcp is false in {site_file})"
    response = await jp_fetch("betty", "mcp", method="POST", body="{}", raise_error=False,
                              headers={"Authorization": "Bearer betty-mcp-anything"})
    assert response.code == 403 and b"your site does not allow Betty's MCP face" in response.body
    services = jp_serverapp.web_app.settings["betty_services"]
    with pytest.raises(SiteRefusal, match="your site does not allow auto mode"):
        await ServerBetty(services).open_session("claude-code (mcp:laptop)", SessionOptions(None, "auto", "mcp:laptop"))


async def test_an_automation_in_a_mode_the_site_refuses_is_not_defined(jp_fetch) -> None:
    code, error = await refusal(jp_fetch, "POST", "automations", body={"name": "Nightly", "prompt": "Look."})
    assert code == 403 and error.startswith("your site does not allow auto mode; it allows off, propose, confirm")
    assert "Nightly" not in [a["name"] for a in (await call(jp_fetch, "GET", "automations"))["automations"]]
    made = await call(jp_fetch, "POST", "automations",
                      body={"name": "Nightly", "prompt": "Look.", "mode": "confirm"})
    code, error = await refusal(jp_fetch, "PUT", "automations", made["id"],
                                body={"name": "Nightly", "prompt": "Look.", "mode": "auto"})
    assert code == 403 and "your site does not allow auto mode" in error
    assert (await call(jp_fetch, "GET", "automations", made["id"]))["mode"] == "confirm"


async def test_an_automation_defined_before_the_site_refused_its_mode_does_not_run_and_says_why(
        jp_fetch, jp_serverapp) -> None:
    from betty_jupyter.agent.automations.definitions import AutomationSpec

    runner = jp_serverapp.web_app.settings["betty_services"].automations
    made, _ = runner.store.create(AutomationSpec.model_validate({"name": "Nightly", "prompt": "Look at the queue."}))
    automation_id = made.id
    run_id = (await call(jp_fetch, "POST", "automations", automation_id, "run"))["run_id"]

    async def ended() -> dict[str, Any] | None:
        run = await call(jp_fetch, "GET", "automations", automation_id, "runs", run_id)
        return run if run["status"] in ("done", "failed", "breaker", "killed") else None

    run = await until("the run ending", ended)
    assert run["status"] == "failed"
    assert "your site does not allow auto mode" in json.dumps(run)
