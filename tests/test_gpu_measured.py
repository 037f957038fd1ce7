"""Measured GPU peaks: the sampler a job carries (run in bash against a stand-in nvidia-smi), the file it writes read
as numbers whatever else is in it, the page's "measured beside estimated" line, and the person's calibration."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from betty_jupyter.experiments.content import auto_region, status_text
from betty_jupyter.experiments.ledger import Experiment, Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.gpu.measured import (MARKER, MAX_FILE_BYTES, MAX_TORCH_FILE_BYTES, MIN_PAIRS, calibration_for,
                                        calibrations, measured_line, parse_peak_file, parse_torch_file, peak_file,
                                        torch_oom_file, torch_peak_file, torch_words, with_sampler)
from betty_jupyter.gpu.torch_hook import MAX_SUMMARY_BYTES
from betty_jupyter.wiki import init_workspace
from conftest import betty_in_process

FAKE = Path(__file__).parent / "data" / "fake-nvidia-smi"
GUARD = 60.0  # a guard against a hang, not a measurement


def test_the_sampler_goes_after_the_sbatch_lines_and_before_the_first_command() -> None:
    script = "#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n\n# train\n#SBATCH --time=5\npython train.py\n"
    sampled = with_sampler(script)
    lines = sampled.splitlines()
    assert lines[:5] == ["#!/bin/bash", "#SBATCH --gres=gpu:a100:1", "", "# train", "#SBATCH --time=5"]
    assert lines[5].startswith(MARKER)
    assert lines[-1] == "python train.py" and sampled.count("python train.py") == 1
    assert sampled.index("nvidia-smi --query-gpu=memory.used") < sampled.index("python train.py")
    assert with_sampler(sampled) == sampled  # asked twice, sampled once


def run_job(tmp_path: Path, body: str) -> str:
    """Run a script carrying the sampler in bash, with the stand-in nvidia-smi first on PATH; its peak file's text."""
    tools = tmp_path / "bin"
    tools.mkdir()
    shutil.copy(FAKE, tools / "nvidia-smi")
    script = tmp_path / "job.sh"
    script.write_text(with_sampler(f"#!/bin/bash\n#SBATCH --time=1\n{body.format(tools=tools)}"))
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242"}
    job = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, start_new_session=True)
    try:
        assert job.wait(timeout=GUARD) == 0
    finally:
        os.killpg(job.pid, signal.SIGTERM)  # the sampler in the background, as Slurm ends a job's processes
    return (tmp_path / peak_file("4242")).read_text()


def test_the_sampler_keeps_the_highest_use_of_any_gpu(tmp_path: Path) -> None:
    body = ("printf '1200\\n31948\\n' > {tools}/memory-used\n"
            "until grep -q 'peak_mib=31948 ' betty-gpu-peak-4242.txt 2>/dev/null; do sleep 0.1; done\n"
            "printf '500\\n900\\n' > {tools}/memory-used\n"
            "until [ \"$(grep -o 'samples=[0-9]*' betty-gpu-peak-4242.txt)\" != samples=2 ]; do sleep 0.1; done\n")
    text = run_job(tmp_path, body)
    peak = parse_peak_file(text)
    assert peak is not None and peak.peak_mib == 31948 and peak.samples >= 2
    assert text.count("\n") == 1  # rewritten, not appended to


def test_a_job_without_nvidia_smi_leaves_no_peak_file(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(with_sampler("#!/bin/bash\nwait\necho done\n"))  # wait: the sampler has ended
    env = {**os.environ, "PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4243"}
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=GUARD, start_new_session=True)
    assert result.returncode == 0 and result.stdout == "done\n" and "nvidia-smi" not in result.stderr
    assert not (tmp_path / peak_file("4243")).exists()


