"""Start estimates on the real dev cluster, made busy on purpose: another user's job holds every A100, so the
scheduler's answers differ by GPU type. Each answer Betty reads is checked against what ``sbatch --test-only``
and ``squeue --start`` themselves print."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Sequence

import pytest

from betty_jupyter.advisor.estimates import Candidate
from betty_jupyter.advisor.placement import PlacementAdvisor, StartCache, advise_script
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.transport.interface import CommandResult
from tests.conftest import run_betty

SCRIPT = ("#!/bin/bash\n#SBATCH --job-name='<img src=x onerror=alert(1)>'\n#SBATCH --partition=gpu\n"
          "#SBATCH --gres=gpu:a100:2\n#SBATCH --time=00:10:00\n#SBATCH --mem=100M\npython train.py\n")
SENTENCE = re.compile(r"Job \d+ to start at (\S+) using \d+ processors on nodes (\S+) in partition (\S+)")


def slurm(dev_cluster: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """A Slurm command as any user of the cluster runs it."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                          env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})


def wait_until(check, what: str, timeout: float = 120):
    """``check()`` until it returns something true; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.5)
    return found


@pytest.fixture
def busy_a100(dev_cluster: dict[str, str], tmp_path: Path):
    """Another user's 30-minute job on every A100 of the node, running; cancelled at the end. Its end time."""
    submitted = slurm(dev_cluster, "sbatch", "--parsable", "--uid=nobody", "--partition=gpu", "--gres=gpu:a100:4",
                      "--time=30", "--mem=100M", "--job-name=<b>hog</b>", "--output=/dev/null", "--chdir=/tmp",
                      "--wrap", "sleep 1800")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    try:
        end = wait_until(lambda: _running_end(dev_cluster, job), f"job {job} running")
        yield end
    finally:
        slurm(dev_cluster, "scancel", job)


def _running_end(dev_cluster: dict[str, str], job: str) -> datetime | None:
    state = slurm(dev_cluster, "squeue", "--noheader", "--jobs", job, "--format", "%T|%e").stdout.strip()
    status, _, end = state.partition("|")
    return datetime.strptime(end, "%Y-%m-%dT%H:%M:%S") if status == "RUNNING" else None


