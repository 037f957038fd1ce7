"""What an MCP host is told of Betty's tools, checked on every tool Betty offers (the registry's, as discovered): each
argument at any depth has a description, MCP's annotations follow Betty's tiers and each tool's own metadata, and the
tools that serve Betty's own chat are marked so; which ``mcp`` releases Betty speaks; and a URL pasted from
JupyterLab's address bar is refused with the server's own URL to give instead."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest
from conftest import run_betty

from betty_jupyter.agent.registry import default_registry
from betty_jupyter.agent.vocabulary import Tier
from betty_jupyter.errors import UsageError
from betty_jupyter.mcp_credentials import McpCredentials, server_url
from betty_jupyter.mcp_package import major, problem
from betty_jupyter.server.mcp_http import tool_annotations

CHAT_ONLY = {"scratchpad", "propose_plan", "delegate_tasks", "cell_run", "cell_run_status", "notebook_read",
             "notebook_edit", "notebook_run_cell", "node_kernel", "node_kernel_status", "node_kernel_stop"}


def undescribed(schema: Any, where: str) -> Iterator[str]:
    """``tool.path.to.argument`` for each property, anywhere in ``schema`` ($defs included), without a description."""
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if not (isinstance(prop, dict) and str(prop.get("description") or "").strip()):
                yield f"{where}.{name}"
        for key, value in schema.items():
            yield from undescribed(value, where if key == "properties" else f"{where}/{key}")
    elif isinstance(schema, list):
        for item in schema:
            yield from undescribed(item, where)


def test_every_argument_of_every_tool_has_a_description() -> None:
    tools = list(default_registry())
    assert len(tools) >= 30
    missing = [path for tool in tools for path in undescribed(tool.schema()["function"]["parameters"], tool.name)]
    assert not missing, f"arguments without a description: {missing}"


def test_the_walk_finds_an_argument_without_a_description_at_any_depth() -> None:
    schema = {"properties": {"a": {"description": "x"}, "b": {"type": "string"}},
              "$defs": {"Inner": {"properties": {"c": {"type": "integer"}, "d": {"description": " "}}}}}
    assert sorted(undescribed(schema, "t")) == ["t.b", "t/$defs/Inner.c", "t/$defs/Inner.d"]


def test_annotations_follow_the_tier_and_the_tool_s_metadata() -> None:
    for tool in list(default_registry()):
        hints = tool_annotations(tool)
        assert hints["title"] and hints["title"][0].isupper(), tool.name
        if tool.tier == Tier.ALWAYS_ASK:
            assert not hints["readOnlyHint"] and not hints["idempotentHint"], tool.name
            assert hints["destructiveHint"] is (not tool.only_adds), tool.name
        else:
            assert hints["readOnlyHint"] is (not tool.changes_project), tool.name
        assert hints["openWorldHint"] is (not tool.project_only), tool.name
    by_name = {tool.name: tool_annotations(tool) for tool in list(default_registry())}
    assert by_name["gpu_estimate"]["readOnlyHint"] and by_name["cluster_queue"]["readOnlyHint"]
    assert not by_name["cluster_submit"]["destructiveHint"] and by_name["cluster_cancel"]["destructiveHint"]
    assert not by_name["notebook_collect"]["readOnlyHint"]  # tier 1, yet it writes the executed notebook back
    assert {tool.name for tool in list(default_registry()) if tool.chat_only} == CHAT_ONLY


@pytest.mark.parametrize(("version", "line"), [("1.24.0", 1), ("1.30.0", 1), ("2.0.0", 2), ("2.3.0", 2),
                                               ("1.23.3", None), ("1.0.0", None), ("3.0.0", None), ("0.9.1", None),
                                               ("2.1.0rc1", 2), ("x", None)])
def test_the_supported_mcp_releases(version: str, line: int | None) -> None:
    assert major(version) == line


def test_the_installed_mcp_release_is_supported() -> None:
    assert problem("betty mcp") is None


@pytest.mark.parametrize(("pasted", "server"), [
    ("http://127.0.0.1:8888/lab/", "http://127.0.0.1:8888/"),
    ("http://127.0.0.1:8888/lab?token=0123abcd", "http://127.0.0.1:8888/"),
    ("http://localhost:8888/lab/tree/analysis.ipynb?token=1", "http://localhost:8888/"),
    ("https://ondemand.example.edu/node/c1/4567/lab", "https://ondemand.example.edu/node/c1/4567/"),
    ("http://127.0.0.1:8888/tree", "http://127.0.0.1:8888/"),
    ("http://127.0.0.1:8888/betty/mcp", "http://127.0.0.1:8888/")])
def test_a_jupyterlab_url_is_refused_naming_the_server_s_url(pasted: str, server: str) -> None:
    with pytest.raises(UsageError) as refused:
        server_url(pasted)
    assert f"not the Jupyter server's URL: give {server} " in str(refused.value)
    assert "0123abcd" not in str(refused.value)
    made = run_betty("mcp", "token", "add", "ide", "--url", pasted)
    assert made.returncode == 1 and made.stderr.startswith("betty: error: that is ") and server in made.stderr
    assert len(made.stderr.splitlines()) == 1 and "betty-mcp-" not in made.stdout + made.stderr
    assert McpCredentials().listed() == []


def test_betty_mcp_given_a_jupyterlab_url_says_which_url_to_give_and_sends_nothing() -> None:
    ran = run_betty("mcp", "--url", "http://127.0.0.1:9/lab?token=0123abcd",
                    env={**os.environ, "BETTY_MCP_TOKEN": "betty-mcp-" + "x" * 43})
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr == ("betty: error: that is a JupyterLab page, not the Jupyter server's URL: give "
                          "http://127.0.0.1:9/ (no ?token=: the client gets a credential of its own)\n")
