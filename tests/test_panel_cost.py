"""Cost, end mail and a second approver in the side panel, in Debian's Chromium against the real dev cluster, under a
site policy that budgets an account, offers Slurm's end mail and sends jobs over 10 minutes to a second approver.

The Jobs tab shows the account's use of its budget, read again when shown after each submission. The person ticks
"e-mail me when it ends" on one submission's card and not on the next: the first job's sbatch carries
``--mail-type=END``, the second's none. A job over the limit, once the person approved it, says whom it waits for
and since when; the approver answers from their own account (``daemon`` here, as ``betty approve`` writes it), and
the card says so; the next such job the approver denies, and the card says it did not run, in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ssh
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, new_project  # noqa: F401 (fixtures)
from panel_support import open_the_panel, page, running_lab, screenshot, screenshot_on_failure  # noqa: F401
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, scancel

from betty_jupyter.agent.second_approver import answer_path, read_request, write_answer

APPROVER, APPROVER_UID, APPROVER_GID = "daemon", 1, 1
"""An account on every Linux machine, standing for the site's approver (the person is root)."""
ACCOUNT = f"cost{uuid.uuid4().hex[:8]}"
"""A budgeted account nobody's jobs use: its use this month is nothing."""


def script(name: str, time: str) -> str:
    return f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time={time}\n#SBATCH --mem=50M\necho done\n"


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A folder the approver's account reaches too (pytest's own are the person's alone); removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="betty-cost-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def spool(shared: Path) -> Path:
    """The site's approval spool: root's, writable by the approver's group, sticky."""
    folder = shared / "spool"
    folder.mkdir()
    os.chown(folder, 0, APPROVER_GID)
    folder.chmod(0o1770)
    return folder


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM,  # noqa: F811
            spool: Path) -> dict[str, Any]:
    made = new_project(tmp_path_factory.mktemp("cost-project"), dev_cluster, llm)
    policy = spool.parent / "policy.json"
    policy.write_text(f'{{"budgets": {{"{ACCOUNT}": {{"gpu_hours": 50, "cpu_hours": 100}}}}, '
                      '"mail": {"end_mail": true}, '
                      f'"limits": {{"wall_time": "00:10:00", "above": "second", "approvers": ["{APPROVER}"], '
                      f'"approval_spool": "{spool}"}}}}')
    policy.chmod(0o644)
    return {**made, "env": {**made["env"], "BETTY_SITE_POLICY": str(policy)}, "policy": policy}


@pytest.fixture(scope="module")
def lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with running_lab(project, tmp_path_factory) as running:
        yield running


def test_the_cost_meter_the_end_mail_choice_and_a_second_approver_in_the_panel(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        spool: Path, shared: Path) -> None:
    meter_reads: list[str] = []
    page.on("request", lambda request: "/betty/api/policy?usage=1" in request.url and meter_reads.append(request.url))
    jobs: list[str] = []
    with screenshot_on_failure(page, "failure", prefix="cost"):
        try:
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-tab-jobs").click()
            account = panel.locator(f'[data-testid="betty-cost-account"][data-account="{ACCOUNT}"]')
            expect(account).to_have_attribute("data-known", "true")
            expect(account.get_by_test_id("betty-cost-words")).to_have_text(
                "0.0 of 50 GPU-hours, 0.0 of 100 CPU-hours used this month")
            screenshot(page, "meter", prefix="cost")
            read_before = len(meter_reads)

            mailed = submit(page, panel, llm, "cost-mail", end_mail=True)
            plain = submit(page, panel, llm, "cost-plain", end_mail=False)
            jobs += [mailed, plain]
            assert "MailType=END" in ssh(dev_cluster, f"scontrol show job -o {mailed}").stdout
            shown = ssh(dev_cluster, f"scontrol show job -o {plain}").stdout
            assert f"JobId={plain}" in shown and "MailType=END" not in shown, shown
            panel.get_by_test_id("betty-tab-jobs").click()
            expect(account.get_by_test_id("betty-cost-words")).to_contain_text("used this month")
            assert len(meter_reads) > read_before, "the meter is read again after the submissions"

            big = second_approval(page, panel, llm, spool, shared, "cost-big", "approved")
            jobs.append(big)
            assert "TimeLimit=00:20:00" in ssh(dev_cluster, f"scontrol show job -o {big}").stdout
            second_approval(page, panel, llm, spool, shared, "cost-denied", "denied")
        finally:
            for job in jobs:
                if job_state(dev_cluster, job):
                    scancel(dev_cluster, job)


