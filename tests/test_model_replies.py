"""Replies as real open models write them: calls as text, broken JSON, repeats, empty and overlong replies.

The reading itself (:mod:`betty_jupyter.agent.tool_calls`) is tested on its own first; then the same replies go
through the real loop, the real ``openai`` client and a scripted model over real HTTP, with Betty's scripted
transport for the cluster (the same journeys on the real cluster are ``test_agent_loop.py``'s).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, calls, malformed_args, respond, say
from test_scripted_transport import ROW

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.llm import Reply, ToolCallRequest
from betty_jupyter.agent.offer import CORE_TOOLS, MORE_TOOLS
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.tool_calls import HeldText, call_key, read_reply, repaired_json
from betty_jupyter.errors import ToolError
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace

TOOLS = {"cluster_queue": ("user", "states", "partition"), "cluster_partitions": (),
         "gpu_estimate": ("model", "method", "batch_size", "seq_len"), "more_tools": ("tools",)}


def read(text: str) -> tuple[str, list[tuple[str, Any]]]:
    got = read_reply(Reply(text, [], 0), TOOLS)
    return got.text, [(c.name, json.loads(c.arguments)) for c in got.tool_calls]


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "cluster_queue", "arguments": {"user": "ada"}}\n</tool_call>',
    '<tool_call>{"name": "cluster_queue", "arguments": "{\\"user\\": \\"ada\\"}"}',  # cut before the closing tag
    '<|python_tag|>{"name": "cluster_queue", "parameters": {"user": "ada"}}<|eom_id|>',
    '```json\n{"name": "cluster_queue", "arguments": {"user": "ada"}}\n```',
    '{"name": "cluster_queue", "arguments": {"user": "ada"}}',
    '{"type": "function", "function": {"name": "cluster_queue", "arguments": {"user": "ada"}}}',
    "{'name': 'cluster_queue', 'arguments': {'user': 'ada'}}",  # a Python dict literal
    '{"name": "cluster_queue", "arguments": {"user": "ada",}}',  # a trailing comma
    '{"name": "cluster_queue", "arguments": {"user": "ada"',  # cut off: the closing brackets missing
    "<tools>\n  <function>\n    <name>cluster_queue</name>\n    <arguments>\n      <user>ada</user>\n"
    "    </arguments>\n  </function>\n</tools>",
    '<function>\n<name>cluster_queue</name>\n<arguments>{"user": "ada"}</arguments>\n</function>',
    "<tool_call>\n<function=cluster_queue>\n<parameter=user>\nada\n</parameter>\n</function>\n</tool_call>",
    "<tools>\n    <function name=\"cluster_queue\" arguments='{\"user\": \"ada\"}'/>\n</tools>",
])
def test_a_reply_that_is_only_a_call_is_a_call_in_every_common_form(text: str) -> None:
    assert read(text) == ("", [("cluster_queue", {"user": "ada"})])


def test_a_call_after_a_fenced_script_is_read_and_the_script_stays_for_the_person() -> None:
    text = ("Here is the script:\n```bash\n#!/bin/bash\necho hi\n```\nThen:\n```json\n"
            '{"name": "cluster_queue", "arguments": {"user": "ada"}}\n```')
    assert read(text) == ("Here is the script:\n```bash\n#!/bin/bash\necho hi\n```\nThen:",
                          [("cluster_queue", {"user": "ada"})])


def test_a_raw_line_break_inside_a_string_is_repaired() -> None:
    """Small models write a batch script's lines into a JSON string as they are: one reading, so it is read."""
    text = '```json\n{"name": "gpu_estimate", "arguments": {"model": "Llama 3\n8B", "method": "lora"}}\n```'
    assert read(text) == ("", [("gpu_estimate", {"model": "Llama 3\n8B", "method": "lora"})])


@pytest.mark.parametrize("text, expected", [
    ("To size it, use the `gpu_estimate` function with the following parameters:\n\n```json\n"
     '{"model": "Llama-3-8B", "method": "lora"}\n```',
     ("To size it, use the `gpu_estimate` function with the following parameters:",
      [("gpu_estimate", {"model": "Llama-3-8B", "method": "lora"})])),
    ("I will call cluster_partitions:\n```json\n{}\n```", ("I will call cluster_partitions:",
                                                             [("cluster_partitions", {})])),
])
def test_arguments_beside_the_one_tool_they_fit_are_a_call(text: str, expected: Any) -> None:
    assert read(text) == expected


