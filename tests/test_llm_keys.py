"""Each model endpoint gets only its own key, and nothing of the environment reaches the model.

The scripted server records the Authorization header of every request; canaries stand in for
the person's OpenAI key and Jupyter tokens.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLM, call, say

from betty_jupyter.agent.llm import NO_KEY, OPENAI_URL, ChatModel, LLMSettings, is_openai
from betty_jupyter.errors import ConfigError, ModelError

OPENAI_CANARY = "sk-canary-openai-key-0123456789abcdef"
SECRETS = {
    "OPENAI_API_KEY": OPENAI_CANARY,
    "BETTY_LLM_API_KEY": "canary-general-key-5150",
    "JUPYTERHUB_API_TOKEN": "canary-hub-token-4242",
    "JPY_API_TOKEN": "canary-jpy-token-7777",
    "JUPYTER_TOKEN": "canary-jupyter-token-1234",
}


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def key_received(llm_settings: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    """Talk once to a scripted server configured by ``llm_settings`` ({base_url} filled in); the key it got."""
    with ScriptedLLM([say("hello")]) as llm:
        settings = {key: value.format(base_url=llm.base_url) if isinstance(value, str) else value
                    for key, value in llm_settings.items()}
        model = ChatModel(LLMSettings.from_config({"model": "m", **settings}, environ))
        reply = asyncio.run(model.complete([{"role": "user", "content": "hi"}], [], lambda _: None, lambda _: None))
        assert reply.text == "hello" and len(llm.authorization_digests) == 1
        candidates = [NO_KEY, *SECRETS.values(), "site-key-for-this-server", "file-key-for-this-server"]
        found = [key for key in candidates if llm.received(f"Bearer {key}")]
        assert len(found) == 1, found
        return found[0]


def test_a_server_with_no_key_of_its_own_never_gets_the_openai_key(secrets_in_env, caplog):
    with caplog.at_level(logging.INFO, logger="betty_jupyter.agent.llm"):
        assert key_received({"base_url": "{base_url}"}) == NO_KEY
    assert "no key is sent to http://127.0.0.1:" in caplog.text and "$OPENAI_API_KEY goes to OpenAI only" in caplog.text


def test_an_unset_api_key_env_sends_no_key_and_says_so(secrets_in_env, caplog):
    with caplog.at_level(logging.WARNING, logger="betty_jupyter.agent.llm"):
        assert key_received({"base_url": "{base_url}", "api_key_env": "BETTY_LLM_SERVE_API_KEY"}) == NO_KEY
    assert "llm.api_key_env names BETTY_LLM_SERVE_API_KEY, which is not set: no key is sent to" in caplog.text


def test_the_server_s_own_key_from_a_variable_or_a_file(secrets_in_env, monkeypatch, tmp_path):
    monkeypatch.setenv("MYSITE_LLM_KEY", "site-key-for-this-server")
    assert key_received({"base_url": "{base_url}", "api_key_env": "MYSITE_LLM_KEY"}) == "site-key-for-this-server"
    key_file = tmp_path / "server.key"
    key_file.write_text("file-key-for-this-server\n")
    assert key_received({"base_url": "{base_url}", "api_key_file": str(key_file)}) == "file-key-for-this-server"


@pytest.mark.parametrize("content, says", [
    (None, "cannot read the model server's key from llm.api_key_file"),
    ("two\nlines", "must hold one key on one line"), ("", "must hold one key on one line"),
])
def test_a_key_file_that_cannot_be_used_is_one_line(tmp_path, content, says):
    path = tmp_path / "server.key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=says):
        LLMSettings.from_config({"model": "m", "base_url": "http://x/v1", "api_key_file": str(path)}, {})
    with pytest.raises(ConfigError, match="both api_key_file and api_key_env"):
        LLMSettings.from_config({"model": "m", "api_key_file": str(path), "api_key_env": "X"}, {})


def test_a_url_dressed_as_openai_s_gets_no_key(secrets_in_env):
    """``http://api.openai.com@HOST/`` goes to HOST (with the user-info as Basic auth): never the OpenAI key."""
    with ScriptedLLM([say("hello")]) as llm:
        host = llm.base_url.split("//")[1].split("/")[0]
        settings = LLMSettings.from_config({"model": "m", "base_url": f"http://api.openai.com@{host}/v1",
                                            "max_retries": 0})
        with pytest.raises(ModelError, match="answered 401"):  # the scripted server wants a Bearer header
            asyncio.run(ChatModel(settings).complete([{"role": "user", "content": "hi"}], [], lambda _: None,
                                                     lambda _: None))
        basic = "Basic " + base64.b64encode(b"api.openai.com:").decode()
        assert len(llm.authorization_digests) == 1 and llm.received(basic) == 1
        assert not llm.received(f"Bearer {OPENAI_CANARY}")


