"""A model-written schema's regular expressions run in linear time, and checking an answer is bounded.

``(a+)+$`` on Python's backtracking engine takes hours on a few dozen characters; Betty runs
every schema regex on RE2 and refuses what RE2 cannot run (backreferences, lookarounds) in one
line. Hostile patterns are checked against the texts that make a backtracking engine explode,
first directly and then through the real ``delegate_tasks`` with a scripted model.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLM, Step, call, from_betty, respond, say

from betty_jupyter.agent.loop import Limits
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.tasks import ANSWER_CHARS, checked_answer
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import SchemaError, ToolError
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.json_schema import MAX_DEPTH, MAX_SCHEMA_CHARS, first_problem, offline_validator
from betty_jupyter.wiki import init_workspace

EXPLOSIVE = ["(a+)+$", "(a|aa)+$", "^(a|a?)+$", "(.*a){20}$", "^(\\w+\\s?)*$", "(x+x+)+y", "([a-zA-Z]+)*[0-9]$"]
"""Patterns a backtracking engine takes exponential time over, on the texts of :func:`killer`."""
UNRUNNABLE = {"(a)\\1": "invalid escape sequence", "(?=a)b": "(?=", "(?!a)b": "(?!", "(?<=a)b": "(?<=",
              "(?<!a)b": "(?<!", "(?P<x>a)(?P=x)": "(?P=", "a{1001}": "repetition size", "(": "missing )"}
"""Patterns RE2 cannot run, and a word of why."""


def killer(pattern: str) -> str:
    """A text that makes ``pattern`` backtrack without end on Python's ``re`` (and fail to match)."""
    if pattern.startswith("^(\\w"):
        return "word " * 12 + "!"
    if pattern.endswith("[0-9]$"):
        return "a" * 40 + "!"
    return ("x" if "x" in pattern else "a") * 45 + "!"


@pytest.mark.parametrize("pattern", EXPLOSIVE)
def test_an_explosive_pattern_is_answered_at_once_by_every_keyword(pattern: str) -> None:
    text = killer(pattern)
    validator = offline_validator({"type": "object", "properties": {"value": {"type": "string", "pattern": pattern}},
                                   "propertyNames": {"pattern": "^[a-z!x ]+$"}})
    assert "does not match" in (first_problem(validator, {"value": text}) or "")
    names = offline_validator({"type": "object", "patternProperties": {pattern: {"type": "integer"}},
                               "additionalProperties": False})
    found = first_problem(names, {text: 1})
    assert found is not None and "do" in found and "not match any of the regexes" in found, found
    assert first_problem(names, {}) is None
    nested = offline_validator({"type": "array", "items": {"propertyNames": {"pattern": pattern}}})
    assert "does not match" in (first_problem(nested, [{"ok": 1}, {text: 2}]) or "")


def test_matching_texts_still_match_and_pattern_properties_still_apply() -> None:
    validator = offline_validator({"type": "object", "properties": {"id": {"pattern": "^job-[0-9]+$"}},
                                   "patternProperties": {"^gpu_[a-z]+$": {"type": "number"}},
                                   "additionalProperties": {"type": "string"}})
    assert first_problem(validator, {"id": "job-42", "gpu_mem": 3.5, "note": "fine"}) is None
    assert "gpu_mem: 'x' is not of type 'number'" == first_problem(validator, {"gpu_mem": "x"})
    assert "note: 3 is not of type 'string'" == first_problem(validator, {"note": 3})
    assert "does not match" in (first_problem(validator, {"id": "job-4x"}) or "")
    assert first_problem(offline_validator({"pattern": "é+"}), "café") is None  # Unicode as Python reads it


@pytest.mark.parametrize("pattern", sorted(UNRUNNABLE))
@pytest.mark.parametrize("place", ["pattern", "patternProperties", "propertyNames", "draft-07", "draft-04"])
def test_a_pattern_re2_cannot_run_is_refused_in_one_line(pattern: str, place: str) -> None:
    schema: dict[str, Any] = {
        "pattern": {"pattern": pattern},
        "patternProperties": {"patternProperties": {pattern: {}}},
        "propertyNames": {"items": {"propertyNames": {"pattern": pattern}}},
        "draft-07": {"$schema": "http://json-schema.org/draft-07/schema#",
                     "definitions": {"x": {"pattern": pattern}}, "properties": {"a": {"$ref": "#/definitions/x"}}},
        "draft-04": {"$schema": "http://json-schema.org/draft-04/schema#", "patternProperties": {pattern: {}}},
    }[place]
    with pytest.raises(SchemaError) as refused:
        offline_validator(schema)
    message = str(refused.value)
    assert "\n" not in message and "RE2" in message and UNRUNNABLE[pattern] in message, message


def test_a_regex_keyword_python_would_run_beside_unevaluated_properties_is_refused() -> None:
    with pytest.raises(SchemaError, match="unevaluatedProperties cannot stand"):
        offline_validator({"allOf": [{"patternProperties": {"(a+)+$": {}}}], "unevaluatedProperties": False})
    with pytest.raises(SchemaError, match="unevaluatedProperties cannot stand"):
        offline_validator({"$schema": "https://json-schema.org/draft/2019-09/schema",
                           "unevaluatedProperties": False, "properties": {"x": {"patternProperties": {"a": {}}}}})
    validator = offline_validator({"properties": {"a": {}}, "unevaluatedProperties": False})
    assert "'b' was unexpected" in (first_problem(validator, {"a": 1, "b": 2}) or "")


