"""The first request (system prompt and offered tools) says what Betty can do, fits a small model, and never changes
for the same configuration: the same bytes in every process, so a model server's prompt cache holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import date

import pandas as pd

from betty_jupyter.agent.offer import FIRST_REQUEST_TOKENS, MORE_TOOLS, ToolOffer
from betty_jupyter.agent.prompt import allowlist_text, persona_text, system_prompt
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.wiki import seed_dir

PARTITIONS = pd.DataFrame([
    {"partition": "cpu", "default": True, "nodes": 4, "cpus": 128, "gpu_types": {}},
    {"partition": "gpu", "default": False, "nodes": 2, "cpus": 64, "gpu_types": {"h100": 2, "a100": 4}},
])
CHARS_PER_TOKEN = 3
"""Fewer characters per token than any open model's tokenizer takes for English and JSON (Qwen, Llama: ~3.5–4),
so the estimate below is an upper bound; ``bench/agent_eval.py`` reports the server's own count."""


def prompt(offer: ToolOffer | None = None, user: str | None = "alice", policy: CommandPolicy | None = None) -> str:
    return system_prompt(persona_text(seed_dir()), offer or ToolOffer(default_registry()),
                         policy or CommandPolicy(["/scratch/alice"]), "mycluster", PARTITIONS, user,
                         today=date(2026, 11, 22))


def snake_words(text: str) -> set[str]:
    return set(re.findall(r"\b[a-z]+_[a-z]+(?:_[a-z]+)*\b", text))


def test_the_first_request_fits_half_of_an_8k_context():
    offer = ToolOffer(default_registry())
    size = len(prompt(offer)) + len(json.dumps(offer.schemas()))
    assert FIRST_REQUEST_TOKENS == 4096 and size / CHARS_PER_TOKEN <= FIRST_REQUEST_TOKENS, size


def test_the_prompt_names_only_offered_tools_and_describes_none():
    """Tools are described in their schemas only; a rule about a tool not offered is not told."""
    offer = ToolOffer(default_registry())
    text = prompt(offer)
    offered = {schema["function"]["name"] for schema in offer.schemas()}
    assert snake_words(text) - offered <= {"peak_gib", "job_id", "train"}, snake_words(text) - offered
    for schema in offer.schemas():
        assert schema["function"]["description"] not in text
    assert "scratchpad" not in text and "cluster_run" not in text  # offered only after more_tools
    assert MORE_TOOLS in text and "more_tools lists and adds" in text


def test_the_prompt_tells_the_person_s_login_the_last_job_tool_and_a_whole_script():
    text = prompt()
    assert "The person is `alice` on the cluster" in text and "\"my last job\" is its first row" in text
    assert "call gpu_estimate; never guess a figure" in text
    script = re.search(r"for example:\n```bash\n(.*?)\n```", text, re.DOTALL)
    assert script is not None
    lines = script.group(1).splitlines()
    assert lines[0] == "#!/bin/bash" and "#SBATCH --partition=gpu" in lines and "#SBATCH --gres=gpu:1" in lines
    without_gpus = system_prompt("You are Betty.", ToolOffer(default_registry()), CommandPolicy(), "c",
                                 PARTITIONS[PARTITIONS["partition"] == "cpu"], None, today=date(2026, 1, 1))
    assert "#SBATCH --partition=cpu" in without_gpus and "--gres" not in without_gpus
    assert "the login Betty uses" in without_gpus


def test_the_cluster_the_partitions_and_the_date_come_from_their_owners():
    text = prompt()
    assert "- gpu: 2 nodes, 64 CPUs, 4 × a100, 2 × h100 per node" in text and "- cpu (default)" in text
    assert "Today is 2026-11-22." in text and "Cluster: mycluster" in text
    assert "You are Betty" in text


def test_without_partitions_the_prompt_says_they_are_unknown():
    text = system_prompt("You are Betty.", ToolOffer(default_registry()), CommandPolicy(), "c", None,
                         today=date(2026, 1, 1))
    assert "Partitions: unknown (call cluster_partitions)." in text


def test_a_session_with_a_few_tools_is_offered_them_all_and_told_of_those_only():
    """An automation's or a helper's prompt never names a tool it cannot call, and it has no more_tools."""
    tools = default_registry().subset(["wiki_read", "wiki_write", "scratchpad", "cluster_run"])
    offer = ToolOffer(tools)
    text = prompt(offer)
    assert [schema["function"]["name"] for schema in offer.schemas()] == ["wiki_read", "wiki_write", "scratchpad",
                                                                          "cluster_run"]
    others = set(default_registry().names()) - set(tools.names())
    assert not snake_words(text) & (others | {MORE_TOOLS})
    assert allowlist_text(CommandPolicy(["/scratch/alice"])) in text and "Partitions:" in text


def test_the_allowlist_does_not_contradict_the_tier_nor_lists_readers_that_are_off():
    text = allowlist_text(CommandPolicy())
    assert "without approval" not in text and "asks the person once per session" in text
    assert "File readers are off" in text and not re.search(r"^- (cat|head|tail|ls)\b", text, re.MULTILINE)
    assert re.search(r"^- tail PATH", allowlist_text(CommandPolicy(["/scratch/alice"])), re.MULTILINE)


_FIRST_REQUEST = """
import hashlib, json, sys
from datetime import date
import pandas as pd
from betty_jupyter.agent.offer import ToolOffer
from betty_jupyter.agent.prompt import allowlist_text, persona_text, system_prompt
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.wiki import seed_dir
partitions = pd.DataFrame([{"partition": "gpu", "default": True, "nodes": 2, "cpus": 64,
                            "gpu_types": {"h100": 2, "a100": 4}}])
policy = CommandPolicy(["/scratch/alice", "/project/x"], extra_commands={"myquota": [], "lfs": ["quota"]})
offer = ToolOffer(default_registry(), notes={"cluster_run": allowlist_text(policy)})
text = system_prompt(persona_text(seed_dir()), offer, policy, "c", partitions, "alice", date(2026, 1, 1))
added = offer.answer(json.dumps({"tools": offer.hidden}))
everything = text + json.dumps(offer.schemas()) + added
sys.stdout.write(hashlib.sha256(everything.encode()).hexdigest())
"""


def test_the_first_request_is_the_same_bytes_in_every_process():
    """Python's hash seed orders sets differently in each process: nothing sent to the model may depend on it."""
    digests = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", _FIRST_REQUEST], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(done.stdout)
    assert len(digests) == 1, digests
