"""Every route of Betty's API that takes a body answers deeply nested JSON with a one-line 4xx, never a 500.

The routes are read from the server's own route table, so a route added later is attacked too.
Path parameters are filled with a real session's id where a route names one, so the body is
read by the handler itself rather than refused for an unknown session.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from betty_jupyter.json_text import MAX_NESTING
from betty_jupyter.server.handlers import handlers

BODY_METHODS = ("post", "put")
DEEP = {
    "lists": "[" * 100_000 + "]" * 100_000,
    "objects": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "unclosed": "[" * 100_000,
    "just_past_the_bound": '{"args": ' + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "}",
    "inside_an_object": '{"prompt": "hi", "args": {"x": ' + "[" * 5000 + "]" * 5000 + "}}",
}


def routes() -> list[tuple[str, str]]:
    """(path pattern, method) for every route whose handler answers a method that takes a body."""
    found = []
    for pattern, handler in handlers:
        for method in BODY_METHODS:
            if getattr(handler, method).__qualname__.split(".")[0] != "RequestHandler":
                found.append((pattern, method.upper()))
    return found


ROUTES = routes()
VALUES = {"session_id": "", "tool": "cluster_queue", "approval_id": "a-missing", "name": "ood", "job": "123",
          "automation_id": "auto-missing", "ident": "q-missing", "change_id": "c-missing", "token": "0" * 32}


@pytest.fixture
def jp_server_config(jp_root_dir: Any) -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
            "BettyConfig": {"clusters": [{"name": "ood", "transport": "local", "readable_roots": [str(jp_root_dir)]}]}}


def test_the_route_table_has_bodies_to_attack() -> None:
    paths = {pattern for pattern, _ in ROUTES}
    assert len(ROUTES) >= 25 and r"/betty/api/sessions" in paths and r"/betty/api/hooks/(?P<automation_id>[^/]+)" in paths


@pytest.mark.parametrize("shape", sorted(DEEP))
async def test_deeply_nested_json_is_a_one_line_4xx_on_every_route(jp_fetch: Any, shape: str) -> None:
    opened = await jp_fetch("betty", "api", "sessions", method="POST", body="{}")
    values = {**VALUES, "session_id": json.loads(opened.body)["session_id"]}
    answers: dict[str, int] = {}
    for pattern, method in ROUTES:
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m[1]], pattern).strip("/")
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch(*path.split("/"), method=method, body=DEEP[shape],
                           headers={"Content-Type": "application/json"})
        code, response = refused.value.code, refused.value.response
        answers[f"{method} {path}"] = code
        assert 400 <= code < 500, (method, path, code, response and response.body[:300])
        if response is not None and response.body and not path.startswith("betty/mcp"):
            error = json.loads(response.body)["error"]
            assert error and "\n" not in error and "Traceback" not in error, (path, error)
    read_the_body = [route for route, code in answers.items() if code == 400]
    assert len(read_the_body) >= len(ROUTES) // 2, answers  # most routes read the body and refuse it


async def test_a_deeply_nested_socket_message_is_an_error_frame_and_the_socket_stays(jp_fetch: Any,
                                                                                      jp_ws_fetch: Any) -> None:
    opened = await jp_fetch("betty", "api", "sessions", method="POST", body="{}")
    session_id = json.loads(opened.body)["session_id"]
    socket = await jp_ws_fetch("betty", "api", "sessions", session_id, "ws")
    for shape in sorted(DEEP):
        socket.write_message(DEEP[shape])
        frame = json.loads(await asyncio.wait_for(socket.read_message(), 60))
        assert frame["type"] == "server_error" and "\n" not in frame["message"], (shape, frame)
        assert "nests more than" in frame["message"] or "a message is" in frame["message"], frame
    socket.write_message('{"type": "dance"}')  # the socket still answers
    frame = json.loads(await asyncio.wait_for(socket.read_message(), 60))
    assert frame["type"] == "server_error" and "a message is" in frame["message"]
    socket.close()