@pytest.mark.parametrize("text", [
    "", "peak_mib=-5 samples=1\n", "peak_mib=NaN samples=1\n", "peak_mib=1e9 samples=1\n",
    "peak_mib=31948\n", "peak_mib=31948 samples=1 extra\n", "x" * (MAX_FILE_BYTES + 10) + "\npeak_mib=1 samples=1\n",
    "peak_mib=1234567890 samples=1\n", "\x00\x1b[31mpeak_mib=5 samples=1\n",
])
def test_a_peak_file_that_holds_no_peak_line_gives_no_peak(text: str) -> None:
    assert parse_peak_file(text) is None


def test_the_last_peak_line_wins_and_the_rest_is_ignored() -> None:
    peak = parse_peak_file("<script>alert(1)</script>\npeak_mib=100 samples=1\n  peak_mib=31948 samples=40  \n")
    assert peak is not None and (peak.peak_mib, peak.samples) == (31948, 40)
    assert math.isclose(peak.peak_gib, 31.19921875)


def test_measured_beside_estimated_in_words() -> None:
    assert measured_line({"peak_mib": 31948}, {"peak_gib": 29.8}) == \
        "measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)"
    assert measured_line({"peak_mib": 20480}, {"peak_gib": 25.6}) == \
        "measured GPU peak 20.0 GiB (estimated 25.6 GiB, -21.9%)"
    assert measured_line({"peak_mib": 20480}, None) == "measured GPU peak 20.0 GiB"
    assert measured_line({"peak_mib": 20480}, {"peak_gib": "lots"}) == "measured GPU peak 20.0 GiB"
    assert measured_line({"note": "no peak file"}, {"peak_gib": 3.0}) == "GPU peak not measured: no peak file"


def experiment(n: int, method: str, gpus: str, estimated, measured_mib, submitted: str = "2026-11-29T10:00:00",
               **more) -> Experiment:
    return Experiment(slug=f"2026-11-29-run-{n}", job_id=str(1000 + n), cluster="c", submitted=submitted,
                      goal="g", script="#!/bin/bash\n", script_path="/s", resources={"gpus": gpus},
                      gpu_estimate={"peak_gib": estimated, "method": method, "model": "Llama-3.1-8B"},
                      gpu_peak={"sampled": True, "peak_mib": measured_mib}, **more)


def test_the_page_and_the_status_cell_show_the_measured_peak_beside_the_estimate() -> None:
    ended = experiment(1, "lora", "1 × a100", 29.8, 31948)
    line = "measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)"
    assert line in status_text(ended, None, "COMPLETED")
    assert "## GPU memory" in auto_region(ended, None, "COMPLETED") and line in auto_region(ended, None, "COMPLETED")
    waiting = Experiment(**{**asdict(ended), "gpu_peak": {"sampled": True}})
    assert "GPU" not in status_text(waiting, None, "RUNNING") and "## GPU memory" not in auto_region(waiting, None, "RUNNING")


def test_calibration_is_the_median_ratio_per_method_and_gpu_type_with_its_spread() -> None:
    records = [asdict(experiment(n, "lora", "1 × a100", 20.0, mib)) for n, mib in
               enumerate([20480 * 1.10, 20480 * 1.05, 20480 * 0.95, 20480 * 1.20], start=1)]
    records += [asdict(experiment(10, "full", "2 × h100", 60.0, 61440)),
                asdict(experiment(11, "lora", "1 × A100-40GB", 20.0, "a lot")),   # not a number: left out
                asdict(experiment(12, "lora", "1 × a100", float("nan"), 20480)),  # not a number: left out
                asdict(experiment(13, "lora", "", 20.0, 20480)),                  # no GPU type: left out
                {"gpu_estimate": "29 GiB", "gpu_peak": [1], "resources": None}]
    found = calibrations(records)
    lora = calibration_for(found, "lora", "A100-40GB")
    assert lora is not None and lora.usable and len(lora.ratios) == 4
    assert lora.factor == pytest.approx(1.075)
    assert lora.line() == "lora on A100-40GB: × 1.075, median of 4 jobs (ratios 0.950–1.200)"
    full = calibration_for(found, "full", "h100")
    assert full is not None and not full.usable and full.as_dict()["factor"] is None
    assert full.line() == f"full on H100-80GB: not calibrated, 1 measured job with an estimate, {MIN_PAIRS} needed"
    assert calibration_for(found, "qlora", "a100") is None


