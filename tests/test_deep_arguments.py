"""A model's tool call whose arguments nest without end is one line told back to it, and nothing runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, malformed_args, say
from test_plans_fast import converse

from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.json_text import MAX_NESTING


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("arguments", [
    nested(100_000), "[" * 100_000, '{"page": "index.md", "x": ' + nested(MAX_NESTING + 1) + "}",
    '{"goal": "g", "steps": [{"tool": "wiki_read", "args": {"page": ' + nested(5000) + "}}]}",
])
def test_arguments_nested_without_end_are_told_in_one_line(workspace, arguments: str) -> None:
    cluster = ScriptedTransport()

    async def answer(session: Any, broker: Any, request: Any) -> None:
        raise AssertionError(f"a card was shown for {request.tool}")

    tool = "propose_plan" if arguments.startswith('{"goal"') else "wiki_read"
    with ScriptedLLM() as llm:
        llm.add(malformed_args(tool, arguments), say("I see."))
        reason, events, _ = asyncio.run(converse(workspace, llm, cluster, answer, mode="auto"))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reason == "finished" and len(told) == 1
    assert told[0].startswith("error: ") and "nested too deeply" in told[0] and "\n" not in told[0], told[0][:300]
    assert not [e for e in events if e.type in ("tool_call", "approval_request", "plan")]
