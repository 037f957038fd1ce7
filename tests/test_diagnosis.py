"""Diagnosing failed jobs: real SbatchScripts, jobs parsed from sacct lines and partitions from sinfo lines by
the real SlurmClient (its transport replays canned output), one case per cause and per correction."""

from __future__ import annotations

import asyncio
import time
from typing import Sequence

import pytest

from betty_jupyter.cluster.delimited import delimiter_in
from betty_jupyter.cluster.jobs import Job
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.transport.interface import CommandResult
from betty_jupyter.errors import ScriptError
from betty_jupyter.experiments.diagnosis import (Diagnosis, EarlierRun, PartitionLimits, diagnose, page_section,
                                                 partition_limits, script_diff)
from betty_jupyter.experiments.progress import Progress, last_progress

SEP = "\x1f"
SINFO = [["cpu*", "up", "0/1/0/1", "0/8/0/8", "23593", "(null)", "infinite", "1"],
         ["gpu", "up", "0/1/0/1", "0/8/0/8", "23593", "gpu:a100:4,gpu:h100:2", "2-00:00:00", "1"],
         ["bigmem", "up", "0/1/0/1", "0/8/0/8", "515000", "(null)", "7-00:00:00", "1"]]
HEAD = "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --chdir=/home/me/run\n"


class CannedCluster:
    """A transport answering sacct and sinfo with fixed lines (squeue and scontrol know nothing)."""

    def __init__(self, sacct: Sequence[Sequence[str]] = ()) -> None:
        self.sacct = sacct

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        lines = {"sacct": self.sacct, "sinfo": SINFO}.get(argv[0], [])
        out = "".join((delimiter_in(argv) or SEP).join(line) + "\n" for line in lines)  # as the command asked
        return CommandResult(tuple(argv), out, "", 0, 1.0)

    async def put(self, data: bytes, remote_path: str) -> str:
        raise AssertionError("nothing is uploaded")

    async def close(self) -> None:
        """Nothing to close."""


def sacct_job(state: str, exit_code: str, req_mem: str = "100M", max_rss: str = "", elapsed: str = "00:00:03",
              limit: str = "00:05:00", partition: str = "cpu", tres: str = "billing=1,cpu=1,mem=100M,node=1") -> Job:
    """A job as the real client reads it from accounting: the job's line and its batch step's line."""
    job = ["4242", "4242", "train", "me", "lab", partition, state, exit_code, "2026-03-02T10:00:00",
           "2026-03-02T10:00:01", "2026-03-02T10:00:04", elapsed, limit, "1", "1", req_mem, "", tres, "node1",
           "betty:abc", "/home/me/run"]
    step = ["4242.batch", "4242.batch", "batch", "", "lab", "", state, exit_code, "2026-03-02T10:00:01",
            "2026-03-02T10:00:01", "2026-03-02T10:00:04", elapsed, "", "1", "1", "", max_rss, "", "node1", "", ""]
    return asyncio.run(SlurmClient(CannedCluster([job, step])).job("4242"))


def partitions() -> list[PartitionLimits]:
    return partition_limits(asyncio.run(SlurmClient(CannedCluster()).partitions()))


def changed_lines(original: str, corrected: str | None) -> list[str]:
    assert corrected is not None
    return [line for line in script_diff(original, corrected).splitlines()[2:] if line[:1] in "+-"]


# ----- host memory ---------------------------------------------------------------------------------------------------
OOM_LOG = ("/var/spool/slurmd/job04242/slurm_script: line 6: 25344 Killed   python3 train.py\n"
           "slurmstepd-node1: error: Detected 1 oom-kill event(s) in StepId=4242.batch. Some of your processes may "
           "have been killed by the cgroup out-of-memory handler.\n")
# The same event as Slurm 24.11 words it.
OOM_LOG_24_11 = ("/var/spool/slurmd/job04242/slurm_script: line 6: 25344 Killed   python3 train.py\n"
                 "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.batch. Some of your processes may "
                 "have been killed by the cgroup out-of-memory handler.\n")


