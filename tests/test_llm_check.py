"""`betty llm check` against the scripted model server: each probe's finding, and hostile answers as one line."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, error_body, fail, say, stall

from betty_jupyter.agent.llm import LLMSettings
from betty_jupyter.llm_check import (FAIL, OK, READ_LIMIT, WARN, Finding, check_endpoint, first_request, key_source,
                                      summary)

LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 16384},
               "chat_template": "{% if tools %}{{ tools | tojson }}{% endif %}"}
PARTITIONS = call("cluster_partitions", {})
HELLO = say("Hello there, nice to meet you")


def check(llm: ScriptedLLM, **config: Any) -> list[Finding]:
    """Run the check against ``llm`` as Betty's ``llm`` setting ``config`` would."""
    setting = {"base_url": llm.base_url, "model": llm.model, **config}
    settings = LLMSettings.from_config(setting, {})
    return asyncio.run(check_endpoint(settings, key_from=key_source(setting, {}), timeout=30))


def about(findings: list[Finding]) -> dict[str, Finding]:
    return {finding.about: finding for finding in findings}


def test_a_llama_cpp_server_with_native_tool_calls_is_all_ok():
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /props": LLAMA_PROPS}) as llm:
        findings = check(llm)
        first = llm.requests[0]
    assert [f.status for f in findings] == [OK] * 5, findings
    found = about(findings)
    assert "context 16384 tokens (n_ctx)" in found["serving stack"].line
    assert found["tool calls"].line == "native tool calls"
    assert found["streaming"].line.startswith("replies stream (")
    prompt_tokens = len(json.dumps(first["messages"], sort_keys=True)) // 4  # as the scripted server counts them
    assert found["first request"].line.startswith(f"{prompt_tokens} tokens (system prompt and 8 tools)")
    # The real first request: Betty's system prompt and the offered core tools, with a reply of one token.
    assert first["max_tokens"] == 1 and first["tool_choice"] == "auto" and not first.get("stream")
    assert first["messages"][0]["content"].startswith("You are Betty")
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"cluster_queue", "more_tools"}
    assert summary(findings) == "Betty can use this server"


@pytest.mark.parametrize("form, says", [
    ("tool_call", "<tool_call> tags"), ("python_tag", "Llama's <|python_tag|>"), ("fenced", "a fenced JSON block"),
    ("bare", "a bare JSON object"),
])
def test_calls_written_as_text_are_a_warning_that_betty_reads_them(form, says):
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], calls_as=form, routes={"GET /props": LLAMA_PROPS}) as llm:
        found = about(check(llm))
    assert found["tool calls"] == Finding(WARN, "tool calls", f"tool calls come as text ({says}); Betty reads them "
                                          "(llama-server makes them native with --jinja and a chat template in the "
                                          "model's own call format)")


def test_an_answer_without_the_call_fails():
    with ScriptedLLM([say("x"), say("The cluster has partitions."), HELLO]) as llm:
        found = about(check(llm))
    assert found["tool calls"].status == FAIL
    assert "answered without calling the tool: 'The cluster has partitions.'" in found["tool calls"].line


