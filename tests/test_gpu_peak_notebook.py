"""``%%betty submit --gpu-estimate est --measure-gpu-peak`` in a real kernel on the dev cluster: the estimate the cell
kept and the sampler go onto the card and into the record; a name that holds no estimate is one line."""

from __future__ import annotations

import json
import re
import sqlite3
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
    with sqlite3.connect(Workspace.at(project["root"]).ledger_path) as db:
        record = json.loads(db.execute("SELECT record FROM experiments WHERE job_id = ?", (job,)).fetchone()[0])
    assert record["gpu_peak"] == {"sampled": True} and "nvidia-smi --query-gpu=memory.used" in record["script"]
    assert record["gpu_estimate"]["peak_gib"] == pytest.approx(peak, abs=1e-3)
    assert record["gpu_estimate"]["method"] == "lora" and record["gpu_estimate"]["model"] == "Llama-3.1-8B"

    missing = kernel.run(f"%%betty submit --gpu-estimate nothing_here --measure-gpu-peak\n{SCRIPT}")
    assert "--gpu-estimate nothing_here: no estimate in that variable" in one_error_line(missing)
