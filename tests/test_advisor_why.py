"""Why is it pending? on the real dev cluster: each reason made real, each answer checked against Slurm's own report.

The other user's jobs carry a hostile name that must appear in no answer, nor their user's name.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime

import pytest

from betty_jupyter.advisor.pending import WhyPending, why_pending
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.devcluster.layout import GPUS
from betty_jupyter.errors import SlurmError

from advisor_support import HOSTILE_MARKER, OTHER_USER, BusyCluster, busy, names_job  # noqa: F401 (a fixture)
from conftest import run_betty

pytestmark = pytest.mark.cluster


@pytest.fixture
def why(ssh_profile):
    """``why(job_id)``: Betty's explanation over SSH, through the profile's read policy."""
    transport = ssh_profile.open_transport()
    yield lambda ident: run_sync(why_pending(transport, ssh_profile.policy(), ident))
    run_sync(transport.close())


def shown(explanation: WhyPending) -> str:
    """Everything a face could show of the explanation."""
    return json.dumps(explanation.as_dict()) + "\n".join(explanation.lines())


def assert_private(explanation: WhyPending) -> None:
    text = shown(explanation)
    assert HOSTILE_MARKER not in text and "onerror" not in text
    assert OTHER_USER not in text


def pending_as(busy: BusyCluster, ident: str, reason: str) -> None:
    busy.wait_for(ident, lambda state, said: state == "PENDING" and said.split(",")[0] == reason)


def sprio(busy: BusyCluster, *args: str) -> list[list[str]]:
    return [line.split() for line in busy.run("sprio", "--noheader", *args).splitlines() if line.strip()]


def test_gpus_held_by_another_user_read_as_resources_with_sprio_and_sshare_figures(busy, why):
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Resources")

    def slurms_own() -> tuple[tuple[int, int], dict[str, float]]:
        [[_, priority, fairshare]] = sprio(busy, f"--jobs={mine}", "--format=%i %Y %F")
        rows = [line.split("|") for line in busy.run("sshare", "--noheader", "--parsable2", "-U",
                                                     "--format=Account,User,FairShare").splitlines()]
        return (int(priority), int(fairshare)), {account: float(value) for account, user, value in rows if user}

    # Slurm recomputes fair-share every few minutes: Betty's figures are Slurm's from just before or just after.
    before = slurms_own()
    explanation = why(mine)
    after = slurms_own()
    assert explanation.reason.code == "Resources" and explanation.pending
    assert "resources it asks for are all in use" in explanation.headline()
    row, share = explanation.priority, explanation.share
    assert row is not None and share is not None and share.fairshare is not None
    assert (row.priority, row.factors["fairshare"][1]) in (before[0], after[0])
    assert share.fairshare in (before[1][share.account], after[1][share.account])
    text = "\n".join(explanation.lines())
    assert f"Priority {row.priority:,} in gpu (sprio" in text
    assert f"Your fair-share in account {share.account} is {share.fairshare:.2f} (sshare" in text
    assert_private(explanation)


def scheduler_start(busy: BusyCluster, *request: str) -> datetime:
    """When ``sbatch --test-only`` itself says ``request`` would start."""
    said = subprocess.run(["sbatch", "--test-only", *request, "--wrap=true"], capture_output=True, text=True,
                          env=busy.env, timeout=60).stderr
    start = re.search(r"to start at (\S+)", said)
    assert start, said
    return datetime.fromisoformat(start.group(1))


def h100s_idle(busy: BusyCluster, timeout: float = 300) -> None:
    """Wait until the scheduler says two H100s start now (the cluster is shared: someone's job may hold them)."""
    deadline = time.monotonic() + timeout
    while True:
        wait = (scheduler_start(busy, "--partition=gpu", "--gres=gpu:h100:2", "--time=30") - datetime.now())
        if wait.total_seconds() <= 90:
            return
        assert time.monotonic() < deadline, f"the H100s stayed busy ({wait} to wait)"
        time.sleep(2)


def test_with_every_a100_busy_and_the_h100s_idle_why_names_the_h100s_and_when_they_start(busy, why):
    theirs = busy.submit("--partition=gpu", f"--gres=gpu:a100:{GPUS['a100']}", "--time=60", "--wrap", "sleep 3600",
                         other=True)
    busy.wait_for(theirs, lambda state, reason: state == "RUNNING")
    h100s_idle(busy)
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:2", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Resources")
    explanation = why(mine)
    sooner = explanation.sooner
    # the h100s, wherever the scheduler says they start now (a new job in the job's own partition may queue behind it)
    assert sooner is not None and sooner.candidate.gpu_type == "h100"
    assert "--gres=gpu:h100:2" in sooner.change().split() and sooner.estimate.wait_minutes(datetime.now()) == 0
    assert sooner.estimate.argv[:2] == ("sbatch", "--test-only") and sooner.estimate.start is not None
    slurm = scheduler_start(busy, *sooner.estimate.argv[2:-1])
    assert abs((sooner.estimate.start - slurm).total_seconds()) <= 120  # the scheduler's own answer, asked again
    lines = explanation.lines()
    said = [line for line in lines if "--gres=gpu:h100:2" in line]
    assert said and said[0].startswith(f"What would change it: {sooner.change()} would start it now (")
    assert f"on {sooner.candidate.label}" in said[0] and "(sbatch --test-only)" in said[0]
    assert not any("a smaller request, or a partition with idle resources" in line for line in lines)
    data = explanation.as_dict()["sooner"]
    assert data["gpu_type"] == "h100" and data["change"] == sooner.change() and data["asked"].startswith(
        "sbatch --test-only ")
    assert any(command.startswith("sbatch --test-only ") and "--gres=gpu:h100:2" in command
               for command in explanation.commands)
    assert_private(explanation)


