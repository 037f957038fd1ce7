"""A submission that measures its GPU peak, on the dev cluster: the person approves the card (which says so), the
job runs Betty's sampler against a stand-in ``nvidia-smi`` (the dev cluster has no GPU) that reports what the job
writes, and a Python that imports a stand-in ``torch`` whose CUDA reports set peaks; when it ends the watcher records
both, and the page, the notebook's status and ``cluster_status`` show them beside the estimate."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.gpu.measured import MARKER
from betty_jupyter.wiki import init_workspace

pytestmark = pytest.mark.cluster

GUARD = 240.0  # a guard against a hang, not a measurement
FAKE = Path(__file__).parent / "data" / "fake-nvidia-smi"
FAKE_TORCH = Path(__file__).parent / "data" / "fake-torch"
SCRIPT = """#!/bin/bash
#SBATCH --job-name=measured
#SBATCH --chdir={root}
#SBATCH --time=00:05:00
#SBATCH --mem=100M
#SBATCH --export=PATH={tools}:/usr/bin:/bin
echo 31948 > {tools}/memory-used
until grep -q 'peak_mib=31948 ' "betty-gpu-peak-$SLURM_JOB_ID.txt" 2>/dev/null; do sleep 0.2; done
echo 1024 > {tools}/memory-used
PYTHONPATH=$PYTHONPATH:{torch} python3 -c 'import torch'
echo trained
"""
LINE = ("measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%) · PyTorch allocated 27.0 GiB (reserved 29.5 GiB) on "
        "the busiest of 2 GPUs")


async def until(what: str, check):
    deadline = asyncio.get_running_loop().time() + GUARD
    while asyncio.get_running_loop().time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.2)
    pytest.fail(f"{what} did not happen within the guard")


def test_a_measured_job_records_its_peak_beside_its_estimate(ssh_profile, tmp_path: Path) -> None:
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    tools = tmp_path / "bin"
    tools.mkdir()
    shutil.copy(FAKE, tools / "nvidia-smi")
    config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}])
    args = {"script": SCRIPT.format(root=tmp_path, tools=tools, torch=FAKE_TORCH), "goal": "fine-tune, measured",
            "measure_gpu_peak": True,
            "gpu_estimate": {"peak_gib": 29.8, "model": "Llama-3.1-8B", "method": "lora", "breakdown": {"w": 1.0}}}

    async def scenario() -> tuple[Experiment, str]:
        assistant = Assistant(workspace, config)
        assistant.watch(min_interval=0.5, max_interval=2.0)
        ledger = Ledger(workspace.ledger_path)
        try:
            desk = await assistant.session("test-desk")
            call = asyncio.ensure_future(desk.run_tool("cluster_submit", args, "a test"))
            card = (await until("the submit card", assistant.pending))[0]
            assert card.preview.text.count(MARKER) == 1 and "nvidia-smi --query-gpu=memory.used" in card.preview.text
            assert "its real peak is measured" in card.preview.details["gpu_memory"]
            assert "betty-gpu-peak-<job id>.txt" in card.preview.details["gpu_peak"]
            assistant.respond(card.approval_id, "approved", "the researcher")
            outcome = await call
            assert outcome.ok, outcome.summary
            submitted: Experiment = outcome.data
            assert submitted.gpu_peak == {"sampled": True} and MARKER in submitted.script
            ended = await until("the job's end to be recorded", lambda: (t := ledger.get(submitted.slug)) is not None
                                and t.finished and t.experiment)
            status = asyncio.ensure_future(desk.run_tool("cluster_status", {"job_id": submitted.job_id}, "a test"))
            await until("the status read to ask or end", lambda: status.done() or assistant.pending())
            for pending in assistant.pending():
                assistant.respond(pending.approval_id, "approved", "the researcher")
            read = await status
            assert read.ok, read.summary
            return ended, read.summary
        finally:
            await assistant.close()

    ended, status = asyncio.run(scenario())
    assert (ended.gpu_peak or {}).get("peak_mib") == 31948, ended.gpu_peak
    assert (ended.gpu_peak or {}).get("torch") == {"devices": [
        {"device": 0, "allocated_mib": 27648, "reserved_mib": 30208},
        {"device": 1, "allocated_mib": 1024, "reserved_mib": 2048}]}, ended.gpu_peak
    page = (workspace.wiki / ended.page).read_text()
    assert "## GPU memory" in page and LINE in page
    assert LINE in (Ledger(workspace.ledger_path).notebook_status(ended.slug) or "")
    assert LINE in status
    assert (tmp_path / f"slurm-{ended.job_id}.out").read_text() == "trained\n"  # the sampler said nothing


HOSTILE = """#!/bin/bash
#SBATCH --chdir={root}
#SBATCH --time=00:05:00
#SBATCH --mem=100M
{body}
"""


@pytest.mark.parametrize("body, found", [
    # a link out of the job's folder and the readable roots: not followed
    ('ln -s {outside}/peak.txt "betty-gpu-peak-$SLURM_JOB_ID.txt"', "outside the readable roots"),
    # a file far larger than a peak line: only its first 4 KiB are read, and the line there counts
    ('{{ echo peak_mib=2048 samples=3; head -c 20000000 /dev/zero | tr "\\\\0" x; }} > "betty-gpu-peak-$SLURM_JOB_ID.txt"',
     2048),
    # a file of something else: no peak, said so
    ('printf "\\\\x1b[2J<img src=x>\\\\n" > "betty-gpu-peak-$SLURM_JOB_ID.txt"', "holds no peak_mib=N samples=S line"),
    ("true", "no peak file"),
])
def test_a_peak_file_is_read_only_where_the_job_ran_and_only_as_numbers(ssh_profile, tmp_path: Path,
                                                                          tmp_path_factory, body, found) -> None:
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.experiments.gpu_peak import read_peak

    outside = tmp_path_factory.mktemp("outside")
    (outside / "peak.txt").write_text("peak_mib=999 samples=1\n")
    root = tmp_path / "job"
    root.mkdir()

    async def scenario() -> dict:
        transport = ssh_profile.open_transport()
        try:
            slurm = SlurmClient(transport, work_dir=ssh_profile.work_dir, readable_roots=ssh_profile.readable_roots)
            ident = await slurm.submit(HOSTILE.format(root=root, body=body.format(outside=outside)))
            deadline = asyncio.get_running_loop().time() + GUARD
            while not (job := await slurm.job(ident)).state.finished:
                assert asyncio.get_running_loop().time() < deadline, "the job did not end within the guard"
                await asyncio.sleep(0.3)
            return await read_peak(slurm, job)
        finally:
            await transport.close()

    peak = asyncio.run(scenario())
    if isinstance(found, int):
        assert peak == {"sampled": True, "peak_mib": found, "samples": 3}
    else:
        assert "peak_mib" not in peak and found in peak["note"] and "999" not in peak["note"], peak


SEGMENT = """#!/bin/bash
#SBATCH --chdir={root}
#SBATCH --time=00:05:00
#SBATCH --mem=100M
echo "peak_mib={mib} samples=4" > "betty-gpu-peak-$SLURM_JOB_ID.txt"
{torch}
"""


def test_a_measured_chain_records_each_segments_peak_and_the_highest(ssh_profile, tmp_path: Path) -> None:
    """Two jobs in one folder stand for two segments that each wrote their own peak files; the chain's record reads
    each once, as it ends, and keeps the highest."""
    from dataclasses import replace

    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.experiments.gpu_peak import peak_words, read_segment_peaks

    torch = 'echo "torch_device=0 allocated_mib=28672 reserved_mib=30720" > "betty-torch-peak-$SLURM_JOB_ID.txt"'

    async def scenario() -> tuple[dict, dict | None, dict, str]:
        transport = ssh_profile.open_transport()
        try:
            slurm = SlurmClient(transport, work_dir=ssh_profile.work_dir, readable_roots=ssh_profile.readable_roots)
            first = await slurm.submit(SEGMENT.format(root=tmp_path, mib=30720, torch=""))
            second = await slurm.submit(SEGMENT.format(root=tmp_path, mib=32768, torch=torch))
            deadline = asyncio.get_running_loop().time() + GUARD
            while not all([(await slurm.job(ident)).state.finished for ident in (first, second)]):
                assert asyncio.get_running_loop().time() < deadline, "the jobs did not end within the guard"
                await asyncio.sleep(0.3)
            last = await slurm.job(second)
            chain = {"jobs": [first, second], "segments": [
                {"job_id": first, "why": "time limit → continued"}, {"job_id": second, "why": "running"}]}
            running = Experiment(slug="2026-11-29-long", job_id=first, cluster="betty-dev",
                                 submitted="2026-11-29T10:00:00", goal="g", script="#!/bin/bash\n", script_path="/s",
                                 gpu_estimate={"peak_gib": 30.0}, gpu_peak={"sampled": True}, chain=chain)
            after_first = await read_segment_peaks(slurm, running, last)
            assert after_first is not None
            again = await read_segment_peaks(slurm, replace(running, gpu_peak=after_first), last)
            done = {**chain, "segments": [chain["segments"][0], {"job_id": second, "why": "done"}]}
            ended = replace(running, gpu_peak=after_first, chain=done)
            after_both = await read_segment_peaks(slurm, ended, last)
            assert after_both is not None
            return after_first, again, after_both, peak_words(replace(ended, gpu_peak=after_both))
        finally:
            await transport.close()

    after_first, again, after_both, words = asyncio.run(scenario())
    first, second = list(after_both["segments"])
    assert after_first["peak_mib"] == 30720 and list(after_first["segments"]) == [first]
    assert again is None  # a segment already read is not read again
    assert after_both["peak_mib"] == 32768 and after_both["segment"] == second
    assert after_both["torch"]["devices"][0]["reserved_mib"] == 30720
    assert words == (f"measured GPU peak 32.0 GiB (estimated 30.0 GiB, +6.7%) · PyTorch allocated 28.0 GiB (reserved "
                     f"30.0 GiB) · the highest of 2 segments, in job {second} · per segment: job {first} 30.0 GiB, "
                     f"job {second} 32.0 GiB (PyTorch reserved 30.0 GiB)")
