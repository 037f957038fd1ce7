"""A job's card reads its account's use this month from the real dev cluster's accounting (slurmdbd): a fresh
account of this test's own runs one short job, and the card's budget line says exactly what sacct recorded. The
card's cost at the limit is what accounting bills a job that runs to it, and a shorter job's page says it was billed
less."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from conftest import run_betty
from test_advise_cluster import slurm, wait_until

from llm_server import ScriptedLLM, call, say

from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.models import Preview
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.site import Budget, SitePolicy
from betty_jupyter.agent.site_gate import budget_fact
from betty_jupyter.agent.tools.base import ToolContext
from betty_jupyter.cluster.account_usage import Cost, hours_text, job_cost, month_start, parse_usage, usage_argv
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.refresh import write_page
from betty_jupyter.experiments.workspace import Workspace


@pytest.fixture
def account(dev_cluster: dict[str, str]):
    """A fresh Slurm account that only this test's jobs use, removed afterwards."""
    name = f"bud{uuid.uuid4().hex[:8]}"
    made = slurm(dev_cluster, "sacctmgr", "-i", "add", "account", name)
    assert made.returncode == 0, made.stderr
    added = slurm(dev_cluster, "sacctmgr", "-i", "add", "user", "root", f"account={name}")
    assert added.returncode == 0, added.stderr
    yield name
    slurm(dev_cluster, "sacctmgr", "-i", "delete", "user", "root", f"account={name}")
    slurm(dev_cluster, "sacctmgr", "-i", "delete", "account", name)


def test_the_card_says_what_the_account_used_this_month_as_sacct_recorded_it(
        dev_cluster: dict[str, str], local_profile, account: str, tmp_path: Path) -> None:
    submitted = wait_until(lambda: (r := slurm(dev_cluster, "sbatch", "--parsable", f"--account={account}",
                                               "--partition=cpu", "--time=00:05:00", "--cpus-per-task=1",
                                               "--mem=100M", f"--output={tmp_path}/out", "--wrap=sleep 3"))
                           .returncode == 0 and r, "the account reaching the controller", timeout=180)
    job = submitted.stdout.strip().split(";")[0]
    # Waited for as the account's read finds it: accounting may list a job by its id before by its account.
    recorded = wait_until(lambda: (r := slurm(dev_cluster, "sacct", "-a", "-X", "-P", "-n", "-A", account, "-S",
                                              month_start(datetime.now()).strftime("%Y-%m-%dT00:00:00"), "-o",
                                              "State,ElapsedRaw,AllocTRES").stdout.strip())
                          .startswith("COMPLETED") and r, f"job {job} completing in the account's accounting",
                          timeout=180)
    _, elapsed, tres = recorded.split("|")
    cpus = int(tres.split("cpu=")[1].split(",")[0])
    expected = hours_text(cpus * int(elapsed) / 3600)
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    ctx = ToolContext.open(local_profile, Workspace.at(tmp_path / "project"), "budget-test")
    site = SitePolicy(budgets={account: Budget(cpu_hours=100)})
    preview = Preview(kind="script", title="submit", text=f"#!/bin/bash\n#SBATCH --account={account}\n"
                      "#SBATCH --time=02:00:00\n#SBATCH --cpus-per-task=4\nsrun python train.py\n")

    async def read() -> Cost:
        await budget_fact(site, ctx, preview)
        return parse_usage(await ctx.slurm.accounting(ctx.policy().check(usage_argv(account, month_start(
            datetime.now()))).argv))

    used = asyncio.run(read())
    assert used == Cost(gpu_hours=0, cpu_hours=cpus * int(elapsed) / 3600) and used.cpu_hours > 0
    assert preview.details["budget"] == (f"uses up to 8 CPU-hours; this month {expected} of 100 CPU-hours of "
                                         f"account {account} used")


def test_betty_policy_ends_with_the_cost_meter_read_from_accounting(
        dev_cluster: dict[str, str], account: str, tmp_path: Path) -> None:
    site = tmp_path / "policy.json"
    site.write_text(json.dumps({"budgets": {account: {"gpu_hours": 50, "cpu_hours": 1000}}}))
    site.chmod(0o644)
    shown = run_betty("policy", env={**os.environ, **dev_cluster, "BETTY_SITE_POLICY": str(site)})
    assert shown.returncode == 0, shown.stderr
    (row,) = [line for line in shown.stdout.splitlines() if f"budgets.{account}.used" in line]
    assert "0.0 of 50 GPU-hours, 0.0 of 1000 CPU-hours this month" in row and "[sacct on " in row


LIMIT_SECONDS, GPUS = 60, 2
"""Each job's --time=1 and the GPUs it holds: its card says 2 × 1 minute, 0.033 GPU-hours."""