def test_with_every_gpu_busy_why_names_no_placement(busy, why):
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Resources")
    explanation = why(mine)
    assert explanation.sooner is None and explanation.as_dict()["sooner"] is None


def test_a_higher_priority_job_of_another_user_reads_as_priority_counted_not_named(busy, why):
    busy.fill_gpus()
    theirs = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--wrap", "true", other=True)
    busy.run("scontrol", "update", f"JobId={theirs}", "Priority=100000")
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Priority")
    explanation = why(mine)
    assert explanation.reason.code == "Priority"
    rows = {ident: int(priority) for ident, priority in sprio(busy, "--partition=gpu", "--format=%i %Y")}
    higher = [p for ident, p in rows.items() if ident != mine and p > rows[mine]]
    assert explanation.queue is not None and explanation.queue.ahead == len(higher) >= 1
    assert explanation.queue.highest == max(higher) == 100000
    assert "go before it" in "\n".join(explanation.lines()) and "100,000" in "\n".join(explanation.lines())
    assert not names_job(shown(explanation).replace(f'"job_id": "{mine}"', ""), theirs)  # not even their job id
    assert_private(explanation)


def test_a_qos_limit_per_user_reads_as_that_limit(busy, why):
    qos = busy.qos_limit("gres/gpu=1")
    first = busy.submit("--partition=gpu", f"--qos={qos}", "--gres=gpu:a100:1", "--time=30", "--wrap", "sleep 600")
    busy.wait_for(first, lambda state, reason: state == "RUNNING")
    second = busy.submit("--partition=gpu", f"--qos={qos}", "--gres=gpu:a100:1", "--time=30", "--wrap", "true")
    _, reason = busy.wait_for(second, lambda state, said: state == "PENDING" and said.startswith("QOS"))
    explanation = why(second)
    assert explanation.reason.code == reason == "QOSMaxGRESPerUser"
    assert f"the QOS {qos} lets one person use only so many GPUs" in explanation.headline()
    assert f"its QOS is {qos}" in "\n".join(explanation.lines())
    assert f"QOS {qos} limits (sacctmgr show qos): per person gres/gpu=1" in "\n".join(explanation.lines())
    assert explanation.as_dict()["qos_limits"] == [{"limit": "per person", "value": "gres/gpu=1"}]


