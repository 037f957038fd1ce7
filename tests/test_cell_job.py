"""A cell run's parts without a cluster: names, pickling and its refusals, staging, the generated script, the
environments of a profile, and the runner itself run here on a real cell (the dev-cluster tests run it in jobs)."""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from betty_jupyter.agent.tools import ToolError
from betty_jupyter.agent.tools.catalog import CellRun
from betty_jupyter.compute import cell_job
from betty_jupyter.cluster.job_request import CellEnvironment, JobRequest, cell_environment
from betty_jupyter.compute.cell_job import (
    CellJob, pack_inputs, parse_result, stage, staged, unpack_outputs, variable_names,
)
from betty_jupyter.cluster.profiles import ClusterProfile
from betty_jupyter.errors import ConfigError, UsageError

RUN_DIR = "/scratch/alice/.betty/runs/cell-0123"


def test_variable_names_are_python_names_listed_once() -> None:
    assert variable_names("x, y_2", "--in") == ("x", "y_2")
    assert variable_names(None, "--out") == ()
    for bad, why in (("x;rm -rf", "is not a variable's name"), ("class", "is not a variable's name"),
                     ("__builtins__", "is not a variable's name"), ("x,x", "names a variable twice")):
        with pytest.raises(UsageError, match=why):
            variable_names(bad, "--in")


def test_only_the_named_values_are_pickled_and_each_crossing_says_what_it_is() -> None:
    namespace = {"samples": np.arange(1000.0), "lr": 3e-4, "api_key": "never-read"}
    data, crossings = pack_inputs(namespace, ["samples", "lr"])
    assert [(c.name, c.type) for c in crossings] == [("samples", "numpy.ndarray"), ("lr", "float")]
    assert crossings[0].bytes > 8000 and crossings[0].line().startswith("samples: numpy.ndarray, 7.")
    assert b"never-read" not in data
    assert set(cloudpickle.loads(data)) == {"samples", "lr"}


def test_a_value_that_cannot_cross_is_refused_in_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError) as refused:
        pack_inputs({"lock": threading.Lock()}, ["lock"])
    assert str(refused.value).startswith("--in lock: a _thread.lock cannot be pickled (")
    assert "nothing was submitted" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(UsageError, match="there is no variable missing in this notebook"):
        pack_inputs({}, ["missing"])
    monkeypatch.setattr(cell_job, "MAX_IN_BYTES", 1000)
    with pytest.raises(UsageError, match=r"--in: big are 7\.\d KiB pickled, more than the 1000 B a cell sends"):
        pack_inputs({"big": np.zeros(1000)}, ["big"])


def test_a_staged_run_is_refused_once_its_values_changed(tmp_path: Path) -> None:
    run = stage(tmp_path, "print(x)\n", {"x": 41}, ["x"])
    assert staged(tmp_path, run.token).wire_lines() == ["cell.py: the cell's code, 1 lines",
                                                        f"x: int, {run.crossings[0].bytes} B (in inputs.pkl)"]
    (run.folder / "inputs.pkl").write_bytes(run.inputs + b"x")
    with pytest.raises(UsageError, match="changed after they were staged"):
        staged(tmp_path, run.token)
    with pytest.raises(UsageError, match="is not a staged cell run"):
        staged(tmp_path, "../../etc")


def test_the_script_without_an_environment_uses_the_clusters_python3() -> None:
    script = CellJob(RUN_DIR, JobRequest("cpu", 30, name="cell")).script().text
    assert script == (
        "#!/bin/bash\n#SBATCH --job-name=cell\n#SBATCH --partition=cpu\n#SBATCH --time=30\n"
        f"#SBATCH --chdir={RUN_DIR}\n#SBATCH --output={RUN_DIR}/cell.out\n#SBATCH --error={RUN_DIR}/cell.err\n"
        "# %%betty run: the cell (cell.py) and its --in values (inputs.pkl) are in this directory;\n"
        "# cell_runner.py runs the cell, then writes result.json, figure-N.png and outputs.pkl beside them.\n"
        "# Nothing runs unless the directory is yours alone (mode 700).\n"
        f"cd -- {RUN_DIR} && [[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) || "
        f"{{ echo \"betty: {RUN_DIR} is not yours alone; the cell was not run\" >&2; exit 1; }}\n"
        "export MPLBACKEND=Agg\nexec python3 -u cell_runner.py 0123\n")
    assert CellEnvironment().describe().startswith("the cluster's default python3")