def test_partitions_are_read_as_plain_limits() -> None:
    found = {p.name: p for p in partitions()}
    assert found["cpu"] == PartitionLimits("cpu", 23593 * 2**20, None, {}, True)
    assert (found["gpu"].max_time_minutes, dict(found["gpu"].gpus)) == (2880, {"a100": 4, "h100": 2})


MiB = 2**20
COMPLETED_AT_400M = EarlierRun("4200", "COMPLETED", 400 * MiB, None)


@pytest.mark.parametrize("log", [OOM_LOG, OOM_LOG_24_11], ids=["slurm-22.05", "slurm-24.11"])
def test_out_of_memory_without_a_peak_says_so_and_proposes_no_blind_multiple(log: str) -> None:
    script = HEAD + "#SBATCH --mem=100M\n#SBATCH --time=00:05:00\npython3 train.py --epochs 3\n"
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125"), log, script, partitions())
    assert found.cause == "out_of_memory" and found.unchanged and found.corrected_script is None
    assert found.summary == "the job needed more memory than it asked for (100 MiB); how much it needs is not known"
    assert "state OUT_OF_MEMORY, exit code 0:125, elapsed 00:00:03" in found.evidence
    assert any("Detected 1 oom" in line for line in found.evidence)
    assert found.suggestions[0].startswith("Betty does not know how much memory it needs: accounting recorded no "
                                           "peak (MaxRSS) before the limit killed it, and no earlier run of it says")
    assert "`betty efficiency JOBID`" in found.suggestions[1] and "200M" not in " ".join(found.suggestions)


def test_without_a_peak_the_request_an_earlier_run_completed_with_is_asked_again() -> None:
    script = HEAD + "#SBATCH --mem=100M\npython3 train.py\n"
    earlier = [EarlierRun("4100", "OUT_OF_MEMORY", 50 * MiB, None), COMPLETED_AT_400M,
               EarlierRun("4300", "COMPLETED", 800 * MiB, 390 * MiB)]
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125"), OOM_LOG, script, partitions(), earlier=earlier)
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --mem=100M", "+#SBATCH --mem=400M"]
    assert found.changes == ("--mem 100M → 400M: accounting measured no peak (MaxRSS) before it was killed; job "
                             "4200, an earlier run of it, completed with 400 MiB; asking that",)
    assert "earlier run: job 4200 asked for 400 MiB, COMPLETED, no peak recorded" in found.evidence


def test_without_a_peak_an_earlier_runs_peak_sets_the_request() -> None:
    script = HEAD + "#SBATCH --mem=100M\npython3 train.py\n"
    earlier = [EarlierRun("4100", "FAILED", 500 * MiB, 330 * MiB)]
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", max_rss="98304K"), OOM_LOG, script, partitions(),
                     earlier=earlier)
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --mem=100M", "+#SBATCH --mem=448M"]
    assert found.changes == ("--mem 100M → 448M: its measured peak, 96 MiB (MaxRSS of step batch), did not pass the "
                             "100 MiB it asked for: the limit stopped it before it showed what it needs; job 4100, an "
                             "earlier run of it, peaked at 330 MiB (MaxRSS); asking 448 MiB = that peak + 25%, rounded "
                             "up",)


def test_a_peak_far_over_the_request_sets_the_new_request() -> None:
    script = HEAD + "#SBATCH --mem 2G\npython3 train.py\n"
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", req_mem="2G", max_rss="3250000K"), None, script,
                     partitions())
    assert "peak memory (MaxRSS of step batch) 3.1 GiB of the 2 GiB asked" in found.evidence
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --mem 2G", "+#SBATCH --mem=4G"]
    assert found.changes == ("--mem 2G → 4G: it peaked at 3.1 GiB (MaxRSS of step batch); asking 4 GiB = peak + "
                             "25%, rounded up",)