def test_betty_gpu_calibrate_and_a_calibrated_estimate_say_where_the_correction_comes_from(tmp_path, capsys) -> None:
    init_workspace(tmp_path)
    ledger = Ledger(Workspace.at(tmp_path).ledger_path)
    for n, ratio in enumerate([1.10, 1.05, 0.95], start=1):
        ledger.add(experiment(n, "lora", "1 × a100", 20.0, round(20480 * ratio)))
    code, out, err = betty_in_process(capsys, "gpu", "calibrate", "--dir", str(tmp_path))
    assert code == 0, err
    assert "lora on A100-40GB: × 1.050, median of 3 jobs (ratios 0.950–1.100)" in out
    args = ["gpu", "estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--batch-size", "1", "--seq-len", "512"]
    code, plain, err = betty_in_process(capsys, *args, "--gpu", "a100", "--json")
    code, out, err = betty_in_process(capsys, *args, "--gpu", "a100", "--calibrated", "--dir", str(tmp_path), "--json")
    assert code == 0, err
    peak = json.loads(plain)["peak_gib"]
    calibrated = json.loads(out)["calibrated"]
    assert calibrated["factor"] == pytest.approx(1.05, abs=1e-3) and calibrated["pairs"] == 3
    assert calibrated["peak_gib"] == pytest.approx(peak * calibrated["factor"], abs=1e-3)
    code, out, err = betty_in_process(capsys, *args, "--gpu", "h100", "--calibrated", "--dir", str(tmp_path))
    assert code == 0 and "not calibrated: none of your measured jobs ran lora on H100-80GB" in out
    code, out, err = betty_in_process(capsys, *args, "--calibrated", "--dir", str(tmp_path))
    assert code != 0 and "--calibrated needs --gpu" in err


@pytest.mark.parametrize("content, said", [
    (b"{not json", "cannot read"), (b"[1, 2]", "no peak_gib"), (b"{\"peak\": 3}", "no peak_gib"),
    (b"[" * 5000 + b"]" * 5000, "cannot read"), (b"\xff\xfe{}", "cannot read"),
    (b"{\"peak_gib\": 1, \"x\": \"" + b"a" * 1_000_001 + b"\"}", "no peak_gib"),
])
def test_betty_submit_refuses_a_gpu_estimate_file_that_is_not_an_estimate(tmp_path, capsys, content, said) -> None:
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --time=1\ntrue\n")
    (tmp_path / "estimate.json").write_bytes(content)
    code, out, err = betty_in_process(capsys, "submit", str(tmp_path / "job.sbatch"), "--yes", "--dir", str(tmp_path),
                                      "--gpu-estimate", str(tmp_path / "estimate.json"), "--measure-gpu-peak")
    assert code != 0 and out == ""
    assert err.startswith("betty: error: --gpu-estimate: ") and said in err and len(err.splitlines()) == 1



def test_a_script_that_carries_the_sampler_is_measured_again_when_resubmitted() -> None:
    from betty_jupyter.agent.tools.base import ToolError
    from betty_jupyter.agent.tools.jobs import SubmitArgs, with_sampler_asked

    measured = with_sampler("#!/bin/bash\n#SBATCH --time=1\ntrue\n")
    again = with_sampler_asked(SubmitArgs(script=measured, goal="again"))
    assert again.measure_gpu_peak and again.script == measured
    plain = SubmitArgs(script="#!/bin/bash\ntrue\n", goal="g")
    assert with_sampler_asked(plain) is plain
    assert with_sampler_asked(SubmitArgs(script=measured, goal="g", record=False)).measure_gpu_peak is False
    with pytest.raises(ToolError, match="measure_gpu_peak: .* leave record out"):
        with_sampler_asked(SubmitArgs(script=plain.script, goal="g", measure_gpu_peak=True, record=False))