@pytest.mark.parametrize("text", [
    'Use `gpu_estimate` or `cluster_queue`:\n```json\n{"model": "x"}\n```',  # two tools named
    'Use `gpu_estimate`:\n```json\n{"model": "x", "rank": 8}\n```',  # an argument the tool does not take
    'Use `gpu_estimate`:\n```json\n{"model": "x"}\n```\nor\n```json\n{"model": "y"}\n```',  # two blocks
    'The result of `gpu_estimate` was:\n```json\n[1, 2]\n```',  # not an object
    'Here is the model card:\n```json\n{"model": "x"}\n```',  # no tool named
])
def test_arguments_that_fit_no_single_named_tool_stay_text(text: str) -> None:
    assert read(text) == (text.strip(), [])


def test_text_around_calls_is_kept_for_the_person_and_several_calls_are_read_in_order() -> None:
    text, found = read('Let me look.\n<tool_call>{"name": "cluster_queue", "arguments": {}}</tool_call>\n'
                       '<tool_call>{"name": "cluster_partitions", "arguments": {}}</tool_call>')
    assert text == "Let me look." and [name for name, _ in found] == ["cluster_queue", "cluster_partitions"]
    assert read('[{"name": "cluster_queue", "arguments": {}}, {"name": "gpu_estimate", "parameters": '
                '{"model": "x", "method": "lora"}}]')[1] == [
        ("cluster_queue", {}), ("gpu_estimate", {"model": "x", "method": "lora"})]


@pytest.mark.parametrize("text", [
    'The queue is empty. {"name": "cluster_queue"} is the tool I used.',  # prose that mentions a call
    '{"name": "Ada", "arguments": {"x": 1}}',  # a name that is no tool of the session, untagged
    '{"name": "cluster_queue", "arguments": {}, "state": "RUNNING"}',  # an object with other fields is data
    '[{"name": "cluster_queue", "arguments": {}}, {"job": 1}]',  # a list mixing a call and data is an answer
    '```json\n{"jobs": [1, 2]}\n```',
    "{'name': __import__('os').system('id')}",  # not a literal: never evaluated
    "[" * 5000 + "]" * 5000,  # deeper than Betty reads
    "<function>\n<name>cluster_queue</name>\n<arguments>the user ada</arguments>\n</function>",  # prose in it
    "<function>\n<name>rm_rf</name>\n<arguments></arguments>\n</function>",  # no tool of the session
    "",
])
def test_what_is_not_a_call_stays_the_answer(text: str) -> None:
    got = read_reply(Reply(text, [], 0), TOOLS)
    assert got.tool_calls == [] and got.text == text.strip()


def test_a_tagged_call_to_a_tool_the_session_lacks_is_still_a_call_and_is_refused_by_name_later() -> None:
    assert read('<tool_call>{"name": "get_partitions", "arguments": {}}</tool_call>') == (
        "", [("get_partitions", {})])


def test_native_calls_keep_their_text_and_broken_arguments_are_repaired_only_when_unambiguous() -> None:
    native = [ToolCallRequest("c1", "cluster_queue", '{"user": "ada",}'),
              ToolCallRequest("c2", "gpu_estimate", '{"model": "x" "method": "lora"}'),
              ToolCallRequest("c3", "cluster_partitions", "")]
    got = read_reply(Reply('<tool_call>{"name": "cluster_queue"}</tool_call>', native, 7), TOOLS)
    assert got.text == '<tool_call>{"name": "cluster_queue"}</tool_call>' and got.from_text == 0
    assert [c.arguments for c in got.tool_calls] == ['{"user": "ada"}', '{"model": "x" "method": "lora"}', ""]
    assert got.repaired == 1 and got.tokens == 7
    assert repaired_json('{"a": "x,}"') == {"a": "x,}"}  # a string's own ",}" is not a trailing comma
    assert repaired_json('{"a": "unclosed') is None


def test_a_result_s_template_tags_copied_into_an_answer_are_left_out() -> None:
    assert read("<tool_response>\n2 partition(s): cpu (default), gpu\n</tool_response>") == (
        "2 partition(s): cpu (default), gpu", [])