def gpu_job(account: str, folder: Path, body: str) -> str:
    return (f"#!/bin/bash\n#SBATCH --account={account}\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:a100:{GPUS}\n"
            f"#SBATCH --time=1\n#SBATCH --cpus-per-task=1\n#SBATCH --mem=100M\n#SBATCH --output={folder}/%j.out\n"
            f"{body}\n")


def test_the_cards_cost_at_the_limit_is_what_accounting_bills_and_a_shorter_job_is_billed_less(
        dev_cluster: dict[str, str], local_profile, account: str, tmp_path: Path) -> None:
    # Waited for as a held job the controller takes: a new account reaches it a little after sacctmgr made it.
    held = wait_until(lambda: (r := slurm(dev_cluster, "sbatch", "--parsable", "--hold", f"--account={account}",
                                          "--wrap=true")).returncode == 0 and r, "the account reaching the controller",
                      timeout=180)
    slurm(dev_cluster, "scancel", held.stdout.strip().split(";")[0])
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    to_limit, short = gpu_job(account, tmp_path, "sleep 600"), gpu_job(account, tmp_path, "sleep 5")
    broker = ApprovalBroker(timeout=60)
    cards: list = []

    def listener(event) -> None:
        if event.type == "approval_request":
            cards.append(event.payload.preview)
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "ada")

    with ScriptedLLM() as llm:
        llm.add(call("cluster_submit", {"script": to_limit, "goal": "runs to its limit", "name": "to-limit"}),
                call("cluster_submit", {"script": short, "goal": "ends early", "name": "short"}), say("Done."))

        async def turn() -> str:
            config = BettyConfig(
                clusters=[{"name": "devlocal", "transport": "local", "env": {"SLURM_CONF": dev_cluster["SLURM_CONF"]},
                           "readable_roots": [str(tmp_path)], "work_dir": str(tmp_path / "work")}],
                site=SitePolicy(budgets={account: Budget(gpu_hours=100)}),
                llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3})
            session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(listener,)))
            return await session.ask("run both")

        assert asyncio.run(turn()) == "finished", llm.requests[-1]["messages"]
    card_said = job_cost(SbatchScript.parse(to_limit))
    assert card_said == job_cost(SbatchScript.parse(short)) and card_said is not None
    assert card_said.gpu_hours == GPUS * LIMIT_SECONDS / 3600
    said = [{fact.label: fact.text for fact in card.facts}["budget"].split(";")[0] for card in cards]
    assert said == [f"uses up to {hours_text(card_said.gpu_hours)} GPU-hours"] * 2
    experiments = {tracked.experiment.goal: tracked.experiment for tracked in Ledger(workspace.ledger_path).all()}
    jobs = {goal: experiment.job_id for goal, experiment in experiments.items()}

    def billed() -> dict[str, list[str]] | None:
        rows = [line.split("|") for line in slurm(dev_cluster, "sacct", "-X", "-P", "-n", "-j", ",".join(jobs.values()),
                                                   "-o", "JobID,State,ElapsedRaw,TimelimitRaw,AllocTRES")
                .stdout.splitlines()]
        ended = {row[0]: row for row in rows if len(row) == 5 and row[1].split()[0] in ("TIMEOUT", "COMPLETED")}
        return ended if len(ended) == 2 else None

    # A job with --time=1 is ended by the controller's periodic check of limits: up to a minute after it.
    rows = wait_until(billed, f"jobs {', '.join(jobs.values())} ending in accounting", timeout=200)
    full, early = rows[jobs["runs to its limit"]], rows[jobs["ends early"]]
    assert full[1] == "TIMEOUT" and early[1] == "COMPLETED", rows
    for row in (full, early):
        assert row[3] == "1" and f"gres/gpu={GPUS}" in row[4].split(","), row
    full_hours, early_hours = (GPUS * int(row[2]) / 3600 for row in (full, early))
    # Slurm keeps whole seconds and the GPUs the card counted: the job that ran to its limit is billed all of it,
    # and the seconds until the controller's next check of limits ended it; the short one only what it ran.
    past = int(full[2]) - LIMIT_SECONDS
    assert 0 <= past < 2 * LIMIT_SECONDS and full_hours == card_said.gpu_hours + GPUS * past / 3600, full
    assert 0 < early_hours < card_said.gpu_hours, early

    # The page the watcher writes once the jobs ended: what accounting billed, against the card's figure.
    slurm_client = ToolContext.open(local_profile, workspace, "billed").slurm
    ended = asyncio.run(slurm_client.snapshot(jobs.values())).jobs
    late = f"; it ran {past} s past its limit before Slurm ended it" if past else ""
    for goal, hours, after in (("runs to its limit", full_hours, late), ("ends early", early_hours, "")):
        experiment = experiments[goal]
        write_page(workspace, experiment, ended[experiment.job_id])
        page = (workspace.wiki / experiment.page).read_text()
        assert (f"billed: {hours_text(hours).replace('<', '&lt;')} GPU-hours (card said "
                f"{hours_text(card_said.gpu_hours)} at the limit{after}).") in page, page
