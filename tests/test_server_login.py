"""A second factor answered in the side panel's routes while the server logs in to a cluster.

The cluster is a real login node that asks for a TOTP code (:mod:`second_factor`); the
question waits in the server until a person answers it over ``/betty/api/login-questions``.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from second_factor import ALIAS, control_dir, login_node, totp  # noqa: F401 (fixtures)
from test_server_support import call, llm, refusal, server_config, until  # noqa: F401 (llm is a fixture)


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir, login_node, control_dir):  # noqa: F811
    """Betty's server with two more clusters behind the login node: one per SSH transport.

    openssh's master lives in this test's own ``control_dir``: every test logs in afresh.
    """
    config = server_config(llm, ssh_profile, jp_root_dir)
    ssh_config = str(login_node.ssh_config(control_path=f"{control_dir}/%C"))
    config["BettyConfig"]["clusters"] += [
        {"name": "mfa-openssh", "transport": "openssh", "host": ALIAS, "ssh_config": ssh_config},
        {"name": "mfa-paramiko", "transport": "ssh", "host": ALIAS, "ssh_config": ssh_config},
    ]
    return config


async def _waiting_question(jp_fetch) -> dict:
    questions = await until("a login question", lambda: _questions(jp_fetch))
    assert len(questions) == 1, questions
    return questions[0]


async def _questions(jp_fetch) -> list[dict]:
    return (await call(jp_fetch, "GET", "login-questions"))["questions"]


@pytest.mark.parametrize("cluster", ["mfa-openssh", "mfa-paramiko"])
async def test_the_panel_answers_the_clusters_question_and_the_login_goes_on(jp_fetch, cluster, caplog):
    caplog.set_level(logging.DEBUG)
    checking = asyncio.ensure_future(call(jp_fetch, "POST", "clusters", cluster, "test"))
    question = await _waiting_question(jp_fetch)
    assert "Verification code" in question["prompt"] and question["cluster"] == ALIAS
    assert question["echo"] is False and question["id"].startswith("login_")
    code = totp()
    assert await call(jp_fetch, "POST", "login-questions", question["id"], body={"answer": code}) == {"answered": True}
    checked = await asyncio.wait_for(checking, 120)
    assert checked["ok"], checked
    assert await _questions(jp_fetch) == []
    # Answered once: a second answer finds nothing waiting, and the code went nowhere else.
    status, error = await refusal(jp_fetch, "POST", "login-questions", question["id"], body={"answer": code})
    assert status == 404 and "no login is waiting" in error
    assert code not in caplog.text


async def test_cancelling_the_question_fails_the_login_with_one_line(jp_fetch):
    checking = asyncio.ensure_future(call(jp_fetch, "POST", "clusters", "mfa-openssh", "test"))
    question = await _waiting_question(jp_fetch)
    assert await call(jp_fetch, "DELETE", "login-questions", question["id"]) == {"cancelled": True}
    checked = await asyncio.wait_for(checking, 120)
    assert not checked["ok"] and "cancelled in Betty's panel" in checked["message"], checked
    assert "Verification code" in checked["message"]


async def test_an_answer_must_be_a_string_of_bounded_length(jp_fetch):
    status, error = await refusal(jp_fetch, "POST", "login-questions", "login_unknown", body={"answer": 123456})
    assert status == 400, error
    status, _ = await refusal(jp_fetch, "POST", "login-questions", "login_unknown", body={"answer": "x" * 5000})
    assert status == 400
    status, error = await refusal(jp_fetch, "POST", "login-questions", "login_unknown", body={"answer": "123456"})
    assert status == 404