def test_format_regex_is_an_annotation_and_never_compiled_by_python() -> None:
    validator = offline_validator({"type": "string", "format": "regex"})
    assert first_problem(validator, "(a+)+$") is None
    assert first_problem(validator, "(a)\\1(") is None


def test_checking_a_value_stops_at_its_deadline_with_one_line() -> None:
    branching = {"$defs": {"n": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1},
                                           {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 9},
                                           {"type": "integer"}]}}, "$ref": "#/$defs/n"}
    value: Any = "leaf"
    for _ in range(60):
        value = [value]
    validator = offline_validator(branching)
    with pytest.raises(SchemaError) as slow:
        first_problem(validator, value, seconds=0.2)
    assert "took more than 0.2 s" in str(slow.value) and "\n" not in str(slow.value)
    assert "not valid under any" in (first_problem(validator, [[["leaf"]]]) or "")  # the next check has its own clock
    assert first_problem(validator, [[[1]]]) is None


def test_schemas_and_answers_beyond_their_bounds_are_refused_in_one_line() -> None:
    long_schema = {"enum": ["x" * 100] * (MAX_SCHEMA_CHARS // 100)}
    with pytest.raises(SchemaError, match=f"longer than {MAX_SCHEMA_CHARS}"):
        offline_validator(long_schema, MAX_SCHEMA_CHARS)
    with pytest.raises(ToolError, match=f"result_schema: the schema is longer than {MAX_SCHEMA_CHARS}"):
        checked_answer('"x"', long_schema)
    assert offline_validator(long_schema) is not None  # Betty's own schemas are as long as they need
    with pytest.raises(ToolError, match=f"longer than {ANSWER_CHARS}"):
        checked_answer(json.dumps("a" * ANSWER_CHARS), {"type": "string"})
    for depth in (MAX_DEPTH + 2, 5000, 100_000):
        with pytest.raises(ToolError, match=f"nests more than {MAX_DEPTH} levels"):
            checked_answer("[" * depth + "]" * depth, {"type": "array"})
    with pytest.raises(ToolError, match="does not match result_schema: the answer: .* does not match"):
        checked_answer(json.dumps("a" * 50 + "!"), {"pattern": "(a|aa)+$"})


# ----- through the real tool: the model writes the schema, a helper answers -------------------------

@pytest.mark.cluster
def test_delegate_tasks_checks_hostile_patterns_at_once_and_refuses_unrunnable_ones(ssh_profile, tmp_path: Path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    matched = {"type": "object", "required": ["run"], "properties": {"run": {"type": "string", "pattern": "^run-[0-9]+$"}}}
    tasks: list[tuple[dict[str, Any], Any]] = [
        *(({"type": "string", "pattern": pattern}, killer(pattern)) for pattern in EXPLOSIVE),
        *(({"type": "object", "patternProperties": {pattern: {}}, "additionalProperties": False},
           {killer(pattern): 1}) for pattern in EXPLOSIVE[:3]),
        ({"type": "object", "propertyNames": {"pattern": "^(a|a?)+$"}}, {"a" * 40 + "!": 0}),
        *(({"type": "string", "pattern": pattern}, "aaa") for pattern in sorted(UNRUNNABLE)),
        (matched, {"run": "run-17"}),
    ]
    told: list[str] = []

    def task(schema: dict[str, Any]) -> dict[str, Any]:
        return {"title": "name the run", "instructions": "Which run is it?", "result_schema": schema}

    def model(request: dict[str, Any]) -> Step:
        if not from_betty(request):
            first = request["messages"][1]["content"]
            index = int(first.split("Which run is it? #")[1].split()[0])
            return say(json.dumps(tasks[index][1]))
        told[:] = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        if len(told) == len(tasks):
            return say("done")
        spec = task(tasks[len(told)][0])
        spec["instructions"] += f" #{len(told)} "
        return call("delegate_tasks", {"tasks": [spec]})

    async def scenario(llm: ScriptedLLM) -> str:
        config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1})
        session = await open_session(workspace, config, SessionSpec(mode="auto",
                                                                    limits=Limits(max_iterations=len(tasks) + 4)))
        try:
            return await session.ask("name the runs, with helpers")
        finally:
            await session.context.close()

    with ScriptedLLM([respond(model) for _ in range(2 * len(tasks) + 4)]) as llm:
        reason = asyncio.run(scenario(llm))
    assert llm.errors == [] and reason == "finished", llm.errors
    explosive = len(EXPLOSIVE) + 4
    for text in told[:explosive]:
        assert "does not match" in text and "0 of 1 task(s) answered" in text, text
    for text, pattern in zip(told[explosive:-1], sorted(UNRUNNABLE)):
        assert text.startswith("error: some values are missing or wrong — tasks.0.result_schema: "), text
        assert "RE2" in text and UNRUNNABLE[pattern] in text, text
    assert '"run": "run-17"' in told[-1] and "1 of 1 task(s) answered" in told[-1], told[-1]