def open_card(panel: Locator, llm: ScriptedLLM, name: str, time: str) -> Locator:
    """Ask for a submission; its pending card."""
    llm.add(call("cluster_submit", {"script": script(name, time), "goal": f"run {name}", "record": False}),
            say(f"Done with {name}."))
    panel.get_by_test_id("betty-tab-chat").click()
    panel.get_by_test_id("betty-prompt").fill(f"Submit {name}.")
    panel.get_by_test_id("betty-send").click()
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]').last
    expect(card).to_have_attribute("data-status", "pending")
    expect(card).to_contain_text(f"--job-name={name}")
    return card


def submitted_job(panel: Locator, name: str) -> str:
    """The id the tool row names once the job was submitted, after the model's last word."""
    expect(panel.get_by_test_id("betty-message-assistant").last).to_have_text(f"Done with {name}.")
    row = panel.locator('[data-testid="betty-tool-row"]', has_text="cluster_submit").last
    expect(row).to_have_attribute("data-state", "ok")
    found = re.search(r"submitted job (\d+) on betty-dev", row.inner_text())
    assert found, row.inner_text()
    return found.group(1)


def submit(page: Page, panel: Locator, llm: ScriptedLLM, name: str, end_mail: bool) -> str:
    """A submission approved with "e-mail me when it ends" ticked or not; its job."""
    card = open_card(panel, llm, name, "00:05:00")
    choice = card.get_by_test_id("betty-end-mail")
    expect(choice).not_to_be_checked()
    if end_mail:
        choice.check()
        expect(card.locator(".betty-Preview-line", has_text="#SBATCH --mail-type=END")).to_have_count(1)
        screenshot(page, "end-mail", prefix="cost")
    else:
        expect(card.locator(".betty-Preview-line", has_text="--mail-type")).to_have_count(0)
    card.get_by_test_id("betty-approve").click()
    record = card.get_by_test_id("betty-approval-record")
    expect(record).to_have_attribute("data-decision", "edited" if end_mail else "approved")
    return submitted_job(panel, name)


def answer_as_approver(spool: Path, staging: Path, answer: str) -> None:
    """What the approver's own ``betty approve`` does, as their account: read the request, write the answer as a
    file of theirs (written aside and moved in whole, theirs from the start). Done here in the test's process: a
    sandbox may keep another account from reaching this machine's Python."""
    (path,) = spool.glob("*.request.json")
    request = read_request(path, approver_uid=APPROVER_UID)
    staging.mkdir()
    written = write_answer(staging, request, answer, [APPROVER], approver=APPROVER, approver_uid=APPROVER_UID)
    os.chown(written, APPROVER_UID, APPROVER_GID)
    os.rename(written, answer_path(spool, request.request_id))


def second_approval(page: Page, panel: Locator, llm: ScriptedLLM, spool: Path, shared: Path,
                    name: str, answer: str) -> str:
    """A job over the site's limit: approved by the person, it waits for the approver, who answers ``answer``
    from their own account; its job once approved."""
    card = open_card(panel, llm, name, "00:20:00")
    expect(card).to_contain_text(f"one of {APPROVER} approve it")
    expect(card.get_by_test_id("betty-end-mail")).to_have_count(0)
    card.get_by_test_id("betty-approve").click()
    waiting = card.get_by_test_id("betty-second-approver")
    expect(waiting).to_have_attribute("data-state", "waiting")
    expect(waiting).to_contain_text(re.compile(rf"waiting for a second approver \({APPROVER}\) since \S+"))
    screenshot(page, f"second-{answer}-waiting", prefix="cost")
    answer_as_approver(spool, shared / f"approver-{name}", answer)
    if answer == "approved":
        expect(waiting).to_have_attribute("data-state", "approved")
        expect(waiting).to_contain_text(f"approved by {APPROVER} (second approver)")
        job = submitted_job(panel, name)
    else:
        expect(waiting).to_have_attribute("data-state", "denied")
        expect(waiting).to_contain_text(f"not run: the second approver {APPROVER} denied it")
        job = ""
    screenshot(page, f"second-{answer}", prefix="cost")
    return job