def test_a_server_that_refuses_tool_choice_says_how_to_start_vllm():
    refusal = error_body(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    models = {"object": "list", "data": [{"id": "scripted-model", "object": "model", "max_model_len": 32768}]}
    with ScriptedLLM([fail(400, times=2, body=refusal), HELLO], routes={"GET /v1/models": models}) as llm:
        findings = check(llm)
    found = about(findings)
    assert found["serving stack"].line == "vLLM, context 32768 tokens (max_model_len)"
    assert found["first request"].status == FAIL
    assert found["first request"].line.startswith("the server refused Betty's first request: it answered 400: "
                                                  "\"auto\" tool choice requires --enable-auto-tool-choice")
    assert found["first request"].line.endswith("start vLLM with --enable-auto-tool-choice --tool-call-parser "
                                                "hermes|llama3_json|mistral, or set llm.tool_choice false")
    assert found["tool calls"].status == FAIL
    assert "the server refused a request with tools: it answered 400: \"auto\" tool choice" in found["tool calls"].line
    assert "start vLLM with --enable-auto-tool-choice --tool-call-parser hermes|llama3_json|mistral, " \
           "or set llm.tool_choice false" in found["tool calls"].line
    assert summary(findings) == "Betty cannot use this server as it is: 2 failures, 0 warnings"


def test_a_refused_key_is_one_line_naming_the_setting_never_the_key(monkeypatch):
    monkeypatch.setenv("SITE_LLM_KEY", "wrong-key-0123456789")
    with ScriptedLLM([], key="the-right-key") as llm:
        setting = {"base_url": llm.base_url, "model": llm.model, "api_key_env": "SITE_LLM_KEY"}
        settings = LLMSettings.from_config(setting)
        findings = asyncio.run(check_endpoint(settings, key_from=key_source(setting, {"SITE_LLM_KEY": "x"})))
    assert [(f.status, f.about) for f in findings] == [(FAIL, "server")]
    assert findings[0].line == (f"{llm.base_url} refused the key (401): "
                                "Betty sent the key in $SITE_LLM_KEY (llm.api_key_env)")
    assert "wrong-key" not in repr(findings) and not llm.requests


def test_no_key_at_all_says_which_setting_names_one():
    assert key_source({"base_url": "http://x/v1"}, {}).startswith("no key: name the server's key with llm.api_key_env")
    unset = key_source({"base_url": "http://x/v1", "api_key_env": "K"}, {})
    assert unset == "no key: llm.api_key_env names $K, which is not set"


def test_an_unreachable_server_is_one_line():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    settings = LLMSettings(model="m", base_url=f"http://127.0.0.1:{port}/v1")
    findings = asyncio.run(check_endpoint(settings, timeout=30))
    assert len(findings) == 1 and findings[0].status == FAIL
    assert findings[0].line == (f"cannot reach http://127.0.0.1:{port}/v1/models: Connection refused: "
                                "is the server running, and is llm.base_url right?")


def test_a_context_smaller_than_the_first_request_fails():
    props = {"default_generation_settings": {"n_ctx": 512}, "chat_template": "tools"}
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /props": props}) as llm:
        found = about(check(llm))
    assert found["first request"].status == FAIL
    assert "+ a reply of 1024 do not fit in the context of 512: start the server with a context of 8192" \
        in found["first request"].line


def test_a_context_under_8192_that_holds_the_first_request_is_a_warning():
    props = {"default_generation_settings": {"n_ctx": 4096}, "chat_template": "tools"}
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /props": props}) as llm:
        found = about(check(llm))
    assert found["first request"].status == WARN and "Betty needs 8192" in found["first request"].line


def test_an_unlisted_model_is_a_warning_and_the_check_goes_on():
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], model="served-model") as llm:
        found = about(check(llm, model="other-model"))
    assert found["server"].status == WARN
    assert found["server"].line.endswith("lists served-model, not other-model: set llm.model to one of them "
                                         "(or try it with `--model`)")
    assert found["tool calls"].status == OK


def test_ollama_without_num_ctx_is_told_how_to_raise_its_context():
    show = {"model_info": {"qwen2.context_length": 32768}, "parameters": "stop \"<|im_end|>\""}
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"POST /api/show": show}) as llm:
        found = about(check(llm))
        assert "GET /props" in llm.paths and "POST /api/show" in llm.paths
    assert found["serving stack"].status == WARN
    assert "Ollama: its OpenAI endpoint uses Ollama's default context (the model holds 32768) and silently cuts" \
        in found["serving stack"].line and "OLLAMA_CONTEXT_LENGTH=8192" in found["serving stack"].line
    with ScriptedLLM([say("x"), PARTITIONS, HELLO],
                     routes={"POST /api/show": {**show, "parameters": "num_ctx 16384\nstop x"}}) as llm:
        found = about(check(llm))
    assert found["serving stack"] == Finding(OK, "serving stack",
                                             "Ollama, context 16384 tokens (num_ctx in its Modelfile)")


