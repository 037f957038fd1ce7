"""``%betty why JOBID`` in a real kernel against the dev cluster: escaped HTML, one-line errors."""

from __future__ import annotations

import pytest

from advisor_support import HOSTILE_MARKER, OTHER_USER, busy  # noqa: F401 (a fixture)
from kernel_driver import Kernel
from notebook_support import kernel, llm, one_error_line, project  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster


def test_why_shows_the_explanation_as_escaped_html(kernel: Kernel, busy) -> None:
    busy.fill_gpus()
    mine = busy.submit("--partition=gpu", "--gres=gpu:a100:1", "--time=30", "--wrap", "true")
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")
    cell = kernel.run(f"%betty why {mine}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    html = "".join(item.get("text/html", "") for item in cell.result)
    assert html.startswith("<div class='betty-why'><p><b>") and f"Job {mine} is pending in partition gpu" in html
    assert "(Slurm: Resources)" in html and "(sprio, weights from sprio --weights)" in html
    assert "<li>" in html and "<script" not in html and "<img" not in html
    assert HOSTILE_MARKER not in html and OTHER_USER not in html
    data = kernel.run("_.data['reason'], _.data['pending']")
    assert data.text == "('Resources', True)"


def test_why_of_someone_elses_job_or_a_bad_id_is_one_line(kernel: Kernel, busy) -> None:
    theirs = busy.submit("--hold", "--wrap", "true", other=True)
    assert one_error_line(kernel.run(f"%betty why {theirs}")) == (
        f"betty: job {theirs} is not one of your jobs in the queue; Betty explains only your own jobs")
    assert "is not a Slurm job id" in one_error_line(kernel.run("%betty why 12;ls"))
    helped = kernel.run("%betty why --help")
    assert helped.status == "ok" and helped.stdout.startswith("usage: %betty why")
    assert "why [JOBID]" in kernel.run("%betty help").stdout


MOVABLE = """#!/bin/bash
#SBATCH --job-name=nb-move
#SBATCH --partition=gpu
#SBATCH --gres=gpu:a100:2
#SBATCH --time=30
true
"""


def test_why_offers_the_move_of_a_recorded_job_as_a_card(kernel: Kernel, busy, project, ssh_profile) -> None:
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.agent.tools.catalog import ClusterSubmit
    from betty_jupyter.cluster.sync import run_sync
    from betty_jupyter.devcluster.layout import GPUS
    from betty_jupyter.experiments.ledger import Ledger
    from betty_jupyter.experiments.workspace import Workspace

    theirs = busy.submit("--partition=gpu", f"--gres=gpu:a100:{GPUS['a100']}", "--time=60", "--wrap", "sleep 3600",
                         other=True)
    busy.wait_for(theirs, lambda state, reason: state == "RUNNING")
    workspace = Workspace.at(project["root"])
    context = ToolContext.open(ssh_profile, workspace, "why-move")
    try:  # the job Betty recorded in the kernel's project, as %%betty submit would have
        outcome = run_sync(ClusterSubmit().execute(context, {"script": MOVABLE, "goal": "train on two GPUs"}))
    finally:
        run_sync(context.close())
    assert outcome.ok, outcome.summary
    mine = outcome.data.job_id
    busy.jobs.append(mine)
    busy.wait_for(mine, lambda state, reason: state == "PENDING" and reason == "Resources")

    cell = kernel.run(f"%betty why {mine}")
    assert cell.status == "ok" and not cell.errors, cell.stderr
    html = "".join(item.get("text/html", "") for item in [*cell.displays, *cell.result])
    assert "--gres=gpu:h100:2 would start it now (" in html
    root = cell.widgets[0]
    button = kernel.wait_for(lambda: kernel.find(root, "betty-why-move"), what="the move button")[0]
    assert kernel.models[button]["description"].startswith("Resubmit with ")
    assert "--gres=gpu:h100:2" in kernel.models[button]["description"]
    kernel.click(button)
    deny = kernel.wait_for(lambda: kernel.find(root, "betty-deny"), what="the resubmission card")[0]
    shown = kernel.texts(root)
    assert "+#SBATCH --gres=gpu:h100:2" in shown and "-#SBATCH --gres=gpu:a100:2" in shown, shown
    kernel.click(deny)
    kernel.wait_for(lambda: not kernel.find(root, "betty-deny"), what="the decided card")
    assert [tracked.experiment.job_id for tracked in Ledger(workspace.ledger_path).all()] == [mine]
