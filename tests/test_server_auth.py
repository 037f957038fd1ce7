"""Every route of the server extension refuses a request without a valid token, and the route table is the contract's.

The webhook route (``POST hooks/{id}``) is the one route Jupyter does not authenticate: it takes
its automation's secret instead, and refuses a request without it (403) — a Jupyter token too.
``/betty/mcp`` takes only a credential Betty issued to an MCP client, which every other route
(Betty's and Jupyter's own) refuses; the Jupyter token is refused there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from betty_jupyter.mcp_credentials import McpCredentials
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
    assert len(served) == 73


def test_only_the_webhook_and_mcp_routes_skip_jupyters_authentication():
    skipping = [(method.upper(), concrete(pattern)) for pattern, handler in handlers for method in METHODS
                if method in vars(handler) and getattr(getattr(handler, method), "__allow_unauthenticated", False)]
    assert sorted(skipping) == [("DELETE", "/betty/mcp"), ("GET", "/betty/mcp"), ("POST", "/betty/api/hooks/x1"),
                                ("POST", "/betty/mcp")]


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


@pytest.mark.parametrize("authorization", [None, "token not-the-token", "an MCP credential"])
async def test_the_chat_socket_refuses_an_anonymous_upgrade(jp_serverapp, http_server_client, jp_http_port, jp_base_url,
                                                            authorization):
    if authorization == "an MCP credential":
        authorization = f"Bearer {McpCredentials().add('claude-code', 'http://127.0.0.1:8888/')[1]}"
    headers = {"Authorization": authorization} if authorization else {}
    url = f"ws://localhost:{jp_http_port}{jp_base_url.rstrip('/')}/betty/api/sessions/s-1/ws"
    with pytest.raises(HTTPClientError) as refused:
        await websocket_connect(HTTPRequest(url, headers=headers))
    assert refused.value.code == 403


async def test_a_valid_token_gets_through(jp_fetch):
    answer = json.loads((await jp_fetch("betty", "api", "clusters")).body)
    assert answer == {"clusters": [{"name": "ood", "transport": "local", "host": "", "default": True, "environments": []}]}


async def test_the_webhook_route_refuses_a_jupyter_token_without_the_secret(jp_fetch, jp_root_dir):
    for headers in ({}, {"X-Betty-Secret": "not-the-secret"}):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("betty", "api", "hooks", "daily-digest", method="POST", body="{}", headers=headers)
        assert refused.value.code == 403
        assert json.loads(refused.value.response.body) == {
            "error": "this webhook needs its automation's secret in the X-Betty-Secret header"}
    assert not (jp_root_dir / ".betty" / "automations").exists()  # no run was recorded


async def test_the_mcp_route_without_the_mcp_package_says_what_to_install(jp_fetch, jp_root_dir, monkeypatch):
    _, token = McpCredentials().add("editor", "http://127.0.0.1:8888/")
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if betty-jupyter[mcp] were not installed
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "mcp", method="POST", body="{}", headers={"Authorization": f"Bearer {token}"})
    assert refused.value.code == 501
    assert json.loads(refused.value.response.body) == {"error": (
        "Betty's MCP endpoint needs the MCP package: pip install 'betty-jupyter[mcp]' in the Jupyter server's "
        "environment, then restart Jupyter")}


JUPYTERS_OWN = [("GET", "/api/kernels"), ("POST", "/api/kernels"), ("GET", "/api/terminals"), ("POST", "/api/terminals"),
                ("GET", "/api/contents"), ("PUT", "/api/contents/planted.py"), ("GET", "/api/sessions"),
                ("POST", "/api/sessions"), ("GET", "/api/kernelspecs"), ("GET", "/api/me"), ("GET", "/api/status")]
"""Jupyter's own routes an agent would reach for to skip Betty: kernels, terminals, files, sessions."""


@pytest.mark.parametrize("send", ["Bearer", "token", "query"])
async def test_an_mcp_credential_opens_no_route_but_the_mcp_endpoint(jp_serverapp, http_server_client, jp_base_url,
                                                                     jp_root_dir, send):
    _, token = McpCredentials().add("claude-code", "http://127.0.0.1:8888/")
    headers = {} if send == "query" else {"Authorization": f"{send} {token}"}
    answered = {}
    for method, url in [*route_methods(), *JUPYTERS_OWN]:
        body = "{}" if method in ("POST", "PUT") else None
        target = f"{jp_base_url.rstrip('/')}{url}" + (f"?token={token}" if send == "query" else "")
        answer = await http_server_client.fetch(target, method=method, body=body, headers=headers, raise_error=False)
        answered[(method, url)] = answer.code
    mcp = {key: code for key, code in answered.items() if key[1] == "/betty/mcp"}
    refused = {key: code for key, code in answered.items() if key[1] != "/betty/mcp"}
    assert set(refused.values()) == {403}, {key: code for key, code in refused.items() if code != 403}
    assert len(refused) == len(route_methods()) - 3 + len(JUPYTERS_OWN)
    if send == "query":  # the credential is taken from the header alone
        assert set(mcp.values()) == {403}
    else:
        assert 403 not in mcp.values(), mcp
    assert not (jp_root_dir / "planted.py").exists()


async def test_the_jupyter_token_is_refused_on_the_mcp_endpoint_in_one_line(jp_fetch):
    for method in ("POST", "GET", "DELETE"):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("betty", "mcp", method=method, body="{}" if method == "POST" else None,
                           allow_nonstandard_methods=True)
        assert refused.value.code == 403
        assert json.loads(refused.value.response.body) == {"error": (
            "Betty's MCP endpoint takes only a credential Betty issued for an MCP client, never the Jupyter "
            "server's token: run `betty mcp token add NAME` and give the client what it prints")}


async def test_a_revoked_credential_stops_at_its_next_request(jp_fetch):
    credentials = McpCredentials()
    _, token = credentials.add("ide", "http://127.0.0.1:8888/")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    before = await jp_fetch("betty", "mcp", method="POST", body=body, headers=headers, raise_error=False)
    assert before.code != 403
    credentials.revoke("ide")
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "mcp", method="POST", body=body, headers=headers)
    assert refused.value.code == 403


async def test_a_credentials_file_others_could_touch_opens_nothing_and_names_no_path(jp_fetch):
    credentials = McpCredentials()
    _, token = credentials.add("ide", "http://127.0.0.1:8888/")
    credentials.path.chmod(0o664)  # a group member could have planted a hash of their own
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "mcp", method="POST", body="{}", headers={"Authorization": f"Bearer {token}"})
    assert refused.value.code == 403
    said = json.loads(refused.value.response.body)["error"]
    assert said.startswith("Betty's MCP endpoint takes only a credential") and str(credentials.path) not in said
