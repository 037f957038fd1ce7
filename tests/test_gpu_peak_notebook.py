"""``%%betty submit --gpu-estimate est --measure-gpu-peak`` in a real kernel on the dev cluster: the estimate the cell
kept and the sampler go onto the card and into the record; a name that holds no estimate is one line."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from typing import Any

import pytest

from betty_jupyter.experiments.workspace import Workspace
from kernel_driver import Kernel
from notebook_support import kernel, llm, one_error_line, project  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster

SCRIPT = """#!/bin/bash
#SBATCH --job-name=measured-cell
#SBATCH --time=00:05:00
#SBATCH --mem=100M
echo trained
"""


def test_a_cell_submits_with_its_kept_estimate_and_the_peak_measured(kernel: Kernel, project: dict[str, Any]) -> None:
    kept = kernel.run("est = %betty gpu --model Llama-3.1-8B --method lora --batch-size 2\nround(est.peak_gib, 3)")
    assert kept.status == "ok", kept.stderr
    peak = float(kept.text)
    cell = kernel.run(f"%%betty submit --slug measured-cell --gpu-estimate est --measure-gpu-peak\n{SCRIPT}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    approve = kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the approval card")[0]
    shown = kernel.texts(root)
    assert "its real peak is measured" in shown and f"{peak:.1f} GiB per GPU" in shown
    kernel.click(approve)
    job = kernel.wait_for(lambda: re.search(r"submitted job (\d+)", kernel.texts(root)), what="the job id").group(1)
    with closing(sqlite3.connect(Workspace.at(project["root"]).ledger_path)) as db:
        record = json.loads(db.execute("SELECT record FROM experiments WHERE job_id = ?", (job,)).fetchone()[0])
    assert record["gpu_peak"] == {"sampled": True} and "nvidia-smi --query-gpu=memory.used" in record["script"]
    assert record["gpu_estimate"]["peak_gib"] == pytest.approx(peak, abs=1e-3)
    assert record["gpu_estimate"]["method"] == "lora" and record["gpu_estimate"]["model"] == "Llama-3.1-8B"

    missing = kernel.run(f"%%betty submit --gpu-estimate nothing_here --measure-gpu-peak\n{SCRIPT}")
    assert "--gpu-estimate nothing_here: no estimate in that variable" in one_error_line(missing)


def add_ended(root: Any, experiment: Any) -> None:
    """Record ``experiment`` in the project at ``root`` as a job that ended long ago (no watcher reads it again)."""
    from dataclasses import asdict

    from betty_jupyter.experiments.ledger import Ledger

    Ledger(Workspace.at(root).ledger_path).get(experiment.slug)  # the ledger's tables, made when missing
    with closing(sqlite3.connect(Workspace.at(root).ledger_path)) as db, db:  # one statement: no watcher sees it
        db.execute("INSERT INTO experiments (slug, cluster, job_id, record, updated, finished) VALUES (?, ?, ?, ?, 0, 1)",
                   (experiment.slug, experiment.cluster, experiment.job_id, json.dumps(asdict(experiment))))


def test_betty_gpu_shows_the_persons_measured_peaks_and_calibration_beside_the_estimate(
        kernel: Kernel, project: dict[str, Any]) -> None:
    from betty_jupyter.experiments.ledger import Experiment

    plain = kernel.run("%betty gpu --model Llama-3.2-1B --method qlora --batch-size 2")
    assert plain.status == "ok" and not plain.stderr and "GiB per GPU" in plain.plain
    assert "measured" not in plain.plain  # nothing measured: the estimate alone
    torch = {"devices": [{"device": 0, "allocated_mib": 3072, "reserved_mib": 4096}]}
    for n, ratio in enumerate((1.10, 1.00, 1.20), start=1):
        add_ended(project["root"], Experiment(
            slug=f"2026-11-2{n}-tiny", job_id=str(900 + n), cluster="betty-dev", submitted=f"2026-11-2{n}T10:00:00",
            goal="g", script="#!/bin/bash\n", script_path="/s", resources={"gpus": "1 × l40s"},
            gpu_estimate={"peak_gib": 4.0, "method": "qlora", "model": "Llama-3.2-1B"},
            gpu_peak={"sampled": True, "peak_mib": round(4096 * ratio), "torch": torch}))
    cell = kernel.run("%betty gpu --model Llama-3.2-1B --method qlora --batch-size 2 --gpu l40s")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    shown = cell.plain
    assert ("your measured Llama-3.2-1B qlora job 2026-11-23-tiny (job 903, 1 × l40s): measured GPU peak 4.8 GiB "
            "(estimated 4.0 GiB, +20.0%) · PyTorch allocated 3.0 GiB (reserved 4.0 GiB)") in shown
    assert "your calibration: qlora on L40S: × 1.100, median of 3 jobs (ratios 1.000–1.200)" in shown
    assert "calibrated " in shown and " GiB per GPU: your qlora on L40S" in shown
    without_gpu = kernel.run("%betty gpu --model Llama-3.2-1B --method qlora --batch-size 2")
    assert "your calibration: qlora on L40S" in without_gpu.plain and "GiB per GPU" in without_gpu.plain
