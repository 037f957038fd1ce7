"""A sweep on the real dev cluster, run as a person runs it: `betty sweep` over SSH, one card, one job array, one
experiment that the watcher ends when all its tasks have."""

from __future__ import annotations

import getpass
import json
import subprocess
import time

import pytest

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.experiments.workspace import Workspace
from test_cli_cluster import betty, betty_env  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster

HOSTILE = "it's $(touch PWNED) `id`"


def test_a_three_by_three_grid_is_one_array_of_nine_tasks_each_with_its_point(betty_env, dev_cluster, tmp_path):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    runs = tmp_path / "runs"
    runs.mkdir()
    script = tmp_path / "train.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name=lr-sweep\n#SBATCH --chdir={runs}\n#SBATCH --time=5\n"
                      "printf 'lr=%s seed=%s tag=%s\\n' \"$lr\" \"$seed\" \"$tag\"\n"
                      "if [ \"$lr\" = 1e-3 ] && [ \"$seed\" = 2 ]; then echo 'diverged' >&2; exit 4; fi\n")
    done = betty(betty_env, "sweep", str(script), "--grid", "lr=1e-4,3e-4,1e-3", "seed=0,1,2", f"tag={HOSTILE}",
                 "--at-once", "3", "--yes", "--json", "--dir", str(project), "--goal", "which learning rate")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    array = answer["job_id"]
    # One card, as the person saw it: the whole array, its size, every point.
    [record] = ActionLog(project).read()
    assert (record.tool, record.decision, record.approver, record.ok) == (
        "cluster_sweep", "approved", f"{getpass.getuser()} (betty sweep)", True)
    assert "9 tasks, at most 3 at once" in record.preview.title and "#SBATCH --array=0-8%3" in record.preview.text
    # One job array in Slurm, throttled as asked.
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    shown = subprocess.run(["scontrol", "-o", "show", "job", array], capture_output=True, text=True, env=env).stdout
    assert "ArrayTaskThrottle=3" in shown
    # The watcher ends the experiment once every task has: 8 completed, the one that exited 4 failed.
    deadline = time.monotonic() + 300  # a guard against a hang on a busy machine, not a measurement
    while "FAILED" not in (watched := betty(betty_env, "watch", "--once", "--dir", str(project))).stdout:
        assert time.monotonic() < deadline, watched.stdout + watched.stderr
        time.sleep(1)
    page = (project / "wiki" / answer["page"]).read_text()
    assert "9 tasks: 8 COMPLETED, 1 FAILED" in page and "exit code 4:0" in page and "diverged" in page
    assert "\n| 8 | 1e-3 | 2 | it's \\$(touch PWNED) \\`id\\` |\n" in page  # each task's point, as text
    # Each task ran with its own point, the hostile value as plain text and nothing run from it.
    for index, (lr, seed) in enumerate((lr, seed) for lr in ("1e-4", "3e-4", "1e-3") for seed in "012"):
        log = (runs / f"slurm-{array}_{index}.out").read_text()
        assert f"betty sweep: task {index}: lr={lr} seed={seed} tag={HOSTILE}\n" in log
        assert f"lr={lr} seed={seed} tag={HOSTILE}\n" in log.splitlines(keepends=True)
    assert not (runs / "PWNED").exists()
    # Slurm's own record agrees, once accounting has caught up with every task (it records them one by one).
    expected = sorted([f"{array}_{n}|COMPLETED" for n in range(8)] + [f"{array}_8|FAILED"])
    while (tasks := sorted(subprocess.run(["sacct", "-n", "-X", "-P", "-j", array, "-o", "JobID,State"],
                                          capture_output=True, text=True, env=env).stdout.split())) != expected:
        assert time.monotonic() < deadline, tasks
        time.sleep(0.5)


def test_a_sweep_that_cannot_run_is_refused_before_anything_is_submitted(betty_env, tmp_path):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    script = tmp_path / "train.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --output=all.log\necho $lr\n")
    refused = betty(betty_env, "sweep", str(script), "--grid", "lr=1,2", "--yes", "--dir", str(project))
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "%A_%a" in refused.stderr
    bad_grid = betty(betty_env, "sweep", str(script), "--grid", "PATH=/tmp", "--yes", "--dir", str(project))
    assert bad_grid.returncode != 0 and "a variable the shell or Slurm sets" in bad_grid.stderr
    assert bad_grid.stderr.count("\n") == 1
    refusals = ActionLog(project).read()  # the action log keeps the refused calls; nothing ran, nothing recorded
    assert [(r.tool, r.ok) for r in refusals] == [("cluster_sweep", False)] * 2
    assert not Workspace.at(project).ledger_path.exists()