def test_a_dependency_and_a_hold_read_as_such_with_what_releases_them(busy, why):
    held = busy.submit("--hold", "--wrap", "true")
    waiting = busy.submit(f"--dependency=afterok:{held}", "--wrap", "true")
    pending_as(busy, held, "JobHeldUser")
    pending_as(busy, waiting, "Dependency")
    on_hold, on_dependency = why(held), why(waiting)
    assert on_hold.reason.code == "JobHeldUser"
    assert f"release it with scontrol release {held}." in on_hold.advice
    assert on_dependency.reason.code == "Dependency"
    assert busy.run("squeue", "--noheader", f"--jobs={waiting}", "--format=%E").strip() == on_dependency.job.dependency
    assert f"it depends on afterok:{held}" in "\n".join(on_dependency.lines())


def test_a_reservation_not_started_yet_reads_as_reservation(busy, why):
    name = busy.reservation("now+60minutes", 30)
    mine = busy.submit(f"--reservation={name}", "--time=10", "--wrap", "true")
    pending_as(busy, mine, "Reservation")
    explanation = why(mine)
    assert explanation.reason.code == "Reservation"
    assert f"it asks for reservation {name}" in "\n".join(explanation.lines())


def test_someone_elses_job_and_an_unknown_job_are_one_line_errors(busy, why, cluster_env):
    theirs = busy.submit("--hold", "--wrap", "true", other=True)
    with pytest.raises(SlurmError, match=f"job {theirs} is not one of your jobs in the queue"):
        why(theirs)
    cli = run_betty("why", theirs, env=cluster_env)
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr.strip().splitlines() == [f"betty: error: job {theirs} is not one of your jobs in the queue; "
                                               "Betty explains only your own jobs"]
    assert HOSTILE_MARKER not in cli.stderr and OTHER_USER not in cli.stderr
    unknown = run_betty("why", "999999", env=cluster_env)
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1
    assert "job 999999 is not in the queue" in unknown.stderr


def test_betty_why_prints_the_explanation_and_its_json(busy, cluster_env):
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:h100:1", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Resources")
    text = run_betty("why", mine, env=cluster_env)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"Job {mine} is pending in partition gpu because ")
    assert "(Slurm: Resources)" in text.stdout and "(sprio" in text.stdout
    data = json.loads(run_betty("why", mine, "--json", env=cluster_env).stdout)
    assert data["reason"] == "Resources" and data["request"]["gpu_type"] == "h100" and data["request"]["gpus"] == 1
    assert all(command.split()[0] in ("squeue", "sprio", "sshare", "sinfo") or
               command.startswith("sbatch --test-only ") for command in data["commands"])
    for output in (text.stdout, json.dumps(data)):
        assert HOSTILE_MARKER not in output and OTHER_USER not in output and "\x1b" not in output


@pytest.fixture
def ctx(ssh_profile, tmp_path):
    """A tool context on the dev cluster over SSH, in a fresh project."""
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    context = ToolContext.open(ssh_profile, Workspace.at(tmp_path / "project"), "why-session")
    yield context
    run_sync(context.close())


def test_the_agents_cluster_why_tells_the_model_the_lines_and_refuses_in_one_line(busy, ctx):
    from betty_jupyter.agent.tools import ToolError
    from betty_jupyter.agent.tools.catalog import ClusterWhy

    tool = ClusterWhy()
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:2", "--time=30", "--wrap", "true")
    pending_as(busy, mine, "Resources")
    preview = run_sync(tool.dry_run(ctx, {"job_id": mine}))
    assert preview.kind == "command" and f"--jobs={mine}" in preview.text and "sprio" in preview.text
    outcome = run_sync(tool.execute(ctx, {"job_id": mine}))
    assert outcome.ok and outcome.summary.splitlines()[0].startswith(f"Job {mine} is pending in partition gpu")
    assert outcome.data["reason"] == "Resources" and outcome.data["lines"] == outcome.summary.splitlines()
    assert "sprio --noheader --partition gpu" in outcome.full
    for text in (outcome.summary, outcome.full, json.dumps(outcome.data)):
        assert HOSTILE_MARKER not in text and OTHER_USER not in text
    theirs = busy.submit("--hold", "--wrap", "true", other=True)
    refused = run_sync(tool.execute(ctx, {"job_id": theirs}))
    assert not refused.ok and refused.summary == (
        f"job {theirs} is not one of your jobs in the queue; Betty explains only your own jobs")
    with pytest.raises(ToolError, match="job_id"):
        tool.parse({"job_id": "1; scancel -u someone"})


