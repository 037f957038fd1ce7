"""The scripted chat server, checked with the real ``openai`` client (sync and async) over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import openai
import pytest

from llm_server import (
    ScriptedLLM, Say, call, calls, chunks_of, fail, malformed_args, respond, say, stall,
)

KEY = "sk-test-not-a-secret"
USER: list[Any] = [{"role": "user", "content": "hello"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "queue", "description": "jobs in the queue",
                                            "parameters": {"type": "object", "properties": {"user": {"type": "string"}}}}}]


def client(llm: ScriptedLLM, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.base_url, api_key=KEY, **{"max_retries": 0, **options})


def ask(llm: ScriptedLLM, **options: Any) -> Any:
    with client(llm, **options) as chat:
        return chat.chat.completions.create(model="m", messages=USER, tools=TOOLS)


def stream(llm: ScriptedLLM, include_usage: bool = False) -> list[Any]:
    with client(llm) as chat:
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if include_usage else {}
        return list(chat.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                                 stream=True, **extra))


def reassemble(chunks: list[Any]) -> dict[int, dict[str, str]]:
    """Tool calls rebuilt from their pieces, the way a client must."""
    built: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                entry = built.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += piece.id or ""
                if piece.function:
                    entry["name"] += piece.function.name or ""
                    entry["arguments"] += piece.function.arguments or ""
    return built


def test_plain_text() -> None:
    with ScriptedLLM([say("Hello, Ada.")]) as llm:
        answer = ask(llm)
    assert answer.choices[0].message.content == "Hello, Ada."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "m"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == len(json.dumps(USER, sort_keys=True)) // 4
    assert answer.usage.completion_tokens == len("Hello, Ada.") // 4


def test_streamed_text_arrives_in_pieces_and_ends_with_stop() -> None:
    text = "The queue holds three jobs of yours."
    with ScriptedLLM([say(text), say(text)]) as llm:
        chunks = stream(llm)
        with_usage = stream(llm, include_usage=True)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == list(chunks_of(text)) and len(pieces) > 3
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)
    assert with_usage[-1].choices == []
    assert with_usage[-1].usage.completion_tokens == len(text) // 4
    assert with_usage[-2].choices[0].finish_reason == "stop"


def test_a_streamed_tool_call_reassembles_from_several_chunks() -> None:
    args = {"user": "ada", "states": ["PENDING", "RUNNING"], "note": "a'; echo x\n0"}
    with ScriptedLLM([call("queue", args, call_id="call_abc")]) as llm:
        chunks = stream(llm)
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(pieces) > 3
    first = pieces[0].choices[0].delta.tool_calls[0]
    assert (first.id, first.function.name, first.function.arguments) == ("call_abc", "queue", "")
    assert all(p.choices[0].delta.tool_calls[0].id is None for p in pieces[1:])
    assert reassemble(chunks) == {0: {"id": "call_abc", "name": "queue", "arguments": json.dumps(args)}}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_parallel_tool_calls_streamed_and_whole() -> None:
    step = calls([call("queue", {"user": "ada"}), ("history", {"days": 2})], text="Checking both.")
    with ScriptedLLM([step, step]) as llm:
        chunks = stream(llm)
        whole = ask(llm)
    built = reassemble(chunks)
    assert [built[i]["name"] for i in (0, 1)] == ["queue", "history"]
    assert json.loads(built[1]["arguments"]) == {"days": 2}
    assert built[0]["id"] != built[1]["id"]
    message = whole.choices[0].message
    assert message.content == "Checking both."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("queue", {"user": "ada"}), ("history", {"days": 2})]
    assert whole.choices[0].finish_reason == "tool_calls"


def test_call_ids_count_up_unless_given() -> None:
    with ScriptedLLM([call("a", {}), call("b", {}, call_id="mine"), call("c", {})]) as llm:
        ids = [ask(llm).choices[0].message.tool_calls[0].id for _ in range(3)]
    assert ids == ["call_1", "mine", "call_2"]


def test_429_then_success_with_the_clients_own_retries() -> None:
    with ScriptedLLM([fail(429, times=2, retry_after=0.01), say("finally")]) as llm:
        answer = ask(llm, max_retries=2)
        assert len(llm.requests) == 3
    assert answer.choices[0].message.content == "finally"


def test_500_forever_raises_once_the_retries_are_spent() -> None:
    with ScriptedLLM([fail(500, times=None, retry_after=0.01)]) as llm:
        with pytest.raises(openai.InternalServerError) as error:
            ask(llm, max_retries=3)
        assert len(llm.requests) == 4
        assert llm.remaining == 1
    assert error.value.status_code == 500
    assert "scripted failure 500" in str(error.value)


def test_a_failure_body_is_sent_as_given() -> None:
    with ScriptedLLM([fail(400, body={"error": {"message": "context too long", "type": "x", "code": "ctx"}}),
                      fail(503, body="upstream down")]) as llm:
        with pytest.raises(openai.BadRequestError, match="context too long"):
            ask(llm)
        with pytest.raises(openai.InternalServerError) as error:
            ask(llm)
    assert error.value.status_code == 503 and error.value.response.text == "upstream down"


def test_malformed_arguments_arrive_as_the_raw_string() -> None:
    raw = '{"user": "ada", '
    with ScriptedLLM([malformed_args("queue", raw), malformed_args("queue", raw)]) as llm:
        assert ask(llm).choices[0].message.tool_calls[0].function.arguments == raw
        assert reassemble(stream(llm))[0]["arguments"] == raw


def test_a_stalled_stream_times_the_client_out() -> None:
    with ScriptedLLM([stall(30)]) as llm:
        started = time.monotonic()
        with client(llm, timeout=0.5) as chat:
            replies = chat.chat.completions.create(model="m", messages=USER, stream=True)
            first = next(iter(replies))
            assert first.choices[0].delta.role == "assistant"
            with pytest.raises((httpx.ReadTimeout, openai.APITimeoutError)):
                list(replies)
    assert time.monotonic() - started < 10


def test_a_stalled_answer_times_out_after_retries_then_the_script_goes_on() -> None:
    with ScriptedLLM([stall(30), stall(30), say("back")]) as llm:
        with pytest.raises(openai.APITimeoutError):
            ask(llm, timeout=0.3, max_retries=1)
        assert ask(llm).choices[0].message.content == "back"


def test_a_short_stall_then_the_answer() -> None:
    with ScriptedLLM([stall(0.2, then=say("slow but here"))]) as llm:
        chunks = stream(llm)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "slow but here"


def test_respond_answers_from_what_the_client_sent() -> None:
    def after_tool(request: dict[str, Any]) -> Say:
        result = request["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "call_1"
        return say(f"the tool said {result['content']}")

    with ScriptedLLM([call("queue", {"user": "ada"}), respond(after_tool), respond(after_tool)]) as llm:
        first = ask(llm).choices[0].message
        messages = [*USER, first.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "3 jobs"}]
        with client(llm) as chat:
            second = chat.chat.completions.create(model="m", messages=messages)
        assert second.choices[0].message.content == "the tool said 3 jobs"
        with pytest.raises(openai.InternalServerError, match="respond\\(\\) raised AssertionError"):
            ask(llm, max_retries=2)
        assert len(llm.errors) == 1
        assert len(llm.requests) == 3, "a failed respond() is not retried"


def test_a_used_up_script_answers_500_at_once() -> None:
    with ScriptedLLM([say("only one")]) as llm:
        ask(llm)
        with pytest.raises(openai.InternalServerError, match="no step left for request 2"):
            ask(llm, max_retries=3)
        assert len(llm.requests) == 2


def test_requests_are_recorded_as_sent() -> None:
    with ScriptedLLM([say("a")]) as llm:
        ask(llm)
        assert llm.requests == [{"model": "m", "messages": USER, "tools": TOOLS}]


def test_missing_auth_is_401_and_nothing_of_the_key_is_kept() -> None:
    with ScriptedLLM([say("a")]) as llm:
        for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}):
            response = httpx.post(f"{llm.base_url}/chat/completions", json={"model": "m", "messages": USER},
                                  headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["type"] == "authentication_error"
        assert llm.requests == [] and llm.unauthorized == 3
        ask(llm)
        assert KEY not in repr(llm.requests) and KEY not in repr(vars(llm))


def test_the_models_list() -> None:
    with ScriptedLLM(model="tiny") as llm:
        with client(llm) as chat:
            assert [m.id for m in chat.models.list()] == ["tiny"]


def test_the_async_client_streams_and_retries() -> None:
    async def run(llm: ScriptedLLM) -> tuple[str, dict[int, dict[str, str]]]:
        async with openai.AsyncOpenAI(base_url=llm.base_url, api_key=KEY, max_retries=2) as chat:
            whole = await chat.chat.completions.create(model="m", messages=USER)
            replies = await chat.chat.completions.create(model="m", messages=USER, stream=True)
            chunks = [chunk async for chunk in replies]
        return whole.choices[0].message.content or "", reassemble(chunks)

    with ScriptedLLM([fail(429, retry_after=0.01), say("async hello"), call("queue", {"user": "ada"})]) as llm:
        text, built = asyncio.run(run(llm))
    assert text == "async hello"
    assert built[0]["name"] == "queue" and json.loads(built[0]["arguments"]) == {"user": "ada"}


def test_steps_can_be_added_while_running_and_say_is_a_step() -> None:
    with ScriptedLLM() as llm:
        llm.add(Say("later"))
        assert ask(llm).choices[0].message.content == "later"
    with pytest.raises(RuntimeError, match="with"):
        ScriptedLLM().base_url