def test_the_same_call_spelt_twice_is_one_key() -> None:
    assert call_key(ToolCallRequest("a", "t", '{"x": 1, "y": 2}')) == call_key(ToolCallRequest("b", "t", '{"y":2,"x":1}'))
    assert call_key(ToolCallRequest("a", "t", '{"x": 1}')) != call_key(ToolCallRequest("a", "u", '{"x": 1}'))


def test_text_that_may_be_a_call_is_held_back_while_it_streams() -> None:
    held = HeldText()
    assert [held.take(piece) for piece in ["<to", "ol_call>", '{"name"']] == ["", "", ""] and held.held
    prose = HeldText()
    assert [prose.take(piece) for piece in ["", " <", "b>Hi", " there"]] == ["", "", " <b>Hi", " there"]
    assert not prose.held


# ----- through the real loop ------------------------------------------------------------------------

async def session_events(workspace: Workspace, llm: ScriptedLLM, cluster: ScriptedTransport, prompt: str,
                         **llm_settings: Any) -> tuple[str, list[Any], Any]:
    broker = ApprovalBroker(timeout=60)
    events: list[Any] = []

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "tester")

    config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}],
                         llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1,
                              **llm_settings})
    session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(person,), transport=cluster))
    return await session.ask(prompt), events, session


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def cluster() -> ScriptedTransport:
    return ScriptedTransport().on("squeue", stdout=ROW + "\n").on("id", "-un", stdout="alice\n")


def test_the_first_request_offers_the_core_and_more_tools_with_a_reply_cap_and_tool_choice(workspace) -> None:
    with ScriptedLLM([say("Hello.")]) as llm:
        reason, _, session = asyncio.run(session_events(workspace, llm, cluster(), "hi", reply_tokens=300))
        first = llm.requests[0]
    assert reason == "finished"
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert set(names) == {*CORE_TOOLS, MORE_TOOLS} and names[-1] == MORE_TOOLS
    assert first["max_tokens"] == 300 and first["tool_choice"] == "auto" and first["temperature"] == 0.2
    assert "The person is `alice` on the cluster" in first["messages"][0]["content"]


def test_more_tools_adds_tools_for_the_rest_of_the_session_and_tells_the_allowlist(workspace) -> None:
    steps = [call(MORE_TOOLS, {}), call(MORE_TOOLS, {"tools": ["cluster_run", "no_such_tool"]}),
             call("cluster_run", {"command": "squeue --me"}), say("One job.")]
    with ScriptedLLM(steps) as llm:
        reason, events, session = asyncio.run(session_events(workspace, llm, cluster(), "run squeue --me"))
        offered = [[t["function"]["name"] for t in request["tools"]] for request in llm.requests]
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reason == "finished"
    assert "- cluster_run: Run one read-only command" in told[0] and "- wiki_read:" in told[0]
    assert told[1].startswith("Added cluster_run: call it now.") and "Not tools of this session: 'no_such_tool'" in told[1]
    assert "cluster_run runs only these read-only commands" in told[1]
    assert "cluster_run" not in offered[1] and "cluster_run" in offered[2] and offered[2] == offered[3]
    assert [e.payload.tool for e in events if e.type == "tool_call"] == ["cluster_run"]  # more_tools is no action
    assert [r.tool for r in ActionLog(workspace.root).read(session_id=session.session_id)] == ["cluster_run"]


def test_a_tool_called_by_name_before_it_was_offered_runs_through_the_gate_and_is_offered_after(workspace) -> None:
    steps = [call("wiki_read", {"page": "index.md"}), say("The index lists the pages.")]
    with ScriptedLLM(steps) as llm:
        reason, events, _ = asyncio.run(session_events(workspace, llm, cluster(), "what is in the wiki?"))
        offered = [[t["function"]["name"] for t in request["tools"]] for request in llm.requests]
    result = next(e.payload for e in events if e.type == "tool_result")
    assert reason == "finished" and (result.tool, result.ok) == ("wiki_read", True)
    assert "wiki_read" not in offered[0] and "wiki_read" in offered[1]