def test_the_script_loads_modules_and_runs_the_environments_python() -> None:
    environment = CellEnvironment.parse("torch", {"modules": ["cuda/12.1", "python/3.11"], "venv": "~/envs/it's"})
    script = CellJob(RUN_DIR, JobRequest("gpu", 60, 2, environment, "cell-train")).script().text
    assert "#SBATCH --gpus=2\n" in script and "#SBATCH --job-name=cell-train\n" in script
    assert script.endswith("module load cuda/12.1 python/3.11\nexport MPLBACKEND=Agg\n"
                           "exec \"$HOME\"/'envs/it'\"'\"'s'/bin/python3 -u cell_runner.py 0123\n")
    assert environment.describe() == "torch: module load cuda/12.1 python/3.11; ~/envs/it's/bin/python3"
    assert [argv[-1] for argv, _ in environment.checks()] == [
        "module is-avail cuda/12.1 python/3.11", "test -x \"$HOME\"/'envs/it'\"'\"'s/bin/python3'"]


def test_a_container_runs_with_the_gpus_when_the_job_has_some() -> None:
    environment = CellEnvironment.parse("box", {"container": "/images/torch.sif"})
    with_gpus = CellJob(RUN_DIR, JobRequest("gpu", 5, 1, environment)).script().text
    assert with_gpus.endswith('runtime="$(command -v apptainer || command -v singularity)"\nexport MPLBACKEND=Agg\n'
                              'exec "$runtime" exec --nv /images/torch.sif python3 -u cell_runner.py 0123\n')
    without = CellJob(RUN_DIR, JobRequest("cpu", 5, 0, environment)).script().text
    assert 'exec "$runtime" exec /images/torch.sif python3' in without


@pytest.mark.parametrize("entry, problem", [
    ({}, "takes modules, venv, conda or container"),
    ({"venv": "envs/x"}, "must be an absolute path"),
    ({"venv": "/a", "conda": "/b"}, "venv or conda, not both"),
    ({"modules": "cuda"}, "a list of module names"),
    ({"modules": ["cuda; rm -rf ~"]}, "a list of module names"),
    ({"venv": "/a", "container": "/b.sif"}, "not both"),
    ({"python": "/usr/bin/python3"}, "takes modules, venv, conda or container"),
])
def test_a_profile_environment_that_cannot_run_is_refused_when_the_profile_is_read(entry, problem) -> None:
    with pytest.raises(ConfigError, match=problem):
        ClusterProfile.from_dict({"name": "c", "transport": "local", "environments": {"e": entry}})


def test_environments_are_part_of_the_profile_and_named_by_the_cell() -> None:
    data = {"name": "c", "transport": "local", "environments": {"torch": {"conda": "/opt/envs/torch"}}}
    profile = ClusterProfile.from_dict(data)
    assert profile.to_dict() == data
    assert cell_environment(profile.environments, "torch", "c").command(0, "cell_runner.py") == (
        "exec /opt/envs/torch/bin/python3 -u cell_runner.py")
    with pytest.raises(UsageError, match=r"--env jax: cluster c has no such environment \(configured: torch\)"):
        cell_environment(profile.environments, "jax", "c")


def test_the_result_is_read_strictly() -> None:
    result = parse_result(json.dumps({"ok": False, "error": "Traceback…\nValueError: <b>", "outs": {"y": {"type": "int"}},
                                      "figures": ["figure-1.png", "../../.ssh/id_rsa", "figure-2.png\n"]}))
    assert result.figures == ("figure-1.png",) and not result.ok and result.error.endswith("<b>")
    with pytest.raises(UsageError, match="is not JSON"):
        parse_result("{")