def test_a_job_killed_by_polling_is_sized_from_its_measured_peak_not_doubled() -> None:
    """Slurm polled 612 MiB in a job that asked 100M (and reports FAILED): 612 MiB + 25% is 765, so 768M."""
    script = HEAD + "#SBATCH --mem=100M\npython3 train.py\n"
    log = ("slurmstepd-node1: error: StepId=4242.batch exceeded memory limit (641728512 > 104857600), being killed\n"
           "slurmstepd-node1: error: Exceeded job memory limit\n")
    found = diagnose(sacct_job("FAILED", "0:9", max_rss="626688K"), log, script, partitions())
    assert found.cause == "out_of_memory"
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --mem=100M", "+#SBATCH --mem=768M"]
    assert found.changes == ("--mem 100M → 768M: it peaked at 612 MiB (MaxRSS of step batch); asking 768 MiB = "
                             "peak + 25%, rounded up",)


def test_a_peak_held_at_the_request_by_a_cgroup_says_it_is_no_measure_and_proposes_nothing() -> None:
    script = HEAD + "#SBATCH --mem=100M\npython3 train.py\n"
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", max_rss="98304K"), OOM_LOG, script, partitions())
    assert found.unchanged and found.changes == ()
    assert found.suggestions[0].startswith("Betty does not know how much memory it needs: its measured peak, 96 MiB, "
                                           "is only where the limit stopped it")


def test_memory_is_capped_at_a_node_and_a_job_that_has_it_all_gets_no_proposal() -> None:
    capped = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", req_mem="20G"), OOM_LOG,
                      HEAD + "#SBATCH --mem=20G\ntrue\n", partitions(),
                      earlier=[EarlierRun("4200", "COMPLETED", 40 * 2**30, None)])
    assert changed_lines(HEAD + "#SBATCH --mem=20G\ntrue\n", capped.corrected_script)[1] == "+#SBATCH --mem=23593M"
    assert capped.changes == ("--mem 20G → 23593M: accounting measured no peak (MaxRSS) before it was killed; job "
                              "4200, an earlier run of it, completed with 40 GiB; asking that — capped at the 23 GiB "
                              "of a node in partition cpu",)
    for mem in ("23593M", "0"):
        full = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", req_mem=mem), OOM_LOG,
                        HEAD + f"#SBATCH --mem={mem}\ntrue\n", partitions())
        assert full.unchanged and full.corrected_script is None and full.changes == ()
        assert "it already asks for all the memory a node of partition cpu has (23 GiB)" in full.suggestions[0]
        assert full.suggestions[1] == "partitions with bigger nodes: bigmem"


def test_memory_per_cpu_grows_per_cpu() -> None:
    script = HEAD + "#SBATCH --cpus-per-task=4\n#SBATCH --mem-per-cpu=1G\npython3 prep.py\n"
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", req_mem="4G"), OOM_LOG, script, partitions(),
                     earlier=[EarlierRun("4200", "COMPLETED", 8 * 2**30, None)])
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --mem-per-cpu=1G", "+#SBATCH --mem-per-cpu=2G"]


def test_a_script_without_mem_gets_one_from_accounting() -> None:
    script = HEAD + "python3 prep.py\n"
    found = diagnose(sacct_job("OUT_OF_MEMORY", "0:125", req_mem="256M"), OOM_LOG, script, partitions(),
                     requested_memory_bytes=256 * 2**20, earlier=[EarlierRun("4200", "COMPLETED", 512 * 2**20, None)])
    assert changed_lines(script, found.corrected_script) == ["+#SBATCH --mem=512M"]
    blind = diagnose(sacct_job("OUT_OF_MEMORY", "0:125"), OOM_LOG, script, partitions())
    assert blind.unchanged and "ask for memory explicitly" in blind.suggestions[0]


def test_a_failed_job_whose_log_says_memory_is_out_of_memory() -> None:
    log = "slurmstepd: error: Job 4242 exceeded memory limit (120000 > 102400), being killed\n" \
          "slurmstepd: error: Exceeded job memory limit\n"
    found = diagnose(sacct_job("FAILED", "9:0"), log, HEAD + "#SBATCH --mem=100M\ntrue\n", partitions())
    assert found.cause == "out_of_memory" and "log: slurmstepd: error: Exceeded job memory limit" in found.evidence