def test_a_repeated_identical_call_is_answered_from_its_result_and_not_run_again(workspace) -> None:
    steps = [call("cluster_queue", {"user": "alice"}), call("cluster_queue", {"user": "alice"}),
             calls([("cluster_queue", {"user": "alice"}), ("cluster_queue", {"user": "bob"})]), say("Done.")]
    transport = cluster()
    with ScriptedLLM(steps) as llm:
        reason, events, _ = asyncio.run(session_events(workspace, llm, transport, "show my jobs"))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reason == "finished" and len(transport.ran("squeue")) == 2, "alice's queue once, bob's once"
    assert told[1].startswith(told[0] + "\n\n(This is the answer of your earlier call of cluster_queue with the same ")
    notes = [e.payload.reason for e in events if e.type == "replanning"]
    assert notes == ["the model repeated cluster_queue with the same arguments; answered from the earlier result, "
                     "not run again"] * 2


def test_an_empty_reply_is_asked_again_once_then_reported_never_taken_as_an_answer(workspace) -> None:
    with ScriptedLLM([say(""), say("The queue is empty.")]) as llm:
        reason, events, _ = asyncio.run(session_events(workspace, llm, cluster(), "what runs?"))
        second = llm.requests[1]["messages"]
    assert reason == "finished" and second[-1]["content"].startswith("(Your reply was empty.")
    with ScriptedLLM([say(""), say("  ")]) as llm:
        reason, events, session = asyncio.run(session_events(workspace, llm, cluster(), "what runs?"))
    errors = [e.payload for e in events if e.type == "error"]
    assert reason == "error" and [e.code for e in errors] == ["empty_reply"]
    assert not [m for m in session.messages if "Your reply was empty" in str(m.get("content"))], "the nudge is not kept"


def test_a_broken_call_the_loop_cannot_repair_is_told_back_in_one_line_and_the_model_corrects_it(workspace) -> None:
    steps = [malformed_args("cluster_queue", '{"user": "alice" "states": ["RUNNING"]}'),
             call("cluster_queue", {"user": "alice"}), say("One job runs.")]
    with ScriptedLLM(steps) as llm:
        reason, events, _ = asyncio.run(session_events(workspace, llm, cluster(), "show my jobs"))
        told = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert reason == "finished" and len(told) == 1
    assert told[0].startswith("error: the values are not valid JSON") and "\n" not in told[0]


def test_a_call_written_as_text_is_decided_exactly_as_a_native_one(workspace) -> None:
    """A tier 2 call written as text still shows its card, and the action log records it as the person answered."""
    script = "#!/bin/bash\n#SBATCH --job-name=t\n#SBATCH --partition=debug\n#SBATCH --time=00:01:00\necho hi\n"
    steps = [respond(lambda request: say('<tool_call>{"name": "cluster_submit", "arguments": '
                                         + json.dumps(json.dumps({"script": script, "goal": "try"})) + '}</tool_call>')),
             say("Submitted.")]
    transport = cluster().on("sinfo", stdout="").on("sbatch", stdout="123\n")
    with ScriptedLLM(steps) as llm:
        reason, events, session = asyncio.run(session_events(workspace, llm, transport, "submit it"))
    cards = [e.payload for e in events if e.type == "approval_request"]
    assert reason == "finished" and [(c.tool, c.tier) for c in cards] == [("cluster_submit", 2)]
    assert script.strip() in cards[0].preview.text


def test_a_planner_plans_the_turn_and_the_session_model_carries_it_out_each_named_in_the_chat(workspace) -> None:
    with ScriptedLLM([say("1. cluster_queue with user alice\n2. tell the person")], model="planner") as planner, \
            ScriptedLLM([call("cluster_queue", {"user": "alice"}), say("One job runs.")]) as executor:
        reason, events, session = asyncio.run(session_events(
            workspace, executor, cluster(), "show my jobs", planner={"base_url": planner.base_url, "model": "big-one"}))
        planned, first = planner.requests[0], executor.requests[0]
    assert reason == "finished" and "tools" not in planned
    assert planned["messages"][0]["content"].startswith("You plan for Betty") and "- cluster_queue:" in planned[
        "messages"][0]["content"]
    assert planned["messages"][-1] == {"role": "user", "content": "show my jobs"}
    assert first["messages"][-1]["content"].endswith("1. cluster_queue with user alice\n2. tell the person")
    said = [(e.payload.text, e.payload.model) for e in events if e.type == "message" and e.payload.role == "assistant"]
    assert said == [("Plan:\n1. cluster_queue with user alice\n2. tell the person", "big-one"),
                    ("One job runs.", "scripted")]


