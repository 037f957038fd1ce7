"""The system prompt says what Betty can do, from the parts that know it, and nothing more."""

from __future__ import annotations

import re
from datetime import date

import pandas as pd

from betty_jupyter.agent.prompt import persona_text, system_prompt
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.cluster.policy import CommandPolicy
from betty_jupyter.wiki import seed_dir


def prompt() -> str:
    partitions = pd.DataFrame([
        {"partition": "cpu", "default": True, "nodes": 4, "cpus": 128, "gpu_types": {}},
        {"partition": "gpu", "default": False, "nodes": 2, "cpus": 64, "gpu_types": {"a100": 4, "h100": 2}},
    ])
    return system_prompt(persona_text(seed_dir()), default_registry(), CommandPolicy(["/scratch/alice"]), "mycluster",
                         partitions, today=date(2026, 11, 22))


def test_every_tool_is_listed_with_its_tier_and_nothing_else_is_named_a_tool():
    text = prompt()
    registry = default_registry()
    for name in registry.names():
        assert f"- {name} (" in text
    named = set(re.findall(r"^- ([a-z_]+) \((?:tier \d)", text, re.MULTILINE))
    assert named == set(registry.names())
    snake_words = set(re.findall(r"\b[a-z]+_[a-z]+(?:_[a-z]+)*\b", text))
    assert snake_words - set(registry.names()) <= {"readable_roots", "gpu_types"}, snake_words - set(registry.names())


def test_the_policy_the_cluster_and_the_date_come_from_their_owners():
    text = prompt()
    assert CommandPolicy(["/scratch/alice"]).describe() in text
    assert "- gpu: 2 nodes, 64 CPUs, 4 × a100, 2 × h100 per node" in text and "- cpu (default)" in text
    assert "Today is 2026-11-22." in text
    assert "You are Betty" in text


def test_without_partitions_the_prompt_says_they_are_unknown():
    text = system_prompt("You are Betty.", default_registry(), CommandPolicy(), "c", None, today=date(2026, 1, 1))
    assert "Partitions: unknown (call cluster_partitions)." in text


def test_a_session_with_a_subset_of_tools_is_told_of_those_only():
    """An automation's or a helper's prompt never names a tool it cannot call (nor cluster_run's allowlist)."""
    tools = default_registry().subset(["wiki_read", "wiki_write", "scratchpad"])
    text = system_prompt(persona_text(seed_dir()), tools, CommandPolicy(["/scratch/alice"]), "c", None,
                         today=date(2026, 1, 1))
    named = set(re.findall(r"^- ([a-z_]+) \((?:tier \d)", text, re.MULTILINE))
    assert named == {"wiki_read", "wiki_write", "scratchpad"}
    others = set(default_registry().names()) - named
    assert not {word for word in re.findall(r"\b[a-z]+_[a-z]+(?:_[a-z]+)*\b", text) if word in others}
    assert CommandPolicy(["/scratch/alice"]).describe() not in text and "Partitions: unknown." in text
