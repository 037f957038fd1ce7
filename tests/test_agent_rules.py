"""The person's rules match what runs, however the model (or a person) spells it; resources handed to helpers too.

``deny: cluster_run(command=cat*)`` must hold for ``' cat x'``, ``"'cat' x"``, ``'"c"at x'``,
``cat -- x`` and every other spelling of the same command line; job ids are matched without
leading zeros and wiki pages by the page a link reaches. Checked through the decision itself,
through the real loop (the scripted model on real HTTP, the dev cluster), through a person's
own call on the real server, and for the files, jobs and pages a delegated helper is given.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLM, Step, call, from_betty, respond, say
from test_server_support import call as api
from test_server_support import llm, open_session as open_panel_session, server_config  # noqa: F401  (fixtures)

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.loop import Limits
from betty_jupyter.agent.models import Tier
from betty_jupyter.agent.policy import ApprovalPolicy, SessionGrants
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.tools import ToolContext
from betty_jupyter.cluster.profiles import ClusterProfile
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace

SECRET = "the-secret-line-7f3a"
DENY_CAT = {"deny": ["cluster_run(command=cat*)"]}


def spellings(path: str) -> list[str]:
    """The same ``cat PATH`` written as a model could write it; the policy accepts each one."""
    folder, name = os.path.split(path)
    return [f"cat {path}", f" cat {path}", f"'cat' {path}", f'"c"at {path}', f"cat -- {path}", f"'c''a''t' {path}",
            f"  cat   {path}  ", f'"cat" "{path}"', f"cat {folder}/./{name}", f"cat {folder}//{name}",
            f"cat {folder}/sub/../{name}", f"cat -n {path}", f"cat {path} {path}", f"cat -- {folder}/../{os.path.basename(folder)}/{name}"]


REFUSED_ANYWAY = ["c\\at {path}", "cat\t{path}", "/bin/cat {path}", "cat '' {path}", "cat {path}; true", "cat $(echo {path})",
                  "ca\u0074\u200b {path}", "cat\n{path}"]
"""Spellings the command policy refuses by itself: they never run, whatever the rules."""


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "private" / "notes.txt"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\nsecond line\n")
    (tmp_path / "private" / "sub").mkdir()
    return path


def context_on(root: Path, tmp_path: Path) -> ToolContext:
    """A tool context whose cluster reads under ``root`` (never reached: deciding needs no cluster)."""
    init_workspace(tmp_path / "project")
    profile = ClusterProfile(name="nowhere", transport="local", readable_roots=(str(root),))
    return ToolContext.open(profile, Workspace.at(tmp_path / "project"), "s-rules")


def decision(policy: ApprovalPolicy, ctx: ToolContext, tool: str, raw: dict[str, Any], person: bool = False) -> Any:
    """What the loop decides for this call (the same steps: parse, canonical values, the resources' reads)."""
    chosen = default_registry().get(tool)
    args = chosen.parse(raw)
    values, reads = chosen.rule_values(ctx, args), chosen.reads_for(ctx, args)
    if person:
        return policy.decide_for_person(tool, values, chosen.tier_for(args), reads)
    return policy.decide(tool, values, chosen.tier_for(args), SessionGrants(), reads)


# ----- the decision ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "confirm", "propose"])
def test_every_spelling_of_a_denied_command_is_denied(secret, tmp_path, mode) -> None:
    ctx = context_on(tmp_path, tmp_path)
    try:
        policy = ApprovalPolicy(mode, DENY_CAT)
        for command in spellings(str(secret)):
            for person in (False, True):
                decided = decision(policy, ctx, "cluster_run", {"command": command}, person)
                assert decided.action == "deny", (command, decided)
                assert "refused by your rule deny cluster_run(command=cat*)" in decided.reason
        head = decision(policy, ctx, "cluster_run", {"command": f"head -n 1 {secret}"})
        assert head.action != "deny", "a rule on cat leaves other commands alone"
    finally:
        asyncio.run(ctx.close())


def test_a_rule_on_a_path_holds_however_the_path_is_walked(secret, tmp_path) -> None:
    ctx = context_on(tmp_path, tmp_path)
    try:
        policy = ApprovalPolicy("auto", {"ask": [f"cluster_run(command=* {secret.parent}/*)"]})
        for command in spellings(str(secret)) + [f"head -n 2 {tmp_path}/private/sub/../notes.txt",
                                                 f"tail {tmp_path}/./private//notes.txt"]:
            decided = decision(policy, ctx, "cluster_run", {"command": command})
            assert decided.action == "ask" and "asks every time" in decided.reason, (command, decided)
        assert decision(policy, ctx, "cluster_run", {"command": f"ls {tmp_path}"}).action == "run"
    finally:
        asyncio.run(ctx.close())


def test_job_ids_and_pages_are_matched_in_their_one_spelling(tmp_path) -> None:
    ctx = context_on(tmp_path, tmp_path)
    os.symlink("../personas", ctx.workspace.wiki / "clusters" / "people")
    try:
        policy = ApprovalPolicy("auto", {"deny": ["cluster_cancel(job_id=123)", "job_logs(job_id=123_4)",
                                                  "wiki_read(page=personas/*)"]})
        for raw in ("123", "00123", 123, " 0123 "):
            assert decision(policy, ctx, "cluster_cancel", {"job_id": raw}).action == "deny", raw
            assert decision(policy, ctx, "cluster_cancel", {"job_id": raw}, person=True).action == "deny", raw
        for raw in ("123_4", "0123_004", "123_04"):
            assert decision(policy, ctx, "job_logs", {"job_id": raw}).action == "deny", raw
        assert decision(policy, ctx, "cluster_cancel", {"job_id": "1230"}).action == "ask"  # tier 2, not denied
        assert decision(policy, ctx, "wiki_read", {"page": "clusters/people/betty.md"}).action == "deny"
        assert decision(policy, ctx, "wiki_read", {"page": "clusters/dev-cluster.md"}).action == "run"
    finally:
        asyncio.run(ctx.close())


def test_deny_and_ask_rules_cover_what_a_helper_is_given(secret, tmp_path) -> None:
    ctx = context_on(tmp_path, tmp_path)
    os.symlink("../personas", ctx.workspace.wiki / "clusters" / "people")
    try:
        policy = ApprovalPolicy("auto", {"ask": [f"cluster_run(command=tail -n 80 {secret.parent}/*)"],
                                         "deny": ["job_logs(job_id=77)", "wiki_read(page=personas/*)"]})

        def given(kind: str, location: str, person: bool = False) -> Any:
            task = {"title": "look", "instructions": "look at it", "resources": [{"type": kind, "location": location}]}
            return decision(policy, ctx, "delegate_tasks", {"tasks": [task]}, person)

        for location in (str(secret), f"{tmp_path}//private/notes.txt", f"{tmp_path}/x/../private/notes.txt",
                         f"{secret.parent}/./notes.txt"):
            for person in (False, True):
                asked = given("file", location, person)
                assert asked.action == "ask", (location, asked)
                assert f"(it covers the read cluster_run tail -n 80 {secret})" in asked.reason
        assert given("file", str(tmp_path / "public.txt")).action == "run"
        for job in ("77", "0077"):
            denied = given("job", job)
            assert denied.action == "deny" and "job_logs(job_id=77)" in denied.reason, denied
        assert given("wiki", "clusters/people/betty.md").action == "deny"
        assert given("wiki", "clusters/dev-cluster.md").action == "run"
    finally:
        asyncio.run(ctx.close())


# ----- through the real loop, on the dev cluster ------------------------------------------------------------------

def config_for(llm: ScriptedLLM, ssh_profile, rules: dict[str, list[str]]) -> BettyConfig:
    return BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}], rules=rules,
                       llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1})