def run_the_runner(folder: Path, code: str, namespace: dict[str, object], outs: tuple[str, ...],
                   cap: int = cell_job.MAX_OUT_BYTES) -> dict[str, object]:
    """Stage ``code`` as the kernel does and run the runner on it here, as the job does on the node."""
    run = stage(folder / "state", code, namespace, list(namespace))
    node = folder / "node"
    node.mkdir()
    for name in ("cell.py", "inputs.pkl"):
        if (run.folder / name).exists():
            (node / name).write_bytes((run.folder / name).read_bytes())
    (node / "run.key").write_text(run.key.hex())
    (node / "run.json").write_text(json.dumps({"outs": list(outs), "max_out_bytes": cap, "token": run.token}))
    (node / cell_job.RUNNER).write_bytes(cell_job.runner_source())
    done = subprocess.run([sys.executable, "-u", cell_job.RUNNER, run.token], cwd=node, capture_output=True, text=True,
                          env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"}, timeout=120)
    return {"code": done.returncode, "stdout": done.stdout, "result": parse_result((node / "result.json").read_text()),
            "node": node, "run": run}


def test_the_runner_runs_the_cell_on_its_inputs_and_leaves_figures_and_outputs(tmp_path: Path) -> None:
    code = ("import matplotlib.pyplot as plt\nmean = float(samples.mean())\nprint('mean', mean)\n"
            "plt.plot(samples)\nplt.figure()\nunpicklable = __import__('threading').Lock()\n")
    ran = run_the_runner(tmp_path, code, {"samples": np.arange(5.0)}, ("mean", "unpicklable", "never_set"))
    result = ran["result"]
    assert ran["code"] == 0 and ran["stdout"] == "mean 2.0\n" and result.ok and result.error is None
    assert result.figures == ("figure-1.png", "figure-2.png")
    assert (ran["node"] / "figure-1.png").read_bytes()[:4] == b"\x89PNG"
    assert unpack_outputs((ran["node"] / "outputs.pkl").read_bytes(), ["mean", "never_set"]) == {"mean": 2.0}
    assert result.outs == {"mean": {"type": "float", "bytes": result.outs["mean"]["bytes"]}}
    assert result.problems[0] == "--out never_set: the cell did not set never_set"
    assert result.problems[1].startswith("--out unpicklable: a _thread.lock cannot be pickled")


def test_the_runner_brings_back_the_cells_own_traceback(tmp_path: Path) -> None:
    ran = run_the_runner(tmp_path, "x = 1\ny = x / 0\n", {}, ())
    assert ran["code"] == 1 and not ran["result"].ok
    error = ran["result"].error
    assert error.startswith("Traceback (most recent call last):\n  File \"<cell>\", line 2, in <module>\n")
    assert "y = x / 0" in error and error.endswith("ZeroDivisionError: division by zero\n")
    assert "cell_runner" not in error, "the runner's own frame is left out"


def test_the_runner_sends_nothing_back_over_the_cap(tmp_path: Path) -> None:
    ran = run_the_runner(tmp_path, "big = bytes(5000)\n", {}, ("big",), cap=1000)
    result = ran["result"]
    assert result.ok and result.outs == {} and not (ran["node"] / "outputs.pkl").exists()
    [problem] = result.problems
    assert re.fullmatch(r"--out: the values are 50\d\d bytes pickled, more than the 1000 bytes that come back; "
                        r"save large results to a file on the cluster and return its path", problem), problem


def test_the_tools_arguments_refuse_what_could_change_the_script() -> None:
    good = {"run": "0" * 32, "partition": "gpu", "time": 30}
    assert CellRun().parse({**good, "outs": ["mean", "_std2"]}).outs == ["mean", "_std2"]
    for bad in ({"partition": "gpu\n#SBATCH --exclusive"}, {"outs": ["a;b"]}, {"run": "../x"}, {"time": 0}):
        with pytest.raises(ToolError, match="some values are missing or wrong"):
            CellRun().parse({**good, **bad})


def test_what_is_staged_is_the_persons_alone_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        run = stage(tmp_path, "print(x)\n", {"x": 41}, ["x"])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "cell-runs").stat().st_mode) == 0o700
    assert stat.S_IMODE(run.folder.stat().st_mode) == 0o700
    for name in ("cell.py", "inputs.pkl", "manifest.json", "key"):
        assert stat.S_IMODE((run.folder / name).stat().st_mode) == 0o600, name
    assert len(run.key) == 32 and run.key != stage(tmp_path, "pass\n", {}, []).key, "each run has a key of its own"