# ----- time ----------------------------------------------------------------------------------------------------------
def test_timeout_doubles_the_time_limit_and_changes_only_that_line() -> None:
    script = HEAD + "#SBATCH --mem=1G\n#SBATCH -t 00:30:00\npython3 train.py\n"
    log = "slurmstepd: error: *** JOB 4242 ON node1 CANCELLED AT 2026-03-02T10:31:02 DUE TO TIME LIMIT ***\n"
    found = diagnose(sacct_job("TIMEOUT", "0:0", elapsed="00:30:09", limit="00:30:00"), log, script, partitions())
    assert found.cause == "timeout"
    assert "it ran 00:30:09 of its 00:30:00 time limit" in found.evidence and any("TIME LIMIT" in e for e in found.evidence)
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH -t 00:30:00", "+#SBATCH --time=01:00:00"]


def test_time_is_capped_at_the_partitions_limit_and_at_the_limit_nothing_is_proposed() -> None:
    script = HEAD + "#SBATCH -p gpu\n#SBATCH --time=1-12:00:00\ntrue\n"
    found = diagnose(sacct_job("TIMEOUT", "0:0", partition="gpu", limit="1-12:00:00"), None, script, partitions())
    assert found.changes == ("--time 1-12:00:00 → 2-00:00:00: it printed no progress Betty can read (such as epoch "
                             "3/10, step 1200/5000 or 45%); asking twice the limit it reached — capped at partition "
                             "gpu's limit",)
    at_limit = HEAD + "#SBATCH -p gpu\n#SBATCH --time=2-00:00:00\ntrue\n"
    stuck = diagnose(sacct_job("TIMEOUT", "0:0", partition="gpu", limit="2-00:00:00"), None, at_limit, partitions())
    assert stuck.unchanged and "whole time limit of partition gpu (2-00:00:00)" in stuck.suggestions[0]
    assert "partitions with a longer limit: cpu, bigmem" in stuck.suggestions


def test_a_script_without_time_gets_twice_the_limit_accounting_recorded() -> None:
    script = HEAD + "sleep 600\n"
    found = diagnose(sacct_job("TIMEOUT", "0:0", limit="00:01:00", elapsed="00:01:05"), None, script, partitions())
    assert changed_lines(script, found.corrected_script) == ["+#SBATCH --time=00:02:00"]


@pytest.mark.parametrize("printed, shown, expected", [
    ("Epoch 3/10 loss=0.41", "epoch 3/10", "01:15:00"),  # 00:18:00 for 3 of 10: 60 min in all, +25% = 75
    ("step=1200/5000 lr=3e-4", "step 1200/5000", "01:45:00"),  # 75 min in all, +25% = 93.75, to the quarter hour
    (" 45%|████▌     | 450/1000 [00:18<00:22]", "45%", "00:50:00"),  # 40 min in all, +25% = 50
    ("progress: 36% done", "36%", "01:15:00"),  # 50 min in all, +25% = 62.5, to the quarter hour
])
def test_timeout_with_printed_progress_asks_for_the_time_the_rest_takes(printed: str, shown: str,
                                                                      expected: str) -> None:
    script = HEAD + "#SBATCH --time=00:18:00\npython3 train.py\n"
    log = f"loading data\n{printed}\nslurmstepd: error: *** JOB 4242 CANCELLED AT x DUE TO TIME LIMIT ***\n"
    found = diagnose(sacct_job("TIMEOUT", "0:0", elapsed="00:18:00", limit="00:18:00"), log, script, partitions())
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --time=00:18:00", f"+#SBATCH --time={expected}"]
    assert f"the last progress it printed: {shown}" in found.evidence
    assert found.changes[0].startswith(f"--time 00:18:00 → {expected}: it printed {shown} after 00:18:00, so the "
                                       "whole run takes about ")
    assert found.changes[0].endswith(f"; asking {expected} = that + 25%, rounded up")


