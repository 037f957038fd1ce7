"""Every answer of Betty's API, errors included, carries a Content-Security-Policy under which nothing runs,
loads, connects or submits, even if a browser were made to show the answer as a page.

Jupyter's own policy (or the one a site sets with ``ServerApp.tornado_settings``' ``headers``) comes first and
Betty's directives follow; browsers enforce the first directive of each name, so the site's choices stand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError, HTTPResponse

from hostile import hostile

from betty_jupyter.server.base import API_CONTENT_SECURITY_POLICY

SITE_POLICY = "frame-ancestors https://hub.example.org; img-src 'self' data:"
BETTY_DIRECTIVES = {"img-src": "'none'", "script-src": "'none'", "style-src": "'none'", "connect-src": "'none'",
                    "base-uri": "'none'", "form-action": "'none'", "sandbox": "", "default-src": "'none'"}
# Path parts: a "/" would make another route, not an id.
HOSTILE_IDS = list(dict.fromkeys(text for text in hostile("html", "job_names") if "/" not in text and "\n" not in text))


def enforced(policy: str) -> dict[str, str]:
    """The directives a browser enforces: the first of each name (it ignores a later one of the same name)."""
    found: dict[str, str] = {}
    for directive in policy.split(";"):
        name, _, value = directive.strip().partition(" ")
        if name:
            found.setdefault(name.lower(), value.strip())
    return found


@pytest.fixture(params=[None, SITE_POLICY], ids=["jupyters-policy", "a-sites-policy"])
def site_policy(request: pytest.FixtureRequest) -> str | None:
    """The Content-Security-Policy the site configures for the whole server, if any."""
    policy: str | None = request.param
    return policy


@pytest.fixture
def jp_server_config(jp_root_dir: Any, site_policy: str | None) -> dict[str, Any]:
    server: dict[str, Any] = {"jpserver_extensions": {"betty_jupyter": True}}
    if site_policy is not None:
        server["tornado_settings"] = {"headers": {"Content-Security-Policy": site_policy}}
    return {"ServerApp": server, "BettyConfig": {"clusters": [{"name": "ood", "transport": "local"}]}}


def check_policy(answer: HTTPResponse, site_policy: str | None) -> None:
    """Betty's directives hold where the site set none of that name; the site's own stand where it did."""
    policy = answer.headers["Content-Security-Policy"]
    directives = enforced(policy)
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Content-Type"].startswith("application/json")
    if site_policy is None:
        assert directives["frame-ancestors"] == "'self'"  # Jupyter's, kept
        assert {name: directives[name] for name in BETTY_DIRECTIVES} == BETTY_DIRECTIVES
    else:
        assert policy.startswith(site_policy)
        assert directives["img-src"] == "'self' data:" and directives["frame-ancestors"] == "https://hub.example.org"
        assert {name: directives[name] for name in BETTY_DIRECTIVES if name != "img-src"} == {
            name: value for name, value in BETTY_DIRECTIVES.items() if name != "img-src"}
    assert all(directive in policy for directive in API_CONTENT_SECURITY_POLICY)


async def test_an_answer_forbids_running_loading_and_submitting(jp_fetch: Any, site_policy: str | None) -> None:
    answer = await jp_fetch("betty", "api", "health")
    assert json.loads(answer.body)["status"] == "ok"
    check_policy(answer, site_policy)


@pytest.mark.parametrize("approval_id", HOSTILE_IDS)
async def test_an_error_echoing_hostile_text_is_json_under_the_same_policy(jp_fetch: Any, site_policy: str | None,
                                                                          approval_id: str) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "api", "approvals", approval_id, method="POST",
                       body=json.dumps({"decision": "approved"}))
    answer = refused.value.response
    assert answer is not None and refused.value.code == 404
    assert json.loads(answer.body)["error"].startswith("no open approval")
    check_policy(answer, site_policy)


async def test_a_refused_request_carries_it_too(http_server_client: Any, jp_base_url: str,
                                                site_policy: str | None) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await http_server_client.fetch(f"{jp_base_url.rstrip('/')}/betty/api/health")
    assert refused.value.code == 403 and refused.value.response is not None
    check_policy(refused.value.response, site_policy)


async def test_a_bad_body_is_refused_under_it(jp_fetch: Any, site_policy: str | None) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("betty", "api", "approvals", "a1", method="POST", body="<script>window.__pwned=1</script>")
    assert refused.value.code == 400 and refused.value.response is not None
    check_policy(refused.value.response, site_policy)
