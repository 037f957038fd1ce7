"""A job's card reads its account's use this month from the real dev cluster's accounting (slurmdbd): a fresh
account of this test's own runs one short job, and the card's budget line says exactly what sacct recorded."""

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

from betty_jupyter.agent.models import Preview
from betty_jupyter.agent.site import Budget, SitePolicy
from betty_jupyter.agent.site_gate import budget_fact
from betty_jupyter.agent.tools.base import ToolContext
from betty_jupyter.cluster.account_usage import Cost, month_start, parse_usage, usage_argv
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
    expected = round(cpus * int(elapsed) / 3600, 1)
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
    assert preview.details["budget"] == (f"uses up to 8 CPU-hours; this month {expected:g} of 100 CPU-hours of "
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