@pytest.mark.parametrize("props, says", [
    (b"<html>not json</html>", "/props answered, but its answer is not JSON: the context is unknown"),
    (b"x" * (10 * READ_LIMIT), "/props answered, but its answer is larger than 1 MiB: the context is unknown"),
    ({"default_generation_settings": {"n_ctx": -5}},
     "llama.cpp (llama-server), but its n_ctx is not a context size (-5): the context is unknown"),
    ({"default_generation_settings": {"n_ctx": "\x1b[31m8192"}}, "its n_ctx is not a context size (\\x1b[31m8192)"),
    ("[" * 200 + "]" * 200, "its answer is not what the server's API gives"),
])
def test_hostile_props_are_one_warning_and_the_check_goes_on(props, says):
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /props": props}) as llm:
        findings = check(llm)
    found = about(findings)
    assert found["serving stack"].status == WARN and says in found["serving stack"].line
    assert "\n" not in found["serving stack"].line and len(found["serving stack"].line) < 300
    assert found["tool calls"].status == OK and len(findings) == 5


def test_a_huge_or_broken_model_list_is_one_line():
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /v1/models": {"error": "x" * 5000}}) as llm:
        found = about(check(llm))
    assert found["server"].status == WARN and "answered, but not with a model list" in found["server"].line


def test_betty_llm_check_exit_codes(tmp_path, monkeypatch):
    config = tmp_path / "betty.json"
    monkeypatch.setenv("BETTY_CONFIG", str(config))
    config.write_text(json.dumps({"BettyConfig": {"llm": {}}}))
    usage = run_betty("llm", "check")
    assert usage.returncode == 2, usage.stderr
    assert usage.stderr.strip() == ("betty llm check: error: no model to check: set llm.model in Betty's "
                                    "configuration, or give --model (see `betty llm check --help`)")
    with ScriptedLLM([say("x"), PARTITIONS, HELLO], routes={"GET /props": LLAMA_PROPS}) as llm:
        config.write_text(json.dumps({"BettyConfig": {"llm": {"base_url": llm.base_url, "model": llm.model}}}))
        good = run_betty("llm", "check")
    assert good.returncode == 0, good.stdout + good.stderr
    lines = good.stdout.splitlines()
    assert lines[0] == f"✓ server: {llm.base_url} answers and lists scripted-model"
    assert lines[-2] == "✓ streaming: replies stream (6 pieces)" and lines[-1] == "Betty can use this server"
    assert "betty: sending Betty's first request" in good.stderr
    with ScriptedLLM([say("x"), say("No tool for me."), HELLO]) as llm:
        env = {**os.environ, "PYTHONIOENCODING": "ascii"}
        bad = run_betty("llm", "check", "--base-url", llm.base_url, "--model", llm.model, env=env)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "x tool calls: the model answered without calling the tool" in bad.stdout
    assert "! serving stack: unknown" in bad.stdout and "Traceback" not in bad.stderr


def test_a_probe_that_gets_no_answer_fails_within_its_time_and_the_check_goes_on():
    first_request(False, "cluster")  # the tools are imported before the clock runs
    with ScriptedLLM([stall(60), PARTITIONS, HELLO]) as llm:
        settings = LLMSettings(model=llm.model, base_url=llm.base_url)
        found = about(asyncio.run(check_endpoint(settings, timeout=5)))
    assert found["first request"] == Finding(FAIL, "first request", "no answer within 5 s (a slow server: "
                                             "`--timeout` gives it longer)")
    assert found["tool calls"].status == OK and found["streaming"].status == OK


def test_a_key_the_server_echoes_is_never_in_a_line(monkeypatch):
    key = "sk-site-key-0123456789abcdef"
    monkeypatch.setenv("SITE_LLM_KEY", key)
    echo = error_body(400, f"tools are not allowed for key {key}")
    with ScriptedLLM([fail(400, times=2, body=echo), HELLO]) as llm:
        setting = {"base_url": llm.base_url, "model": llm.model, "api_key_env": "SITE_LLM_KEY"}
        findings = asyncio.run(check_endpoint(LLMSettings.from_config(setting), timeout=30))
        assert llm.received(f"Bearer {key}") >= 3
    assert "tools are not allowed for key [key]" in about(findings)["tool calls"].line
    assert key not in repr(findings)