def test_a_planner_that_fails_is_said_and_the_session_model_answers_alone(workspace) -> None:
    from llm_server import fail

    with ScriptedLLM([fail(400)]) as planner, ScriptedLLM([say("One job runs.")]) as executor:
        reason, events, _ = asyncio.run(session_events(
            workspace, executor, cluster(), "show my jobs", planner={"base_url": planner.base_url, "model": "p"}))
    notes = [e.payload.reason for e in events if e.type == "replanning"]
    assert reason == "finished" and len(notes) == 1 and notes[0].startswith("the planner did not answer (")
    assert notes[0].endswith("going on without a plan")


@pytest.mark.parametrize("setting, sent", [({}, 0.2), ({"temperature": 0.7}, 0.7), ({"temperature": None}, None)])
def test_an_open_model_server_is_asked_for_little_randomness_unless_the_setting_says(workspace, setting, sent) -> None:
    with ScriptedLLM([say("Hello.")]) as llm:
        asyncio.run(session_events(workspace, llm, cluster(), "hi", **setting))
        assert llm.requests[0].get("temperature") == sent


@pytest.mark.parametrize("value", [True, "cold", -1, 3])
def test_a_temperature_that_is_no_number_from_0_to_2_is_refused_in_one_line(value) -> None:
    from betty_jupyter.agent.llm import LLMSettings
    from betty_jupyter.errors import ConfigError

    with pytest.raises(ConfigError, match="^llm.temperature must be a number from 0 to 2, or null, not "):
        LLMSettings.from_config({"model": "m", "base_url": "http://127.0.0.1:9/v1", "temperature": value})


def test_optional_arguments_a_model_fills_with_nothing_are_left_out() -> None:
    """Small models fill every field: an empty job id or an empty estimate object means none, never a refusal."""
    from betty_jupyter.agent.registry import default_registry

    registry = default_registry()
    submit = registry.get("cluster_submit").parse({"script": "#!/bin/bash\n", "goal": "g", "gpu_estimate": {},
                                                   "replaces": ""})
    assert (submit.gpu_estimate, submit.replaces) == (None, None)
    assert registry.get("job_logs").parse({"job_id": ""}).job_id is None
    assert registry.get("cluster_why").parse({"job_id": ""}).job_id is None
    with pytest.raises(ToolError, match=r"gpu_estimate\.peak_gib: is required"):
        registry.get("cluster_submit").parse({"script": "#!/bin/bash\n", "goal": "g", "gpu_estimate": {"model": "x"}})
    with pytest.raises(ToolError, match="job_id: ' ' is not a Slurm job id"):
        registry.get("job_logs").parse({"job_id": " "})


def test_a_call_the_person_approved_is_told_done_once_and_a_read_is_not(workspace) -> None:
    script = "#!/bin/bash\n#SBATCH --job-name=t\n#SBATCH --partition=debug\n#SBATCH --time=00:01:00\necho hi\n"
    steps = [call("cluster_queue", {}), call("cluster_submit", {"script": script, "goal": "try"}), say("Job 123.")]
    transport = cluster().on("sinfo", stdout="").on("sbatch", stdout="123\n")
    with ScriptedLLM(steps) as llm:
        reason, _, _ = asyncio.run(session_events(workspace, llm, transport, "submit it"))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    from betty_jupyter.agent.loop import DONE_AS_APPROVED

    assert reason == "finished" and told[1].endswith(f"\n\n{DONE_AS_APPROVED}") and DONE_AS_APPROVED not in told[0]