class Counting:
    """A transport that counts the questions that reach the scheduler."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.asked: list[tuple[str, ...]] = []

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        if tuple(argv[:2]) == ("sbatch", "--test-only"):
            self.asked.append(tuple(argv))
        return await self.inner.run(argv, timeout, idempotent=idempotent)

    async def put(self, data: bytes, remote_path: str) -> str:
        return await self.inner.put(data, remote_path)

    async def close(self) -> None:
        await self.inner.close()


def test_estimates_match_what_sbatch_test_only_prints_on_a_busy_cluster(dev_cluster, local_profile, busy_a100):
    transport = Counting(local_profile.open_transport())
    try:
        advice = run_sync(advise_script(transport, SCRIPT, advisor=PlacementAdvisor(transport, cache=StartCache())))
    finally:
        run_sync(transport.close())
    by_label = {estimate.candidate.label: estimate for estimate in advice.estimates}
    assert set(by_label) == {"cpu (a100)", "cpu (h100)", "gpu (a100)", "gpu (h100)"}
    assert advice.scheduler_calls == len(transport.asked) == 4
    for estimate in advice.estimates:
        printed = slurm(dev_cluster, *estimate.argv)
        start, nodes, partition = SENTENCE.search(printed.stderr).groups()
        assert (nodes, partition) == (estimate.nodes, estimate.candidate.partition)
        if estimate.candidate.gpu_type == "a100":  # after the other user's job: exactly when it ends
            assert estimate.start == datetime.strptime(start, "%Y-%m-%dT%H:%M:%S") == busy_a100
        else:  # free now: Slurm's own answer, asked a moment later, is no earlier
            assert estimate.start <= datetime.strptime(start, "%Y-%m-%dT%H:%M:%S") < busy_a100
    assert [estimate.candidate.gpu_type for estimate in advice.estimates] == ["h100", "h100", "a100", "a100"]
    assert re.fullmatch(r"starts now on cpu \(h100\), gpu \(h100\); ~in \d+ min on cpu \(a100\), gpu \(a100\)",
                        advice.summary())


def test_a_rejected_candidate_is_one_line_in_slurm_s_words(dev_cluster, ssh_profile):
    transport = ssh_profile.open_transport()
    script = SbatchScript.parse(SCRIPT)
    try:
        advisor = PlacementAdvisor(transport, cache=StartCache())
        advice = run_sync(advisor.advise(script, [Candidate("nope"), Candidate("gpu", "zzz"),
                                                  Candidate("gpu", "h100", nodes=3)]))
    finally:
        run_sync(transport.close())
    reasons = {estimate.candidate.label: estimate.reason for estimate in advice.estimates}
    assert reasons == {
        "nope": "Slurm refused: invalid partition specified: nope",
        "gpu (zzz)": "Slurm refused: Requested node configuration is not available",
        "gpu (h100, 3 nodes)": "Slurm refused: Requested node configuration is not available",
    }
    for estimate in advice.estimates:  # Slurm itself says the same
        printed = slurm(dev_cluster, *estimate.argv)
        assert printed.returncode != 0 and estimate.reason.removeprefix("Slurm refused: ") in printed.stderr


def test_a_second_advice_within_the_minute_asks_the_scheduler_nothing(dev_cluster, ssh_profile):
    transport = Counting(ssh_profile.open_transport())
    cache = StartCache()
    try:
        first = run_sync(advise_script(transport, SCRIPT, advisor=PlacementAdvisor(transport, cache=cache)))
        asked = len(transport.asked)
        second = run_sync(advise_script(transport, SCRIPT, advisor=PlacementAdvisor(transport, cache=cache)))
    finally:
        run_sync(transport.close())
    assert asked == first.scheduler_calls == len(first.estimates) == 4
    assert len(transport.asked) == asked and second.scheduler_calls == 0
    assert [e.start for e in second.estimates] == [e.start for e in first.estimates]


def test_pending_starts_match_squeue_start(dev_cluster, local_profile, busy_a100, tmp_path):
    waiting = slurm(dev_cluster, "sbatch", "--parsable", "--partition=gpu", "--gres=gpu:a100:4", "--time=5",
                    "--mem=100M", "--job-name=waits\x1b[2J", f"--chdir={tmp_path}", "--output=/dev/null",
                    "--wrap", "true")
    assert waiting.returncode == 0, waiting.stderr
    job = waiting.stdout.strip()
    transport = local_profile.open_transport()
    try:
        def printed_starts() -> str:
            return slurm(dev_cluster, "squeue", "--me", "--start", "--noheader", "--format", "%i|%S").stdout

        def both():
            # the same moment: the scheduler's plan may move while Betty reads, so Slurm says the same before and after
            before = printed_starts()
            ours = run_sync(PlacementAdvisor(transport).pending_starts())
            if printed_starts() != before:
                return None
            printed = dict(line.strip().split("|") for line in before.splitlines())
            return (ours, printed) if printed.get(job, "N/A") != "N/A" else None
        pending, printed = wait_until(both, f"an expected start for job {job}")
    finally:
        run_sync(transport.close())
        slurm(dev_cluster, "scancel", job)
    mine = [row for row in pending if row.job_id == job]
    assert len(mine) == 1 and mine[0].start == datetime.strptime(printed[job], "%Y-%m-%dT%H:%M:%S")
    # Slurm 24.11 says None until the scheduler has looked at the job once, the earlier versions Resources or Priority
    assert mine[0].start >= busy_a100 and mine[0].reason in ("Resources", "Priority", "None")


def test_betty_advise_prints_the_table_and_json(cluster_env, busy_a100, tmp_path):
    script = tmp_path / "train.sbatch"
    script.write_text(SCRIPT.replace("--partition=gpu", "--constraint=fast\x1b[31m"))
    table = run_betty("advise", str(script), env=cluster_env)
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "\\x1b" in table.stdout  # the hostile value is shown, written out
    assert "refused: " in table.stdout
    script.write_text(SCRIPT)
    found = run_betty("advise", str(script), "--json", "--partition", "gpu", env=cluster_env)
    import json

    advice = json.loads(found.stdout)
    assert [row["label"] for row in advice["estimates"]] == ["gpu (h100)", "gpu (a100)"]
    assert advice["estimates"][1]["start"] == busy_a100.strftime("%Y-%m-%dT%H:%M:%S")
    bad = run_betty("advise", str(script), "--partition", "gpu;reboot", env=cluster_env)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "characters Slurm names never use" in bad.stderr


@pytest.fixture
def tool_context(ssh_profile, tmp_path: Path):
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    context = ToolContext.open(ssh_profile, Workspace.at(tmp_path / "project"), "advise-session")
    yield context
    run_sync(context.close())


def test_the_agent_tool_reads_through_the_policy_and_asks_once_a_minute(tool_context, busy_a100):
    from betty_jupyter.agent.tools.catalog import ClusterAdvise
    from betty_jupyter.agent.vocabulary import Tier

    tool = ClusterAdvise()
    assert tool.tier is Tier.ONCE_PER_SESSION
    transport, asked = tool_context.slurm.transport, []
    run = transport.run

    async def counting(argv, *args, **kwargs):
        asked.append(tuple(argv))
        return await run(argv, *args, **kwargs)

    transport.run = counting  # type: ignore[method-assign]
    shown = run_sync(tool.dry_run(tool_context, {"script": SCRIPT, "partitions": ["gpu"]}))
    assert "sbatch --test-only" in shown.text and not asked
    args = {"script": SCRIPT, "partitions": ["gpu"], "pending": True}
    outcome = run_sync(tool.execute(tool_context, args))
    assert outcome.ok and outcome.summary.startswith("starts now on gpu (h100); ~in ")
    assert [row["label"] for row in outcome.data["estimates"]] == ["gpu (h100)", "gpu (a100)"]
    assert outcome.data["estimates"][1]["start"] == busy_a100.strftime("%Y-%m-%dT%H:%M:%S")
    tests_only = [argv for argv in asked if argv[0] == "sbatch"]
    assert len(tests_only) == 2 and all(argv[1] == "--test-only" for argv in tests_only)
    again = run_sync(tool.execute(tool_context, args))
    assert again.data["scheduler_calls"] == 0 and len([a for a in asked if a[0] == "sbatch"]) == 2
    # the GPU estimate's placements: both H100 places start now, the one with more headroom first
    placements = [{"partition": "cpu", "gpu": "H100-80GB", "headroom_gib": 10.0},
                  {"partition": "gpu", "gpu": "H100-80GB", "headroom_gib": 30.0},
                  {"partition": "gpu", "gpu": "A100-40GB", "headroom_gib": 35.0}]
    fitted = run_sync(tool.execute(tool_context, {"script": SCRIPT, "placements": placements}))
    ranked = fitted.data["estimates"]
    assert {(row["label"], row["headroom_gib"]) for row in ranked} == {
        ("gpu (h100)", 30.0), ("cpu (h100)", 10.0), ("gpu (a100)", 35.0)}
    # ranked by the start the scheduler gave (to the minute), then by headroom: whatever else the queue holds
    order = [(row["start"][:16], -row["headroom_gib"]) for row in ranked]
    assert order == sorted(order), ranked
    assert [row["label"] for row in ranked].index("gpu (h100)") < [row["label"] for row in ranked].index("gpu (a100)")
    hostile = run_sync(tool.execute(tool_context, {"script": SCRIPT, "partitions": ["gpu;reboot"]}))
    assert not hostile.ok and "characters Slurm names never use" in hostile.summary and "\n" not in hostile.summary