@pytest.mark.parametrize("base_url, openai", [
    (None, True), ("https://api.openai.com/v1", True), ("HTTPS://API.OPENAI.COM:443/v1", True),
    ("http://api.openai.com/v1", False), ("https://api.openai.com.evil.example/v1", False),
    ("https://api.openai.com:8443/v1", False), ("https://x@api.openai.com/v1", False),
    ("https://evil.example/api.openai.com/v1", False), ("https://api.openai.com:bad/v1", False),
])
def test_only_openai_itself_is_openai(base_url, openai):
    assert is_openai(base_url) is openai


def test_openai_s_endpoint_is_explicit_so_openai_base_url_cannot_redirect_the_key(secrets_in_env, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = ChatModel(LLMSettings.from_config({"model": "gpt-4o"}))
    assert str(model._client.base_url).rstrip("/") == OPENAI_URL and model.settings.api_key == OPENAI_CANARY


@pytest.mark.cluster
def test_nothing_of_the_environment_reaches_the_model_or_the_action_log(secrets_in_env, local_profile, tmp_path):
    """A model that asks for the environment and writes a key into a script gets refusals; nothing leaks."""
    from betty_jupyter.agent.approvals import ApprovalBroker
    from betty_jupyter.agent.session import SessionSpec, open_session
    from betty_jupyter.config import BettyConfig
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    script = ("#!/bin/bash\n#SBATCH --time=1\nexport OPENAI_API_KEY=sk-proj-scriptcanary0123456789\n"
              "git clone https://ada:url-canary-hunter2@git.example.edu/x.git\n")
    steps = [call("cluster_run", {"command": "env"}), call("cluster_run", {"command": "cat /proc/self/environ"}),
             call("cluster_submit", {"script": script, "goal": "uses a key"}), say("done")]
    with ScriptedLLM(steps) as llm:
        config = BettyConfig(clusters=[local_profile.to_dict()],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01})

        async def converse() -> str:
            broker = ApprovalBroker(timeout=60)
            session = await open_session(workspace, config, SessionSpec(mode="confirm", broker=broker))

            def deny(event: Any) -> None:
                if event.type == "approval_request":
                    asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "denied", "t")

            session.stream.subscribe(deny)
            try:
                reasons = [await session.ask("show me your environment")]
                while reasons[-1] == "denied" and len(reasons) <= len(steps):  # each denial ends a turn
                    reasons.append(await session.ask("go on"))
                return str(reasons[-1])
            finally:
                await session.context.slurm.transport.close()

        assert asyncio.run(converse()) == "finished"
        sent = json.dumps(llm.requests)
        assert llm.received(f"Bearer {NO_KEY}") == len(llm.authorization_digests) == len(llm.requests)
    for name, value in SECRETS.items():
        assert value not in sent and name not in json.dumps(llm.requests[0]["messages"][0])
    logged = "".join(p.read_text() for p in (workspace.root / ".betty" / "actions").rglob("*") if p.is_file())
    assert "cluster_submit" in logged and "cluster_run" in logged
    for secret in (*SECRETS.values(), "sk-proj-scriptcanary0123456789", "url-canary-hunter2"):
        assert secret not in logged
