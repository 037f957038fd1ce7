"""Sweeps without a cluster: the grid as the person writes it, the array's script, and what bash makes of it."""

from __future__ import annotations

import subprocess

import pytest

from betty_jupyter.errors import UsageError
from betty_jupyter.experiments.sweep import MAX_TASKS, Grid, grid_table, size_line, sweep_script

SCRIPT = "#!/bin/bash\n#SBATCH --job-name=lr-sweep\n#SBATCH --time=30\n\npython train.py --lr \"$lr\" --seed \"$seed\"\n"
HOSTILE_VALUES = ["it's", "$(touch pwned)", "`id`", "a b", "x;y|z&", '"q"', "\\n", "--help", "*", "~", "${HOME}",
                  "<img src=x onerror=1>", "é€"]


def test_a_grid_is_every_point_the_first_parameter_slowest() -> None:
    grid = Grid.parse(["lr=1e-4,3e-4,1e-3", "seed=0,1,2"])
    assert len(grid) == 9 and grid.names == ("lr", "seed") and grid.words() == ["lr=1e-4,3e-4,1e-3", "seed=0,1,2"]
    assert grid.points()[:4] == [{"lr": "1e-4", "seed": "0"}, {"lr": "1e-4", "seed": "1"},
                                 {"lr": "1e-4", "seed": "2"}, {"lr": "3e-4", "seed": "0"}]
    assert grid.points()[8] == {"lr": "1e-3", "seed": "2"}


@pytest.mark.parametrize(("words", "says"), [
    ([], "needs a grid"),
    (["lr"], "is not NAME=V1,V2"),
    (["1lr=1"], "is not NAME=V1,V2"),
    (["l-r=1"], "is not NAME=V1,V2"),
    (["$(id)=1"], "is not NAME=V1,V2"),
    (["PATH=/tmp"], "a variable the shell or Slurm sets"),
    (["SLURM_ARRAY_TASK_ID=1"], "a variable the shell or Slurm sets"),
    (["betty_token=1"], "a variable the shell or Slurm sets"),
    (["ld_preload=x.so"], "a variable the shell or Slurm sets"),
    (["lr=1", "lr=2"], "given twice"),
    (["lr=1,1"], "lists a value twice"),
    (["lr=1,,2"], "an empty value"),
    (["lr="], "an empty value"),
    (["lr=a\nb"], "control character"),
    (["lr=a\x1bb"], "control character"),
    (["lr=" + "x" * 201], "longer than 200"),
    ([f"a={','.join(map(str, range(100)))}", f"b={','.join(map(str, range(11)))}"], "more than one sweep runs"),
])
def test_a_grid_betty_cannot_run_is_one_line(words: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=says) as refused:
        Grid.parse(words)
    assert "\n" not in str(refused.value)


def test_the_array_runs_every_point_with_its_values_exactly_as_given(tmp_path) -> None:
    grid = Grid.parse([f"name={','.join(v.replace(',', ';') for v in HOSTILE_VALUES)}", "seed=0,1"])
    script = sweep_script(SCRIPT, grid, at_once=3)
    lines = script.splitlines()
    assert lines[:4] == ["#!/bin/bash", "#SBATCH --job-name=lr-sweep", "#SBATCH --time=30", "#SBATCH --array=0-25%3"]
    assert script.endswith("\npython train.py --lr \"$lr\" --seed \"$seed\"\n")  # the person's commands, unchanged
    block = script[:script.index("python train.py")]
    for index, point in enumerate(grid.points()):
        shown = subprocess.run(["bash", "-c", block + 'printf "%s\\0%s" "$name" "$seed"'], cwd=tmp_path,
                               capture_output=True, text=True, env={"SLURM_ARRAY_TASK_ID": str(index), "PATH": "/bin"})
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.split("betty sweep: task")[-1].split("\n", 1)[1].split("\0") == [point["name"],
                                                                                           point["seed"]]
    assert not (tmp_path / "pwned").exists()
    outside = subprocess.run(["bash", "-c", block], capture_output=True, text=True,
                             env={"SLURM_ARRAY_TASK_ID": "26", "PATH": "/bin"})
    assert outside.returncode == 2 and "task 26 has no point in the grid" in outside.stderr


@pytest.mark.parametrize(("script", "says"), [
    (SCRIPT.replace("#SBATCH --time=30", "#SBATCH --array=0-3"), "an #SBATCH --array of its own"),
    (SCRIPT.replace("#SBATCH --time=30", "#SBATCH --output=run.log"), "every task write the same file"),
    (SCRIPT.replace("#SBATCH --time=30", "#SBATCH -e err-%A.log"), "every task write the same file"),
    ("#!/bin/bash\n#SBATCH --time=30\n", "runs no command"),
])
def test_a_script_a_sweep_cannot_run_is_refused_in_one_line(script: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        sweep_script(script, Grid.parse(["lr=1,2"]))


def test_an_output_per_task_is_kept_and_the_limit_at_once_is_checked() -> None:
    script = SCRIPT.replace("#SBATCH --time=30", "#SBATCH --output=logs/%A_%a.out")
    assert "#SBATCH --array=0-1\n" in sweep_script(script, Grid.parse(["lr=1,2"]))
    with pytest.raises(UsageError, match="from 1 to"):
        sweep_script(SCRIPT, Grid.parse(["lr=1,2"]), at_once=0)


def test_the_page_table_and_the_size_line() -> None:
    grid = Grid.parse(["lr=1e-4,<b>x</b>", "seed=0"])
    table = grid_table(grid).splitlines()
    assert table[0] == "| task | lr | seed |" and table[2] == "| 0 | 1e-4 | 0 |" and "<b>" not in table[3]
    assert size_line(grid, 1, 2, 120) == "2 tasks, at most 1 at once; each 2 GPU(s) for up to 02:00:00: at most 8 GPU-hours"
    assert size_line(grid, None, 0, 30) == "2 tasks, all at once if the queue allows; each for up to 00:30:00"
    assert size_line(grid, None, 1, None).endswith("each for up to the partition's time limit")
    assert MAX_TASKS == 1000
