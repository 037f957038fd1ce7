"""A denied plan step, and a person's deny rule, hold however the model spells the command again.

The plan path is the real one (scripted model over HTTP, Betty's loop, one plan card answered
per step); Betty's scripted transport stands in for the cluster, and records every command, so
a respelled denied read is seen never to reach it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, calls, say
from test_plans_fast import converse, of, plan

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.cluster.scripted import Reply, ScriptedTransport
from betty_jupyter.experiments.workspace import Workspace

DENIED = {
    "cat /data/x": ["cat  /data/x", "cat -- /data/x", "'c'at /data/x", "\"cat\" '/data/x'", "cat /data/./x",
                    "cat //data//x", "cat /data/sub/../x", "cat /data/x/", " cat /data/x ",
                    "cat -- //data/sub/./../x"],
    "head -n 5 /data/log": ["head -n5 /data/log", "head -5 /data/log", "head --lines=5 /data/log",
                            "head --lin=5 /data/log", "head --lines 5 -- /data/log", "head -n 5 -n 5 /data/log"],
    "cat -n -s /data/x": ["cat -sn /data/x", "cat -s -n /data/x", "cat --squeeze-blank --number /data/x",
                          "cat --number -s -- /data/x", "cat --squeeze -n /data/x", "cat -ns -n /data/x"],
    "ls -l -a /data/dir": ["ls -la /data/dir/", "ls -al /data/dir", "ls --all -l //data/dir", "ls -a -l -- /data/dir"],
    "squeue -u bob -t PD": ["squeue -ubob -tPD", "squeue --user=bob --states PD", "squeue -t PD --users bob", "squeue --stat=PD -u bob"],
}
OTHERS = {"cat /data/x": "cat /data/y", "head -n 5 /data/log": "head -n 6 /data/log",
          "cat -n -s /data/x": "cat -n /data/x", "ls -l -a /data/dir": "ls -l /data/dir",
          "squeue -u bob -t PD": "squeue -u bob"}
"""A command close to each denied one that is not it: it runs."""


def reads(cluster: ScriptedTransport) -> list[str]:
    """The commands of the calls that reached the cluster (file reads run in Betty's read step)."""
    return [" ".join(argv) for argv in cluster.calls if "betty-read" in argv or argv[0] == "squeue"]


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def test_every_spelling_of_one_command_has_one_canonical_form() -> None:
    policy = CommandPolicy(["/data"], home="/data/me")
    for command, spellings in DENIED.items():
        canonical = policy.check(command).canonical
        for spelling in spellings:
            assert policy.check(spelling).canonical == canonical, spelling
        assert policy.check(OTHERS[command]).canonical != canonical
    assert policy.check("cat ../x").canonical == policy.check("cat /data/x").canonical
    assert policy.check("squeue -j 12").canonical == policy.check("squeue --jobs=12").canonical == "squeue -j12"
    assert policy.check("sacctmgr SHOW Users").canonical == "sacctmgr show users"
    a, b = (policy.check(f"sbatch --test-only {x} --wrap=true") for x in ("--time=5 --mem=1G", "--mem=1G --time=5"))
    assert a.canonical == b.canonical and a.command_line != b.command_line  # what runs is what was written


@pytest.mark.parametrize("denied", sorted(DENIED))
def test_a_denied_step_is_refused_however_it_is_spelt_again(workspace, denied: str) -> None:
    cluster = ScriptedTransport(answer=lambda argv: Reply(stdout="read\n"))
    spellings = DENIED[denied]

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        assert request.tool == "propose_plan", f"a card for {request.tool}"
        broker.respond(request.approval_id, "edited", "tester",
                       {"steps": [{"decision": "denied"}, {"decision": "approved"}]})

    with ScriptedLLM() as llm:
        llm.add(plan(("cluster_run", {"command": denied}), ("wiki_read", {"page": "index.md"})),
                calls([("cluster_run", {"command": spelling}) for spelling in spellings]),
                call("cluster_run", {"command": OTHERS[denied]}), say("Done."))
        reason, events, _ = asyncio.run(converse(workspace, llm, cluster, answer, mode="auto"))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reason == "finished"
    assert len(told) == len(spellings) + 2
    for spelling, text in zip(spellings, told[1:-1]):
        assert "the person denied step 1 of the plan; it does not run" in text, (spelling, text)
    assert "denied step" not in told[-1], "a different command is not the denied step"
    ran = reads(cluster)
    assert len(ran) == 1 and OTHERS[denied].split()[-1] in ran[0], ran
    assert [(s.index, s.status) for s in of(events, "plan_step")][:2] == [(1, "denied"), (2, "approved")]


@pytest.mark.parametrize("denied", sorted(DENIED))
def test_a_persons_deny_rule_holds_for_every_spelling(workspace, denied: str) -> None:
    cluster = ScriptedTransport(answer=lambda argv: Reply(stdout="read\n"))
    spellings = [denied, *DENIED[denied]]

    async def answer(session: Any, broker: ApprovalBroker, request: Any) -> None:
        raise AssertionError(f"a card was shown for {request.tool}")

    canonical = CommandPolicy(["/data"]).check(denied).canonical
    with ScriptedLLM() as llm:
        llm.add(calls([("cluster_run", {"command": spelling}) for spelling in spellings]),
                call("cluster_run", {"command": OTHERS[denied]}), say("Done."))
        reason, _, _ = asyncio.run(converse(workspace, llm, cluster, answer, mode="auto",
                                            rules={"deny": [f"cluster_run(command={canonical})"]}))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reason == "finished" and len(told) == len(spellings) + 1
    for spelling, text in zip(spellings, told):
        assert f"refused by your rule deny cluster_run(command={canonical})" in text, (spelling, text)
    assert "refused" not in told[-1]
    assert len(reads(cluster)) == 1
