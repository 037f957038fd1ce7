"""Efficiency and right-sizing on the dev cluster: jobs that use known amounts (300 MiB touched, 5 s of one core's
time, a sleep) give Betty's figures within a stated tolerance, under hostile names; three runs of one experiment
give a right-sized --mem, approved by a person as their edit of the resubmission card and submitted with it.

Tolerances, and why: MaxRSS is sampled (``JobAcctGatherFrequency=task=2``), so the memory job holds its 300 MiB for
8 s, and its peak is 300 MiB plus the Python interpreter (under 40 MiB). TotalCPU is the CPU time the job's
processes were given: the spinning job spins until its own CPU time reaches 5 s, so TotalCPU is 5 s plus the
interpreter's start (under 1.5 s) however loaded the machine is; its efficiency is then what the formula makes of
Slurm's own Elapsed and AllocCPUS, read here with a separate plain ``sacct``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.cluster.job_efficiency import JobEfficiency, efficiency_table
from betty_jupyter.advisor.rightsizing import right_sized
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.sync import Blocking, run_sync
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.efficiency import efficiency_records
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace
from conftest import betty_in_process

pytestmark = pytest.mark.cluster

MiB = 2**20
GUARD = 240.0  # a guard against a hang, not a measurement
HEADER = "#!/bin/bash\n#SBATCH --chdir={root}\n#SBATCH --time=2\n#SBATCH --output={root}/%j.out\n"
MEMORY = HEADER + "#SBATCH --mem=1G\npython3 -c 'import time; x = bytearray(300 * 2**20); " \
                  "x[::4096] = b\"x\" * len(x[::4096]); time.sleep(8)'\n"
SPIN = HEADER + "#SBATCH --mem=200M\npython3 -c 'import time\nwhile time.process_time() < 5: pass'\n"
SLEEP = HEADER + "#SBATCH --mem=200M\nsleep 6\n"
NAMES = ["a|b|c", "<img src=x onerror=alert(1)>", "$(touch /tmp/pwned)`id`", "tab\there",
         "naïve \"quoted\" & 'single'"]  # accounting keeps Latin-1 (a CJK name comes back as ?s)


@pytest.fixture
def client(ssh_profile):
    transport = ssh_profile.open_transport()
    yield Blocking(SlurmClient(transport, work_dir=ssh_profile.work_dir, readable_roots=ssh_profile.readable_roots))
    run_sync(transport.close())


def measured(client, ids: list[str]) -> dict[str, JobEfficiency]:
    """The jobs' figures once accounting has every one finished with its steps' MaxRSS; fails after the guard."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        found = {job.job_id: job for job in client.efficiency(ids)}
        if set(found) == set(ids) and all(job.memory_peak_bytes is not None for job in found.values()):
            return found
        time.sleep(0.5)
    pytest.fail(f"accounting did not record jobs {ids} with their peaks within the guard")


def plain_sacct(cluster_env: dict[str, str], ident: str) -> tuple[float, int, int, str]:
    """Slurm's own TotalCPU (seconds), ElapsedRaw, AllocCPUS and JobName of the job, read apart from Betty's parser."""
    # Not -X: sacct adds a job's TotalCPU up from its steps, and with allocations alone it says 00:00:00.
    out = subprocess.run(["sacct", "-n", "-P", "-j", ident, "-o", "TotalCPU,ElapsedRaw,AllocCPUS,JobName"],
                         env=cluster_env, capture_output=True, text=True, check=True).stdout
    total, elapsed, cpus, name = out.splitlines()[0].split("|", 3)  # the name last: it may hold a |
    seconds = sum(float(part) * 60**power for power, part in enumerate(reversed(total.split(":"))))  # [HH:]MM:SS.mmm
    return seconds, int(elapsed), int(cpus), name


@pytest.mark.parametrize("name", NAMES)
def test_known_amounts_of_cpu_and_memory_are_reported_within_tolerance(client, ssh_profile, tmp_path, cluster_env,
                                                                       name, capsys, monkeypatch) -> None:
    root = tmp_path
    ids = {kind: client.submit(script.format(root=root), ["--job-name", name])
           for kind, script in (("memory", MEMORY), ("spin", SPIN), ("sleep", SLEEP))}
    found = measured(client, list(ids.values()))
    memory, spin, sleep = found[ids["memory"]], found[ids["spin"]], found[ids["sleep"]]

    assert 300 * MiB <= memory.memory_peak_bytes <= 340 * MiB
    assert memory.memory_requested_bytes == 1024 * MiB
    assert memory.memory_efficiency == pytest.approx(memory.memory_peak_bytes / (1024 * MiB))
    assert spin.memory_requested_bytes == 200 * MiB and spin.memory_peak_bytes < 100 * MiB

    assert 5.0 <= spin.cpu_seconds <= 6.5
    total, elapsed, cpus, stored = plain_sacct(cluster_env, ids["spin"])
    assert {job.name for job in found.values()} == {stored}  # as Slurm stores it: it writes " as `
    assert stored == name.replace('"', "`")
    assert (spin.cpu_seconds, spin.elapsed_seconds, spin.cpus) == (pytest.approx(total, abs=0.01), elapsed, cpus)
    assert spin.cpu_efficiency == pytest.approx(total / (elapsed * cpus))
    assert sleep.cpu_seconds < 0.5 and sleep.cpu_efficiency < 0.1 < spin.cpu_efficiency
    for job in found.values():
        assert job.state == "COMPLETED" and job.time_limit_seconds == 120
        assert job.time_efficiency == pytest.approx(job.elapsed_seconds / 120)
        assert job.gpus == 0

    table = efficiency_table(list(found.values()))
    assert "\t" not in table and "\x1b" not in table
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [ssh_profile.to_dict()]}}))
    monkeypatch.setenv("BETTY_CONFIG", str(config))
    code, out, err = betty_in_process(capsys, "efficiency", *ids.values(), "--plot", str(tmp_path / "eff.png"))
    assert code == 0, err
    assert f"{memory.memory_peak_bytes / MiB:.0f}MiB of 1GiB" in out
    assert (tmp_path / "eff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


SIZED = """#!/bin/bash
#SBATCH --job-name=sized
#SBATCH --chdir={root}
#SBATCH --mem=2G
#SBATCH --time=00:05:00
python3 -c 'import time; x = bytearray(300 * 2**20); x[::4096] = b"x" * len(x[::4096]); time.sleep(5)'
"""


async def until(what: str, check):
    deadline = asyncio.get_running_loop().time() + GUARD
    while asyncio.get_running_loop().time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.2)
    pytest.fail(f"{what} did not happen within the guard")


