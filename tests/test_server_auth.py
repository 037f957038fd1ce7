"""Every route of the server extension refuses a request without a valid token, and the route table is the contract's.

The webhook route (``POST hooks/{id}``) is the one route Jupyter does not authenticate: it takes
its automation's secret instead, and refuses a request without it (403) — a Jupyter token too.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from betty_jupyter.server.handlers import handlers

CONTRACT = Path(__file__).resolve().parents[1] / "docs" / "server-api.md"
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def jp_server_config(jp_root_dir):
    return {
        "ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
        "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}]},
    }


def concrete(pattern: str) -> str:
    """A URL the route pattern matches: each named part becomes ``x1``."""
    return re.sub(r"\(\?P<\w+>[^)]*\)", "x1", pattern)


def route_methods() -> list[tuple[str, str]]:
    """(METHOD, url) for every method every handler of the table defines itself."""
    found = [(method.upper(), concrete(pattern)) for pattern, handler in handlers for method in METHODS
             if method in vars(handler)]
    assert {url for _, url in found} == {concrete(pattern) for pattern, _ in handlers}, "a route without a method"
    return found


def contract_routes() -> set[tuple[str, str]]:
    """(METHOD, route) of every row of the contract's route table, a ``{name}`` written as ``{}``."""
    rows = re.findall(r"^\| (GET|POST|PUT|DELETE|WS) \| `([^`]+)` \|", CONTRACT.read_text(), re.M)
    return {("GET" if method == "WS" else method, re.sub(r"\{\w+\}", "{}", route)) for method, route in rows}


def test_the_route_table_is_the_contracts():
    served = {(method, url.removeprefix("/betty/api/").replace("x1", "{}")) for method, url in route_methods()}
    assert served == contract_routes()
    assert len(served) == 62


def test_only_the_webhook_route_skips_jupyters_authentication():
    skipping = [(method.upper(), concrete(pattern)) for pattern, handler in handlers for method in METHODS
                if method in vars(handler) and getattr(getattr(handler, method), "__allow_unauthenticated", False)]
    assert skipping == [("POST", "/betty/api/hooks/x1")]


@pytest.mark.parametrize("authorization", [None, "token not-the-token"])
async def test_every_route_refuses_a_request_without_a_valid_token(jp_serverapp, http_server_client, jp_base_url,
                                                                   jp_root_dir, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    refused = []
    for method, url in route_methods():
        body = "{}" if method in ("POST", "PUT") else None
        with pytest.raises(HTTPClientError) as answer:
            await http_server_client.fetch(f"{jp_base_url.rstrip('/')}{url}", method=method, body=body,
                                           headers=headers)
        refused.append((method, url, answer.value.code))
        if not url.endswith("/ws"):
            assert list(json.loads(answer.value.response.body)) == ["error"]
    assert {code for *_, code in refused} == {403}, refused
    assert not (jp_root_dir / ".betty").exists()  # nothing of Betty's ran, not even its watcher


@pytest.mark.parametrize("authorization", [None, "token not-the-token"])
async def test_the_chat_socket_refuses_an_anonymous_upgrade(jp_serverapp, http_server_client, jp_http_port, jp_base_url,
                                                            authorization):
    headers = {"Authorization": authorization} if authorization else {}
    url = f"ws://localhost:{jp_http_port}{jp_base_url.rstrip('/')}/betty/api/sessions/s-1/ws"
    with pytest.raises(HTTPClientError) as refused:
        await websocket_connect(HTTPRequest(url, headers=headers))
    assert refused.value.code == 403


async def test_a_valid_token_gets_through(jp_fetch):
    answer = json.loads((await jp_fetch("betty", "api", "clusters")).body)
    assert answer == {"clusters": [{"name": "ood", "transport": "local", "host": "", "default": True}]}


async def test_the_webhook_route_refuses_a_jupyter_token_without_the_secret(jp_fetch, jp_root_dir):
    for headers in ({}, {"X-Betty-Secret": "not-the-secret"}):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("betty", "api", "hooks", "daily-digest", method="POST", body="{}", headers=headers)
        assert refused.value.code == 403
        assert json.loads(refused.value.response.body) == {
            "error": "this webhook needs its automation's secret in the X-Betty-Secret header"}
    assert not (jp_root_dir / ".betty" / "automations").exists()  # no run was recorded


async def test_the_mcp_route_without_the_mcp_package_says_what_to_install(jp_fetch, jp_root_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if betty-jupyter[mcp] were not installed
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "mcp", method="POST", body="{}")
    assert refused.value.code == 501
    assert json.loads(refused.value.response.body) == {"error": (
        "Betty's MCP endpoint needs the MCP package in the Jupyter server's environment: "
        "pip install 'betty-jupyter[mcp]', then restart Jupyter")}