def test_each_segment_of_a_measured_chain_carries_the_sampler_after_its_signal_line() -> None:
    from types import SimpleNamespace

    from betty_jupyter.agent.tools.jobs import SubmitArgs, with_sampler_asked
    from betty_jupyter.cluster.continuation import ChainPlan
    from betty_jupyter.experiments.chain import segment_script

    script = "#!/bin/bash\n#SBATCH --time=10\n#SBATCH --gres=gpu:a100:1\npython train.py\n"
    for asked in ({"segments": 3}, {"requeue": True}):
        args = with_sampler_asked(SubmitArgs(script=script, goal="g", measure_gpu_peak=True, **asked))
        assert args.measure_gpu_peak and args.script == script  # the segments' script gets it, not the person's
    slurm = SimpleNamespace(work_dir="/home/me/.betty")
    plain = segment_script(slurm, script, ChainPlan(cap=3), "2026-11-29-long")
    measured = segment_script(slurm, script, ChainPlan(cap=3), "2026-11-29-long", measured=True)
    assert MARKER not in plain and measured.count(MARKER) == 1
    lines = measured.splitlines()
    signal = next(n for n, line in enumerate(lines) if line.startswith("#SBATCH --signal"))
    assert lines[signal + 1].startswith(MARKER)
    assert measured.index("nvidia-smi") < measured.index("betty_run_script")
    assert with_sampler(measured) == measured  # a continuation of the chain runs its script as recorded
    checked = subprocess.run(["bash", "-n"], input=measured, capture_output=True, text=True, timeout=GUARD)
    assert checked.returncode == 0, checked.stderr


FAKE_TORCH = Path(__file__).parent / "data" / "fake-torch"
TRAIN = "import torch\nprint('trained')\n"


