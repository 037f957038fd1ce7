"""A searching sweep moves on by itself in a running server, on the real dev cluster: after each watcher tick its
next round runs in the cluster's desk session, through the one gate: without a card while it stays inside the tasks
the person approved with the sweep, on one card (its points listed) once it would go beyond them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_server_support import (  # noqa: F401  (fixtures)
    call,
    jp_server_config,
    llm,
    sweep_and_approve,
    until,
)

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace

pytestmark = pytest.mark.cluster

GUARD = 600.0
"""Three rounds of four tasks of a few seconds each, on a busy one-node cluster: a guard against a hang."""


async def test_the_watcher_runs_a_round_within_the_approved_tasks_and_asks_beyond_them(jp_fetch, jp_root_dir,
                                                                                      tmp_path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    script = (f"#!/bin/bash\n#SBATCH --job-name=bowl\n#SBATCH --chdir={runs}\n#SBATCH --time=5\n"
              "for step in 1 2 3; do\n"
              "  awk -v lr=\"$lr\" -v l=\"$layers\" -v s=\"$step\" 'BEGIN { x = log(lr) / log(10) + 3;"
              " printf \"step=%d loss=%.6f\\n\", s, x * x + (l - 5) * (l - 5) / 4 + 1 / s }'\n"
              "  sleep 1\ndone\n")
    slug = await sweep_and_approve(jp_fetch, script, ["lr=1e-5..1e-1:log", "layers=2..8"], "the bowl's bottom",
                                   search="bayes", budget=12, batch=4, objective="loss:min", approve_tasks=8)
    ledger = Ledger(Workspace.at(jp_root_dir).ledger_path)

    def rounds() -> list[dict[str, Any]]:
        return list((ledger.get(slug).experiment.sweep or {}).get("rounds") or [])

    async def beyond_card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return next((card for card in pending if card["tool"] == "sweep_round"), None)

    # The rounds that stay inside the 8 approved tasks run with no card; the first that would go beyond asks.
    card = await until("a round asking beyond the approved tasks", beyond_card, guard=GUARD)
    within = rounds()
    ran = [index for step in within for index in step["tasks"]]
    assert within and {step["approved"] for step in within} == {"within the approved budget"}, within
    assert ran == list(range(4, 4 + len(ran))) and ran[-1] < 8, within
    title = re.match(rf"round (\d+) of sweep {re.escape(slug)} on betty-dev: (\d+) new task\(s\), \d+ to stop",
                         card["preview"]["title"])
    assert title and int(title[1]) == len(within) + 2 and 4 + len(ran) + int(title[2]) > 8, card["preview"]["title"]
    assert re.search(rf"task {4 + len(ran)}: lr=\S+ layers=\d", card["preview"]["text"] + str(card["preview"]))
    assert card["tier"] == 2

    await call(jp_fetch, "POST", "approvals", card["approval_id"], body={"decision": "approved"})

    async def carded() -> list[dict[str, Any]]:
        return [step for step in rounds() if step["approved"] == "card"]

    (approved,) = await until("the round running once approved", carded, guard=GUARD)
    assert approved["tasks"][0] == 4 + len(ran) and approved["tasks"][-1] >= 8
    made = [(r.tier, r.decision, r.ok) for r in ActionLog(jp_root_dir).read() if r.tool == "sweep_round"]
    assert made[:len(within) + 1] == [(0, "auto", True)] * len(within) + [(2, "approved", True)], made
