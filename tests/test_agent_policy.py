"""The approval policy: modes × tiers × the person's rules, and tier 1 remembered per tool per session."""

from __future__ import annotations

import pytest

from betty_jupyter.agent.models import Tier
from betty_jupyter.agent.policy import ApprovalPolicy, Rule, Rules, SessionGrants
from betty_jupyter.errors import ConfigError

T0, T1, T2 = Tier.AUTO, Tier.ONCE_PER_SESSION, Tier.ALWAYS_ASK
NO_RULES: dict[str, list[str]] = {}
ALLOW_ALL = {"allow": ["*"]}
ASK_ALL = {"ask": ["*"]}
DENY_RUN = {"deny": ["cluster_run"], "allow": ["cluster_run"]}
SQUEUE_ONLY = {"allow": ["cluster_run(command=squeue*)"]}

# mode, tier, rules, granted earlier in the session, expected action
TABLE = [
    # off refuses everything, tier 0 included
    ("off", T0, NO_RULES, False, "deny"), ("off", T1, ALLOW_ALL, True, "deny"), ("off", T2, NO_RULES, False, "deny"),
    # propose runs tier 0 only; everything else comes back as a proposal
    ("propose", T0, NO_RULES, False, "run"), ("propose", T1, NO_RULES, True, "propose"),
    ("propose", T1, ALLOW_ALL, False, "propose"), ("propose", T2, ALLOW_ALL, True, "propose"),
    ("propose", T0, ASK_ALL, False, "propose"), ("propose", T0, {"deny": ["*"]}, False, "deny"),
    # confirm: tier 1 asks until approved once in the session, tier 2 always asks
    ("confirm", T0, NO_RULES, False, "run"), ("confirm", T1, NO_RULES, False, "ask"),
    ("confirm", T1, NO_RULES, True, "run"), ("confirm", T2, NO_RULES, False, "ask"),
    ("confirm", T2, NO_RULES, True, "ask"), ("confirm", T1, ALLOW_ALL, False, "run"),
    ("confirm", T2, ALLOW_ALL, True, "ask"), ("confirm", T0, ASK_ALL, False, "ask"),
    ("confirm", T1, ASK_ALL, True, "ask"),
    # auto: tier 0 and 1 run, tier 2 still asks whatever the rules
    ("auto", T0, NO_RULES, False, "run"), ("auto", T1, NO_RULES, False, "run"), ("auto", T2, NO_RULES, False, "ask"),
    ("auto", T2, ALLOW_ALL, True, "ask"), ("auto", T1, ASK_ALL, False, "ask"), ("auto", T0, ASK_ALL, False, "ask"),
    # deny wins over allow, in every mode that runs anything
    ("auto", T0, DENY_RUN, False, "deny"), ("confirm", T1, DENY_RUN, True, "deny"),
    ("auto", T2, DENY_RUN, False, "deny"),
]


@pytest.mark.parametrize("mode, tier, rules, granted, expected", TABLE)
def test_the_decision_table(mode, tier, rules, granted, expected) -> None:
    grants = SessionGrants({"cluster_run"} if granted else set())
    decision = ApprovalPolicy(mode, rules).decide("cluster_run", {"command": "sinfo"}, tier, grants)
    assert decision.action == expected, decision.reason
    assert decision.reason and "\n" not in decision.reason


@pytest.mark.parametrize("command, expected", [
    ("squeue --me", "run"), ("squeue", "run"), ("sinfo", "ask"), ("sacct squeue", "ask"),
])
def test_an_argument_pattern_matches_the_arguments_text(command, expected) -> None:
    policy = ApprovalPolicy("confirm", SQUEUE_ONLY)
    assert policy.decide("cluster_run", {"command": command}, T1, SessionGrants()).action == expected


def test_rules_are_checked_deny_then_ask_then_allow() -> None:
    rules = {"deny": ["wiki_write(page=personas/*)"], "ask": ["wiki_write(page=log.md)"], "allow": ["wiki_*"]}
    policy, grants = ApprovalPolicy("confirm", rules), SessionGrants()
    assert policy.decide("wiki_write", {"page": "personas/betty.md"}, T1, grants).action == "deny"
    asked = policy.decide("wiki_write", {"page": "log.md", "mode": "append"}, T0, grants)
    assert asked.action == "ask" and "wiki_write(page=log.md)" in asked.reason
    allowed = policy.decide("wiki_write", {"page": "index.md"}, T1, grants)
    assert allowed.action == "run" and "allow wiki_*" in allowed.reason
    assert policy.decide("wiki_write", {"page": "howto/new.md"}, T2, grants).action == "ask"
    assert policy.decide("wiki_read", {}, T0, grants).action == "run"


def test_a_missing_or_non_text_argument() -> None:
    policy = ApprovalPolicy("confirm", {"deny": ["cluster_history(job_ids=*12*)"]})
    assert policy.decide("cluster_history", {"job_ids": ["12"]}, T1, SessionGrants()).action == "deny"
    assert policy.decide("cluster_history", {"job_ids": None}, T1, SessionGrants()).action == "ask"
    assert policy.decide("cluster_history", {}, T1, SessionGrants()).action == "ask"


def test_tier_1_is_asked_once_then_remembered_per_tool_per_session() -> None:
    policy, session, other_session = ApprovalPolicy("confirm"), SessionGrants(), SessionGrants()
    assert policy.decide("cluster_queue", {}, T1, session).action == "ask"
    session.remember("cluster_queue", T1, "denied")
    assert policy.decide("cluster_queue", {}, T1, session).action == "ask"
    session.remember("cluster_queue", T1, "approved")
    assert policy.decide("cluster_queue", {}, T1, session).action == "run"
    assert policy.decide("cluster_queue", {"user": "bob"}, 1, session).action == "run"
    assert policy.decide("cluster_history", {}, T1, session).action == "ask"
    assert policy.decide("cluster_queue", {}, T1, other_session).action == "ask"
    session.remember("cluster_submit", T2, "approved_for_session")
    assert policy.decide("cluster_submit", {}, T2, session).action == "ask"
    session.remember("job_logs", T1, "approved_for_session")
    session.remember("cluster_status", T1, "edited")
    assert session.tools == {"cluster_queue", "job_logs", "cluster_status"}
    session.revoke("job_logs")
    assert policy.decide("job_logs", {}, T1, session).action == "ask"


def test_args_may_be_a_pydantic_model() -> None:
    from betty_jupyter.agent.tools.catalog import ClusterRun

    args = ClusterRun().parse({"command": "squeue --me"})
    assert ApprovalPolicy("confirm", SQUEUE_ONLY).decide("cluster_run", args, T1, SessionGrants()).action == "run"


@pytest.mark.parametrize("text", ["", "cluster run", "tool(=x)", "tool(a=b", "tool(a)", "tool(1a=x)"])
def test_malformed_rules_are_config_errors(text) -> None:
    with pytest.raises(ConfigError, match="not 'tool' or 'tool\\(argument=pattern\\)'"):
        Rule.parse(text)


def test_rule_lists_and_modes_are_checked() -> None:
    assert str(Rule.parse(" cluster_run( command = squeue* ) ")) == "cluster_run(command=squeue*)"
    assert Rules.from_config(None) == Rules()
    with pytest.raises(ConfigError, match="unknown lists permit"):
        Rules.from_config({"permit": ["x"]})
    with pytest.raises(ConfigError, match="list of patterns"):
        Rules.from_config({"deny": "cluster_run"})
    with pytest.raises(ConfigError, match="mode 'yolo' is not one of off, propose, confirm, auto"):
        ApprovalPolicy("yolo")