def run_python_job(tmp_path: Path, body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a measured script (no nvidia-smi on its PATH) whose body runs Python, with the job id 4244."""
    script = tmp_path / "job.sh"
    (tmp_path / "train.py").write_text(TRAIN)
    script.write_text(with_sampler(f"#!/bin/bash\n#SBATCH --time=1\n{body}\nwait\n"))
    run_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "SLURM_JOB_ID": "4244",
               "TMPDIR": str(tmp_path), **(env or {})}
    run_env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(script)], cwd=tmp_path, env=run_env, capture_output=True, text=True,
                          timeout=GUARD, start_new_session=True)


def test_a_measured_job_that_uses_cuda_through_torch_reports_its_own_peaks(tmp_path: Path) -> None:
    ran = run_python_job(tmp_path, f"PYTHONPATH=$PYTHONPATH:{FAKE_TORCH} python train.py\n"
                                   f"PYTHONPATH=$PYTHONPATH:{FAKE_TORCH} python -c 'import torch'\n"
                                   "python -c 'print(2)'")
    assert ran.returncode == 0 and ran.stdout == "trained\n2\n" and ran.stderr == "", ran.stderr
    text = (tmp_path / torch_peak_file("4244")).read_text()
    assert text == ("torch_device=0 allocated_mib=27648 reserved_mib=30208\n"
                    "torch_device=1 allocated_mib=1024 reserved_mib=2048\n") * 2  # each Python of the job
    assert not (tmp_path / torch_oom_file("4244")).exists()
    assert [entry.name for entry in tmp_path.iterdir() if entry.name.startswith("betty-torch-hook")] == []
    torch = parse_torch_file(text)
    assert torch == {"devices": [{"device": 0, "allocated_mib": 27648, "reserved_mib": 30208},
                                 {"device": 1, "allocated_mib": 1024, "reserved_mib": 2048}]}
    assert measured_line({"peak_mib": 31948, "torch": torch}, {"peak_gib": 29.8}) == (
        "measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%) · PyTorch allocated 27.0 GiB (reserved 29.5 GiB) on "
        "the busiest of 2 GPUs")


def test_a_cuda_out_of_memory_error_leaves_a_bounded_memory_summary(tmp_path: Path) -> None:
    (tmp_path / "oom.py").write_text("import torch\nraise torch.cuda.OutOfMemoryError('CUDA out of memory')\n")
    ran = run_python_job(tmp_path, f"PYTHONPATH=$PYTHONPATH:{FAKE_TORCH} python oom.py || echo failed as it would")
    assert ran.stdout == "failed as it would\n" and "OutOfMemoryError: CUDA out of memory" in ran.stderr
    summary = (tmp_path / torch_oom_file("4244")).read_bytes()
    assert summary.startswith(b"== GPU 0 (pid ") and len(summary) == MAX_SUMMARY_BYTES
    torch = parse_torch_file((tmp_path / torch_peak_file("4244")).read_text())
    assert torch is not None and torch["out_of_memory"] is True and len(torch["devices"]) == 2


def test_a_job_without_torch_or_without_cuda_writes_nothing_and_runs_as_written(tmp_path: Path) -> None:
    ran = run_python_job(tmp_path, f"python -c 'import json; print(1)'\n"
                                   f"PYTHONPATH=$PYTHONPATH:{FAKE_TORCH} FAKE_TORCH_CUDA=off python train.py")
    assert ran.returncode == 0 and ran.stdout == "1\ntrained\n" and ran.stderr == "", ran.stderr
    assert not (tmp_path / torch_peak_file("4244")).exists()


def test_the_real_torch_without_cuda_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ran = run_python_job(tmp_path, "python -c 'import torch; print(torch.ones(2).sum().item())'")
    assert ran.returncode == 0 and ran.stdout == "2.0\n" and ran.stderr == "", ran.stderr
    assert not (tmp_path / torch_peak_file("4244")).exists()


def test_the_jobs_own_sitecustomize_still_runs_and_torch_is_not_imported_by_the_hook(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_WAS_HERE = 'yes'\n")
    check = ("import sys, builtins; print(builtins.SITE_WAS_HERE, 'torch' in sys.modules, "
             "sys.modules['sitecustomize'].__file__.startswith(sys.argv[1]))")
    ran = run_python_job(tmp_path, f"PYTHONPATH=$PYTHONPATH:{own}:{FAKE_TORCH} python -c \"{check}\" {own}")
    assert ran.returncode == 0 and ran.stdout == "yes False True\n", ran.stderr
    assert not (tmp_path / torch_peak_file("4244")).exists()


@pytest.mark.parametrize("text", [
    "", "torch_device=0 allocated_mib=-1 reserved_mib=2\n", "torch_device=0 allocated_mib=1 reserved_mib=2 x\n",
    "torch_device=1234 allocated_mib=1 reserved_mib=2\n", "torch_out_of_memory=yes\n",
    "x" * (MAX_TORCH_FILE_BYTES + 10) + "\ntorch_device=0 allocated_mib=1 reserved_mib=2\n",
    "\x1b[31mtorch_device=0 allocated_mib=1 reserved_mib=2\n", "<img src=x>\n",
])
def test_a_torch_file_that_holds_no_peak_line_gives_nothing(text: str) -> None:
    assert parse_torch_file(text) is None


def test_the_page_says_what_pytorch_measured_even_without_nvidia_smi() -> None:
    torch = {"devices": [{"device": 0, "allocated_mib": 2048, "reserved_mib": 3072}], "out_of_memory": True,
             "summary": "betty-torch-oom-1001.txt"}
    ended = experiment(1, "lora", "1 × a100", 29.8, None)
    ended = Experiment(**{**asdict(ended), "gpu_peak": {"sampled": True, "note": "no peak file", "torch": torch}})
    line = ("GPU peak not measured: no peak file · PyTorch allocated 2.0 GiB (reserved 3.0 GiB) · PyTorch ran out of "
            "GPU memory (its memory summary: betty-torch-oom-1001.txt)")
    assert line in status_text(ended, None, "FAILED") and line in auto_region(ended, None, "FAILED")
    assert torch_words({"devices": [{"device": 0, "allocated_mib": "lots", "reserved_mib": 1}]}) == ""


def measured_project(root: Path) -> None:
    """Four measured Llama-3.1-8B lora jobs on an A100 (one with PyTorch's own peak, one whose GPUs are named with
    control characters), a full fine-tune on two H100 and an unmeasured job."""
    ledger = Ledger(Workspace.at(root).ledger_path)
    torch = {"devices": [{"device": 0, "allocated_mib": 18432, "reserved_mib": 19456}]}
    runs = [(1.10, "1 × a100"), (1.05, "1 × a100"), (0.95, "1 × a100"), (1.0, "1 × a100\x1b[2J\nfake line")]
    for n, (ratio, gpus) in enumerate(runs, start=1):
        ran = experiment(n, "lora", gpus, 20.0, round(20480 * ratio), submitted=f"2026-11-2{n}T10:00:00")
        if n == 3:
            ran = Experiment(**{**asdict(ran), "gpu_peak": {**(ran.gpu_peak or {}), "torch": torch}})
        ledger.add(ran)
    ledger.add(experiment(7, "full", "2 × h100", 60.0, 61440))
    ledger.add(Experiment(**{**asdict(experiment(8, "lora", "1 × a100", 20.0, None)), "gpu_peak": {"sampled": True}}))


def test_the_gpu_tools_answer_with_the_persons_measured_peaks_and_calibration(offline_context) -> None:
    from betty_jupyter.agent.tools.catalog import GpuAdvise, GpuEstimate

    args = {"model": "Llama-3.1-8B", "method": "lora", "gpu": "a100"}
    before = asyncio.run(GpuEstimate().execute(offline_context, args))
    assert before.ok and "measured" not in before.data and "your measured" not in before.summary
    measured_project(offline_context.workspace.root)
    outcome = asyncio.run(GpuEstimate().execute(offline_context, args))
    assert outcome.ok, outcome.summary
    measured = outcome.data["measured"]
    assert [run["slug"] for run in measured["runs"]] == [f"2026-11-29-run-{n}" for n in (4, 3, 2, 1)]  # newest first
    assert measured["runs"][1]["torch"]["devices"][0]["allocated_mib"] == 18432
    assert [item["factor"] for item in measured["calibrations"]] == [1.05]
    assert ("your measured Llama-3.1-8B lora job 2026-11-29-run-3 (job 1003, 1 × a100): measured GPU peak 19.0 GiB "
            "(estimated 20.0 GiB, -5.0%) · PyTorch allocated 18.0 GiB (reserved 19.0 GiB)") in outcome.summary
    assert "your calibration: lora on A100-40GB: × 1.050, median of 3 jobs" in outcome.summary
    assert f"calibrated {outcome.data['peak_gib'] * 1.05:.2f} GiB per GPU" in outcome.summary
    assert "\x1b" not in outcome.summary and "\nfake line" not in outcome.summary
    full = asyncio.run(GpuEstimate().execute(offline_context, {**args, "method": "full"}))
    assert [run["slug"] for run in full.data["measured"]["runs"]] == ["2026-11-29-run-7"]
    assert full.data["measured"]["calibrations"] == []  # measured on H100s only
    assert "not calibrated: none of your measured jobs ran full on A100-40GB" in full.data["measured"]["calibrated"]
    other = asyncio.run(GpuEstimate().execute(offline_context, {**args, "model": "Qwen2.5-7B"}))
    assert other.data["measured"]["runs"] == [] and other.data["measured"]["calibrations"][0]["factor"] == 1.05
    advice = asyncio.run(GpuAdvise().execute(offline_context, {**args, "gpu_types": ["a100-40gb"]}))
    assert advice.ok and len(advice.data["measured"]["runs"]) == 4 and "your calibration: lora on A100-40GB" in advice.summary
