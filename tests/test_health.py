"""The server extension's health endpoint: answers with a token, refuses without."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from betty_jupyter import __version__


@pytest.fixture
def jp_server_config():
    return {
        "ServerApp": {"jpserver_extensions": {"betty_jupyter": True}},
        "BettyConfig": {
            "clusters": [
                {"name": "betty-dev", "transport": "ssh", "host": "betty-dev"},
                {"name": "ood", "transport": "local"},
            ],
            "default_cluster": "ood",
        },
    }


async def test_health_answers_with_a_token(jp_fetch, jp_root_dir):
    response = await jp_fetch("betty", "api", "health")
    assert response.code == 200
    body = json.loads(response.body)
    assert body == {
        "status": "ok",
        "version": __version__,
        "clusters": ["betty-dev", "ood"],
        "default_cluster": "ood",
        "project": str(jp_root_dir),  # where a notebook's %%betty run stages its cell, wherever the notebook is
    }


@pytest.mark.parametrize("authorization", [None, "token not-the-token"])
async def test_health_refuses_without_a_valid_token(jp_serverapp, http_server_client, jp_base_url, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    url = f"{jp_base_url.rstrip('/')}/betty/api/health"
    with pytest.raises(HTTPClientError) as refused:
        await http_server_client.fetch(url, headers=headers)
    assert refused.value.code == 403


async def test_health_with_no_cluster_configured(jp_serverapp, jp_fetch):
    jp_serverapp.web_app.settings["betty_config"].clusters = []
    jp_serverapp.web_app.settings["betty_config"].default_cluster = None
    body = json.loads((await jp_fetch("betty", "api", "health")).body)
    assert body["clusters"] == [] and body["default_cluster"] is None