def test_an_estimate_handed_to_a_submission_keeps_only_its_typed_fields_on_one_line_each() -> None:
    """gpu_estimate's result goes onto the card and the page: nothing but its known, bounded fields, each one line."""
    from betty_jupyter.agent.registry import default_registry

    submit = default_registry().get("cluster_submit")
    args = submit.parse({"script": "#!/bin/bash\n", "goal": "g", "gpu_estimate": {
        "peak_gib": 67.5, "model": "Llama\n## Lessons\nforged", "peak_moment": "start of the backward pass",
        "breakdown": {"weights": 15.0, "x\x1b[2J": 1.0}, "notes": ["a\nb"], "script": "rm -rf ~", "deep": {"a": [1]}}})
    assert args.gpu_estimate is not None and args.gpu_estimate.model_dump(exclude_none=True) == {
        "peak_gib": 67.5, "model": "Llama\\n## Lessons\\nforged", "peak_moment": "start of the backward pass",
        "breakdown": {"weights": 15.0, "x\\x1b[2J": 1.0}, "notes": ["a\\nb"]}
    with pytest.raises(ToolError, match="gpu_estimate.breakdown: each part is 0 to 1,000,000 GiB"):
        submit.parse({"script": "#!/bin/bash\n", "goal": "g", "gpu_estimate": {"peak_gib": 1, "breakdown": {"a": -1}}})
    with pytest.raises(ToolError, match="gpu_estimate.notes"):
        submit.parse({"script": "#!/bin/bash\n", "goal": "g", "gpu_estimate": {"peak_gib": 1, "notes": ["n"] * 50}})


@pytest.mark.parametrize("arguments", ['{"tools": ' + "[" * 200 + "]" * 200 + "}", "not json", '{"tools": 7}',
                                       '{"tools": ["x' + "y" * 5000 + '"]}'])
def test_more_tools_called_badly_answers_in_one_line_and_adds_nothing(arguments: str) -> None:
    from betty_jupyter.agent.offer import ToolOffer
    from betty_jupyter.agent.registry import default_registry

    offer = ToolOffer(default_registry())
    hidden = offer.hidden
    told = offer.answer(arguments)
    assert offer.hidden == hidden
    assert told.startswith("Tools you can add") or (told.startswith("Those tools were already offered.") and
                                                    len(told) < 200), told[:300]


def test_the_server_s_context_sets_how_much_history_is_kept_and_a_bad_one_is_refused_in_one_line() -> None:
    from betty_jupyter.agent.session import configured_limits
    from betty_jupyter.errors import ConfigError

    def limits(**llm: Any) -> Any:
        return configured_limits(BettyConfig(llm={"model": "m", **llm}))

    assert limits(context_tokens=16384).history_chars == (16384 - 1024 - 4096) * 3
    assert limits(context_tokens=16384, reply_tokens=2048).history_chars == (16384 - 2048 - 4096) * 3
    assert limits(context_tokens=8192).history_chars == 9216
    assert limits(context_tokens=16384, history_chars=5000).history_chars == 5000
    for bad in (4096, "8k", True, 8191.5):
        with pytest.raises(ConfigError, match="^llm.context_tokens is the model server's context in tokens, at least "
                                              "8192; not "):
            limits(context_tokens=bad)


def test_an_offer_setting_that_is_neither_core_nor_all_is_refused_and_all_offers_every_tool(workspace) -> None:
    from betty_jupyter.agent.registry import default_registry
    from betty_jupyter.errors import ConfigError

    with ScriptedLLM([say("Hello.")]) as llm:
        with pytest.raises(ConfigError, match="^llm.offer_tools is \"core\" or \"all\", not 'some'$"):
            asyncio.run(session_events(workspace, llm, cluster(), "hi", offer_tools="some"))
        asyncio.run(session_events(workspace, llm, cluster(), "hi", offer_tools="all"))
        offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
    # every tool but those only the person calls (their notebook's own buttons and magics)
    assert offered == [tool.name for tool in default_registry() if not tool.person_only]
    assert "node_kernel_stop" not in offered and "node_kernel" in offered


def test_the_tools_list_is_made_once_and_again_only_when_a_tool_joins() -> None:
    from betty_jupyter.agent.offer import ToolOffer
    from betty_jupyter.agent.registry import default_registry

    offer = ToolOffer(default_registry())
    first = offer.schemas()
    assert offer.schemas() is first and offer.show(["cluster_queue"]) == [] and offer.schemas() is first
    assert offer.show(["wiki_read"]) == ["wiki_read"]
    after = offer.schemas()
    assert after is not first and "wiki_read" in [tool["function"]["name"] for tool in after]