def one_call_per_turn(tool: str, arguments: list[dict[str, Any]], told: list[str]) -> list[Step]:
    def model(request: dict[str, Any]) -> Step:
        told[:] = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        return call(tool, arguments[len(told)]) if len(told) < len(arguments) else say("done")

    return [respond(model) for _ in range(len(arguments) + 1)]


async def converse(workspace: Workspace, config: BettyConfig, turns: int, answer: str = "denied"
                   ) -> tuple[list[str], list[Any], Any]:
    """Ask, and after each denied turn (a denial ends the turn) say "go on", until the model answers."""
    broker = ApprovalBroker(timeout=120)
    session = await open_session(workspace, config, SessionSpec(mode="auto", broker=broker,
                                                                limits=Limits(max_iterations=turns + 2)))
    events: list[Any] = []

    def person(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, answer, "tester")

    session.stream.subscribe(person)
    try:
        reasons = [await session.ask("read my notes")]
        while reasons[-1] == "denied" and len(reasons) <= turns:
            reasons.append(await session.ask("go on"))
        return reasons, events, session
    finally:
        await session.context.close()


@pytest.mark.cluster
def test_in_auto_mode_no_spelling_of_cat_reads_the_file(ssh_profile, secret, tmp_path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    commands = spellings(str(secret)) + [form.format(path=secret) for form in REFUSED_ANYWAY]
    told: list[str] = []
    steps = one_call_per_turn("cluster_run", [{"command": c} for c in [*commands, f"head -n 1 {secret}"]], told)
    with ScriptedLLM(steps) as llm:
        reasons, events, _ = asyncio.run(converse(workspace, config_for(llm, ssh_profile, DENY_CAT),
                                                 len(commands) + 1))
    assert llm.errors == [] and reasons == ["finished"], llm.errors
    for command, text in zip(commands, told):
        assert "refused" in text and SECRET not in text, (command, text)
        if command in spellings(str(secret)):
            assert text.startswith("error: refused by Betty's policy: refused by your rule deny cluster_run(command=cat*)")
    assert SECRET in told[-1], "a command the rule does not cover still reads the file"
    assert not [r for r in llm.requests[:-1] if SECRET in str(r)], "only head's answer, in the last request, has it"
    assert not [e for e in events if e.type == "approval_request"]


@pytest.mark.cluster
def test_an_ask_rule_asks_for_every_spelling_and_a_denied_read_never_runs(ssh_profile, secret, tmp_path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    commands = [f"'tail' -n 1 {secret}", f'"t"ail -n 1 {secret.parent}/sub/../notes.txt', f" tail -n 1 -- {secret}"]
    told: list[str] = []
    with ScriptedLLM(one_call_per_turn("cluster_run", [{"command": c} for c in commands], told)) as llm:
        reasons, events, _ = asyncio.run(converse(
            workspace, config_for(llm, ssh_profile, {"ask": [f"cluster_run(command=tail * {secret})"]}),
            len(commands)))
    assert llm.errors == [] and reasons == ["denied"] * len(commands) + ["finished"], (llm.errors, reasons)
    cards = [e.payload for e in events if e.type == "approval_request"]
    assert len(cards) == len(commands)
    assert {card.preview.text for card in cards} == {f"tail -n 1 {secret}", f"tail -n 1 -- {secret}"}
    assert all("did not approve this call (denied)" in text and SECRET not in text for text in told)


@pytest.mark.cluster
def test_a_helper_is_not_given_a_file_an_ask_rule_covers_without_a_person(ssh_profile, secret, tmp_path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    public = tmp_path / "public.txt"
    public.write_text("nothing to hide\n")
    hidden = f"{tmp_path}//private/sub/../notes.txt"
    rules = {"ask": [f"cluster_run(command=tail -n 80 {secret.parent}/*)"], "deny": ["job_logs(job_id=424242)"]}
    delegations = [
        {"tasks": [{"title": "read notes", "instructions": "summarise", "resources": [{"type": "file",
                                                                                        "location": hidden}]}]},
        {"tasks": [{"title": "read a job", "instructions": "summarise",
                    "resources": [{"type": "job", "location": "00424242"}]}]},
        {"tasks": [{"title": "read public", "instructions": "summarise", "resources": [{"type": "file",
                                                                                         "location": str(public)}]}]},
    ]
    helpers: list[str] = []
    told: list[str] = []

    def model(request: dict[str, Any]) -> Step:
        if not from_betty(request):
            helpers.append(request["messages"][1]["content"])
            return say("read it")
        told[:] = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        return call("delegate_tasks", delegations[len(told)]) if len(told) < len(delegations) else say("done")

    with ScriptedLLM([respond(model) for _ in range(8)]) as llm:
        reasons, events, _ = asyncio.run(converse(workspace, config_for(llm, ssh_profile, rules), 4))
    assert llm.errors == [] and reasons == ["denied", "finished"], (llm.errors, reasons)
    [card] = [e.payload for e in events if e.type == "approval_request"]
    assert card.tool == "delegate_tasks" and f"(it covers the read cluster_run tail -n 80 {secret})" in card.reason
    assert "did not approve this call (denied)" in told[0]
    assert "refused by your rule deny job_logs(job_id=424242)" in told[1]
    assert len(helpers) == 1 and "nothing to hide" in helpers[0], "only the public file reached a helper"
    assert SECRET not in "".join(str(m.get("content")) for r in llm.requests for m in r["messages"])


# ----- a person's own call on the real server ---------------------------------------------------------------------

@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):  # noqa: F811
    config = server_config(llm, ssh_profile, jp_root_dir)
    config["BettyConfig"]["rules"] = {"deny": ["cluster_run(command=cat*)", "cluster_cancel(job_id=123)"]}
    return config


@pytest.mark.cluster
async def test_a_persons_own_call_is_held_to_the_same_rules_however_it_is_spelt(jp_fetch, secret):
    session_id = (await open_panel_session(jp_fetch, mode="auto"))["session_id"]
    for command in spellings(str(secret)):
        outcome = await api(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_run",
                            body={"args": {"command": command}})
        assert not outcome["ok"] and "refused by your rule deny cluster_run(command=cat*)" in outcome["summary"]
        assert SECRET not in str(outcome)
    for job in ("00123", "0123", 123):
        outcome = await api(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_cancel",
                            body={"args": {"job_id": job}})
        assert not outcome["ok"] and "cluster_cancel(job_id=123)" in outcome["summary"], outcome
    read = await api(jp_fetch, "POST", "sessions", session_id, "tools", "cluster_run",
                     body={"args": {"command": f"head -n 1 {secret}"}})
    assert read["ok"] and SECRET in read["summary"]