def test_progress_is_read_from_fixed_shapes_and_never_quoted() -> None:
    """A log line is anyone's text: only the numbers are kept, and a bar redrawn with \\r counts its last state."""
    hostile = "epoch <img src=x onerror=alert(1)> 3/10 **bold** [link](javascript:x)\n"
    redrawn = " 10%|█         | 1/10\r 20%|██        | 2/10\r 60%|██████    | 6/10\n"
    assert last_progress([hostile]) is None
    assert last_progress([redrawn, "GPU util 99%, accuracy 87.5%"]) == Progress(0.6, "60%")
    assert last_progress(["epoch 12/10"]) is None and last_progress(["step 0 of 0"]) is None
    assert last_progress(["epoch:" + " " * 100_000 + "3 /" + " " * 100_000]) is None  # read without backtracking
    found = diagnose(sacct_job("TIMEOUT", "0:0", elapsed="00:01:00", limit="00:01:00"), hostile,
                     HEAD + "#SBATCH --time=1\ntrue\n", partitions())
    assert found.changes == ("--time 1 → 00:02:00: it printed no progress Betty can read (such as epoch 3/10, step "
                             "1200/5000 or 45%); asking twice the limit it reached",)


# ----- GPU memory ----------------------------------------------------------------------------------------------------
CUDA_LOG = ("Traceback (most recent call last):\n  File \"train.py\", line 80, in <module>\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 39.39 GiB of which 1.12 GiB is free.\n")
GPU_HEAD = HEAD + "#SBATCH -p gpu\n#SBATCH --gres=gpu:a100:1\n#SBATCH --time=04:00:00\n"
A100 = "billing=1,cpu=1,gres/gpu=1,gres/gpu:a100=1,mem=16G,node=1"
ESTIMATE = {"peak_gib": 31.4, "model": "Llama-3.1-8B", "method": "lora"}


def gpu_failure(script: str, tres: str = A100) -> Diagnosis:
    return diagnose(sacct_job("FAILED", "1:0", partition="gpu", tres=tres), CUDA_LOG, script, partitions(), ESTIMATE)


def test_cuda_oom_turns_on_gradient_checkpointing_when_the_script_turns_it_off() -> None:
    script = GPU_HEAD + "python train.py \\\n  --per_device_train_batch_size 8 \\\n  --gradient_checkpointing False\n"
    found = gpu_failure(script)
    assert found.cause == "cuda_out_of_memory"
    assert any("CUDA out of memory" in line for line in found.evidence)
    assert "it ran on A100-40GB cards (40 GiB each)" in found.evidence
    assert ("Betty's estimate before it was submitted: 31.4 GiB per GPU, under the 40 GiB of a A100-40GB: the job "
            "used more than estimated") in found.evidence
    assert changed_lines(script, found.corrected_script) == ["-  --gradient_checkpointing False",
                                                             "+  --gradient_checkpointing True"]
    assert found.changes == ("gradient checkpointing False → True (gradient_checkpointing)",)


def test_cuda_oom_halves_the_micro_batch_keeping_the_effective_batch() -> None:
    script = GPU_HEAD + "tune run lora_finetune batch_size=4 micro_batch_size=8 gradient_accumulation_steps=2\n"
    found = gpu_failure(script)
    assert changed_lines(script, found.corrected_script) == [
        "-tune run lora_finetune batch_size=4 micro_batch_size=8 gradient_accumulation_steps=2",
        "+tune run lora_finetune batch_size=4 micro_batch_size=4 gradient_accumulation_steps=4"]
    assert "the same effective batch" in found.changes[0]


def test_cuda_oom_without_arguments_betty_knows_moves_to_a_bigger_gpu() -> None:
    script = GPU_HEAD + "python train.py --config run.yaml --batch-size 8\n"
    found = gpu_failure(script)
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --gres=gpu:a100:1", "+#SBATCH --gres=gpu:h100:1"]
    assert found.changes == ("GPU A100-40GB (40 GiB) → H100-80GB (80 GiB): --gres gpu:a100:1 → gpu:h100:1",)
    assert any("gradient (activation) checkpointing" in tip for tip in found.suggestions)