MOVABLE = """#!/bin/bash
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:2
#SBATCH --time=30
true
"""


def submitted_by_betty(busy: BusyCluster, ctx) -> str:
    """A job Betty recorded (cluster_submit), pending on the A100s another user holds; cancelled when the test ends."""
    from betty_jupyter.agent.tools.catalog import ClusterSubmit

    theirs = busy.submit("--partition=gpu", f"--gres=gpu:a100:{GPUS['a100']}", "--time=60", "--wrap", "sleep 3600",
                         other=True)
    busy.wait_for(theirs, lambda state, reason: state == "RUNNING")
    h100s_idle(busy)
    outcome = run_sync(ClusterSubmit().execute(ctx, {"script": MOVABLE, "goal": "train on two GPUs", "name": "move"}))
    assert outcome.ok, outcome.summary
    mine = outcome.data.job_id
    busy.jobs.append(mine)
    pending_as(busy, mine, "Resources")
    return mine


def test_why_offers_the_move_as_a_resubmission_card_of_the_recorded_script(busy, ctx):
    from betty_jupyter.agent.models import Tier
    from betty_jupyter.agent.tools.catalog import ClusterSubmit, ClusterWhy

    mine = submitted_by_betty(busy, ctx)
    outcome = run_sync(ClusterWhy().execute(ctx, {"job_id": mine}))
    assert outcome.ok, outcome.summary
    sooner = outcome.data["sooner"]
    assert sooner["gpu_type"] == "h100" and "--gres=gpu:h100:2" in sooner["change"].split()
    move = sooner["resubmit"]
    assert move["replaces"] == mine and f"job {mine} stays in the queue until you cancel it" in move["goal"]
    assert f"To offer it: cluster_submit with replaces={mine}" in outcome.summary and move["script"] in outcome.summary
    submit = ClusterSubmit()
    assert submit.tier is Tier.ALWAYS_ASK
    card = run_sync(submit.dry_run(ctx, move))
    assert card.kind == "diff" and card.details["replaces"]["job_id"] == mine
    assert "-#SBATCH --gres=gpu:a100:2" in card.text and "+#SBATCH --gres=gpu:h100:2" in card.text
    changed = [line for line in card.text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert all("--gres=" in line or "--partition=" in line for line in changed), changed
    assert move["script"].replace("gpu:h100:2", "gpu:a100:2").replace(
        f"--partition={sooner['partition']}", "--partition=gpu") == MOVABLE


def test_betty_why_resubmit_shows_the_card_and_without_a_terminal_submits_nothing(busy, ctx, cluster_env):
    mine = submitted_by_betty(busy, ctx)
    project = str(ctx.workspace.root)
    text = run_betty("why", mine, "--dir", project, env=cluster_env)
    assert text.returncode == 0, text.stderr
    assert f"`betty why {mine} --resubmit` resubmits it with " in text.stdout
    assert "To offer it" not in text.stdout  # what the model is told stays the model's
    asked = run_betty("why", mine, "--resubmit", "--dir", project, env=cluster_env)
    assert asked.returncode != 0
    assert "+#SBATCH --gres=gpu:h100:2" in asked.stderr and "-#SBATCH --gres=gpu:a100:2" in asked.stderr
    assert "needs a confirmation; run it at a terminal" in asked.stderr
    from betty_jupyter.experiments.ledger import Ledger

    assert [tracked.experiment.job_id for tracked in Ledger(ctx.workspace.ledger_path).all()] == [mine]