def test_three_runs_give_a_right_sized_request_that_a_person_approves_as_an_edit(ssh_profile, tmp_path,
                                                                                 cluster_env) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}])
    script = SIZED.format(root=workspace.root)

    async def scenario() -> Experiment:
        assistant = Assistant(workspace, config)
        assistant.watch(min_interval=0.5, max_interval=2.0)
        ledger = Ledger(workspace.ledger_path)
        transport = ssh_profile.open_transport()
        slurm = SlurmClient(transport, work_dir=ssh_profile.work_dir)
        try:
            desk = await assistant.session("test-desk")

            async def submitted(args: dict, answer) -> Experiment:
                call = asyncio.ensure_future(desk.run_tool("cluster_submit", args, "a test"))
                card = (await until("the submit card", assistant.pending))[0]
                answer(card)
                outcome = await call
                assert outcome.ok, outcome.summary
                return outcome.data

            def approve(card) -> None:
                assistant.respond(card.approval_id, "approved", "the researcher")

            runs = [await submitted({"script": script, "goal": f"run {n}"}, approve) for n in range(3)]
            await until("every run to end", lambda: all(ledger.get(run.slug).finished for run in runs))
            last = max(runs, key=lambda run: int(run.job_id))
            page = workspace.wiki / last.page
            await until("the last run's page to show its efficiency", lambda: "## Efficiency" in page.read_text())
            assert "CPU " in page.read_text() and "memory " in page.read_text()

            # The proposal as the watcher draws it when a run ends, drawn again once accounting surely holds
            # every peak (a run's MaxRSS may reach accounting a moment after its end).
            record = await three_runs(slurm, ledger, last)
            assert record["changes"] == {"mem": "512M"}, record["right_sizing"]
            assert "asked 2GiB" in record["right_sizing"] and "over 3 runs: ask 512M" in record["right_sizing"]

            # The agent's tool draws the same proposal and the script it would offer (a tier 1 read: a card, unless
            # the session's mode lets reads run).
            read = asyncio.ensure_future(desk.run_tool("cluster_efficiency", {"experiment": last.slug}, "a test"))
            await until("the read to ask or end", lambda: read.done() or assistant.pending())
            for card in assistant.pending():
                assistant.respond(card.approval_id, "approved", "the researcher")
            outcome = await read
            assert outcome.ok, outcome.summary
            proposal = outcome.data["right_sizing"]
            assert proposal["changes"] == record["changes"] and "ask 512M" in outcome.summary
            assert proposal["script"] == right_sized(last.script, record["changes"])

            def edit(card) -> None:  # the person takes the proposal into the resubmission card and approves it
                edited = {**card.args, "script": proposal["script"]}
                assistant.respond(card.approval_id, "edited", "the researcher", edited)

            again = await submitted({"script": last.script, "goal": "right-sized", "replaces": last.job_id}, edit)
            assert "#SBATCH --mem=512M\n" in again.script and "--mem=2G" not in again.script
            assert again.replaces == {"slug": last.slug, "job_id": last.job_id}
            return again
        finally:
            await transport.close()
            await assistant.close()

    again = asyncio.run(scenario())
    # What Slurm itself recorded for the new job: the request the person approved.
    deadline = time.monotonic() + GUARD
    asked = ""
    while not asked and time.monotonic() < deadline:  # accounting learns of a job a moment after the controller
        asked = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "ReqTRES", "-j", again.job_id], env=cluster_env,
                               capture_output=True, text=True, check=True).stdout.strip()
        time.sleep(0 if asked else 0.5)
    assert "mem=512M" in asked.split(","), asked


async def three_runs(slurm: SlurmClient, ledger: Ledger, last: Experiment) -> dict:
    """The efficiency record of ``last`` once it stands on three runs with a measured peak; fails after the guard."""
    deadline = asyncio.get_running_loop().time() + GUARD
    while asyncio.get_running_loop().time() < deadline:
        runs = ledger.series([last])[last.slug]
        figures = {job.job_id: job for job in await slurm.efficiency([run.job_id for run in runs])}
        record = efficiency_records(ledger, [last], figures).get(last.slug)
        if record is not None and len(record["runs"]) == 3:
            return record
        await asyncio.sleep(0.5)
    pytest.fail("accounting did not hold three measured runs within the guard")