def test_cuda_oom_moves_partition_when_the_bigger_gpu_lives_elsewhere() -> None:
    script = HEAD + "#SBATCH -p cpu\n#SBATCH --gpus-per-node=a100:2\npython train.py\n"
    offers = [PartitionLimits("small", gpus={"a100": 4}, default=True), PartitionLimits("big", gpus={"h100": 2})]
    found = diagnose(sacct_job("FAILED", "1:0", partition="small", tres=A100), CUDA_LOG, script, offers)
    assert changed_lines(script, found.corrected_script) == [
        "-#SBATCH -p cpu", "-#SBATCH --gpus-per-node=a100:2", "+#SBATCH --partition=big",
        "+#SBATCH --gpus-per-node=h100:2"]


def test_cuda_oom_on_the_biggest_gpu_with_nothing_to_recognise_proposes_nothing() -> None:
    script = HEAD + "#SBATCH -p gpu\n#SBATCH --gres=gpu:h100:1\npython train.py\n"
    found = gpu_failure(script, tres="billing=1,cpu=1,gres/gpu=1,gres/gpu:h100=1,mem=16G,node=1")
    assert found.unchanged and found.changes == ()
    assert any("betty gpu advise" in tip for tip in found.suggestions)


def test_an_argument_passed_twice_is_not_touched() -> None:
    script = GPU_HEAD + "python a.py --gradient_checkpointing false\npython b.py --gradient_checkpointing false\n"
    found = gpu_failure(script)
    assert changed_lines(script, found.corrected_script) == ["-#SBATCH --gres=gpu:a100:1", "+#SBATCH --gres=gpu:h100:1"]


# ----- anything else ---------------------------------------------------------------------------------------------------
def test_another_failure_is_named_with_its_error_and_nothing_is_proposed() -> None:
    log = "Traceback (most recent call last):\n  File \"train.py\", line 1\nModuleNotFoundError: No module named 'peft'\n"
    found = diagnose(sacct_job("FAILED", "1:0"), log, HEAD + "#SBATCH --mem=1G\npython train.py\n", partitions())
    assert found.cause == "failed_other" and found.unchanged
    assert "log" not in found.evidence[0] and "ModuleNotFoundError: No module named 'peft'" in found.evidence
    assert found.summary.startswith("the job failed with exit code 1:0")


def test_an_unreadable_script_is_one_line() -> None:
    with pytest.raises(ScriptError, match="line 1: a batch script must start with a shebang"):
        diagnose(sacct_job("FAILED", "1:0"), None, "python train.py\n", partitions())


# ----- the page --------------------------------------------------------------------------------------------------------
def test_the_page_section_shows_cause_evidence_diff_and_where_the_card_is() -> None:
    script = HEAD + "#SBATCH --mem=100M\necho '```' '<!-- betty:auto-end -->'\n"
    record = diagnose(sacct_job("OUT_OF_MEMORY", "0:125"), OOM_LOG, script, partitions(),
                      earlier=[EarlierRun("4200", "COMPLETED", 200 * 2**20, None)]).as_record(script)
    record["resubmission"] = {"state": "proposed", "task": "job babysitter: job 4242"}
    text = page_section(record)
    assert text.startswith("## Diagnosis\n\n**Out of memory**: the job needed more memory than it asked for (100 MiB).")
    assert "- --mem 100M → 200M: accounting measured no peak" in text and "````diff\n" in text
    assert "-#SBATCH --mem=100M\n+#SBATCH --mem=200M" in text
    assert "the card “job babysitter: job 4242”" in text and "betty:auto-" not in text
    record["resubmission"] = {"state": "submitted", "job_id": "4243", "slug": "2026-03-02-train-retry",
                              "approver": "ada"}
    assert "Resubmitted as job 4243: [2026-03-02-train-retry](2026-03-02-train-retry.md), approved by ada." in \
        page_section(record)
    assert time.strftime("%Y-%m-%d") in record["diagnosed"]