@pytest.mark.parametrize("swap", ["group-writable folder", "group-writable file", "symlinked folder",
                                  "another user's folder", "symlinked file"])
def test_a_staged_run_that_others_could_have_written_is_refused(tmp_path: Path, swap: str) -> None:
    run = stage(tmp_path, "print(x)\n", {"x": 41}, ["x"])
    elsewhere = tmp_path / "elsewhere"
    if swap == "group-writable folder":
        run.folder.chmod(0o770)
    elif swap == "group-writable file":
        (run.folder / "cell.py").chmod(0o660)
    elif swap == "symlinked folder":
        run.folder.rename(elsewhere)
        run.folder.symlink_to(elsewhere)
    elif swap == "another user's folder":
        os.chown(run.folder, pwd.getpwnam("nobody").pw_uid, -1)
    else:
        (elsewhere / "cell.py").parent.mkdir()
        (elsewhere / "cell.py").write_text("import os\n")
        (run.folder / "cell.py").unlink()
        (run.folder / "cell.py").symlink_to(elsewhere / "cell.py")
    with pytest.raises(UsageError, match=rf"^cell run {run.token} cannot be used: .*; run the cell again$"):
        staged(tmp_path, run.token)


def test_what_the_runner_sends_back_is_signed_with_the_runs_key(tmp_path: Path) -> None:
    ran = run_the_runner(tmp_path, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\ny = 3\n", {}, ("y",))
    run = ran["run"]
    back = run.back.make()
    for name in ("result.json", "result.sig", "outputs.pkl", "figure-1.png"):
        back.write(name, (ran["node"] / name).read_bytes())
    assert cell_job.check_back(run).figures == ("figure-1.png",)
    for name, forged in (("figure-1.png", b"\x89PNG forged"), ("outputs.pkl", cloudpickle.dumps({"y": b"x"})),
                         ("result.json", b'{"ok": true, "figures": []}')):
        kept = (ran["node"] / name).read_bytes()
        back.write(name, forged)
        with pytest.raises(UsageError, match="is not the run's own"):
            cell_job.check_back(run)
        back.write(name, kept)
    other = stage(tmp_path / "other", "y = 3\n", {}, [])
    other.back.make()
    for name in ("result.json", "result.sig", "outputs.pkl", "figure-1.png"):
        other.back.write(name, (ran["node"] / name).read_bytes())
    with pytest.raises(UsageError, match="is not the run's own"):
        cell_job.check_back(other), "another run's results, signed with its own key, are not this run's"


def test_the_runner_runs_nothing_in_another_runs_directory(tmp_path: Path) -> None:
    run = stage(tmp_path / "state", "open('ran', 'w').close()\n", {}, [])
    node = tmp_path / "node"
    node.mkdir()
    (node / "cell.py").write_text(run.code)
    (node / "run.key").write_text(run.key.hex())
    (node / "run.json").write_text(json.dumps({"outs": [], "max_out_bytes": 10, "token": "f" * 32}))
    (node / cell_job.RUNNER).write_bytes(cell_job.runner_source())
    done = subprocess.run([sys.executable, "-u", cell_job.RUNNER, run.token], cwd=node, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "holds another run than the job's" in done.stderr
    assert not (node / "ran").exists() and not (node / "result.json").exists()
