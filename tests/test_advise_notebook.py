"""``%betty advise`` and a ``%%betty submit`` card's start line in a real kernel against the dev cluster, with every
A100 held by another user's job so the estimates differ by GPU type."""

from __future__ import annotations

import re

from kernel_driver import Kernel
from notebook_support import kernel, llm, one_error_line, project  # noqa: F401 (fixtures)
from test_advise_cluster import busy_a100  # noqa: F401 (the fixture)

SCRIPT = ("#!/bin/bash\n#SBATCH --job-name='<img src=x onerror=alert(1)>'\n#SBATCH --gres=gpu:a100:2\n"
          "#SBATCH --time=00:05:00\n#SBATCH --mem=100M\ntrue")
STARTS = r"starts now on cpu \(h100\), gpu \(h100\); ~in \d+ min on cpu \(a100\), gpu \(a100\)"


def test_advise_shows_the_ranked_table_and_returns_the_advice(kernel: Kernel, busy_a100) -> None:  # noqa: F811
    cell = kernel.run(f"%%betty advise --partition gpu\n{SCRIPT}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    html = kernel.models[cell.widgets[0]]["value"]
    assert "gpu (h100)" in html and "gpu (a100)" in html and "<img" not in html
    labels = kernel.run("[e['label'] for e in _['estimates']], _['scheduler_calls']")
    assert labels.text == "(['gpu (h100)', 'gpu (a100)'], 2)"
    assert "takes a script" in one_error_line(kernel.run("%betty advise"))


def test_a_submission_card_fills_in_its_start_line(kernel: Kernel, busy_a100) -> None:  # noqa: F811
    cell = kernel.run(f"%%betty submit --slug advised --goal 'test the start line'\n{SCRIPT}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the approval card")
    line = kernel.wait_for(lambda: re.search(STARTS, kernel.texts(root)), timeout=90, what="the start line")
    assert line
    kernel.click(kernel.find(root, "betty-deny")[0])
    kernel.wait_for(lambda: "denied" in kernel.texts(root), what="the denial")
