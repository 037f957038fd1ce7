"""``%%betty run`` where a project and a work directory are shared with a group (setgid, group-writable, the
person's umask 002) and another member (a second Unix user) plants what Betty would load: she replaces the run's
directory on the cluster, or the run's staged folder in the project, with her own holding a pickle whose
unpickling leaves a marker. A real kernel, the real dev cluster (over SSH and with local commands): the marker
never appears, the person gets one clear line, and a cell without ``--out`` has nothing unpickled at all."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel_driver import Kernel
from llm_server import ScriptedLLM
from notebook_support import betty_kernel, cell_run_project, llm  # noqa: F401 (a fixture)
from test_cell_run_cluster import CLUSTERS, approve

pytestmark = pytest.mark.cluster

MEMBER = "nobody"
"""The other member of the group: her own uid, in the group that shares the directories."""


class Planted:
    """A value whose unpickling leaves a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def as_member(command: str, *args: str, data: bytes | None = None) -> None:
    """``command`` (a shell line, ``$1``… for ``args``) run as the other member, with her umask 002."""
    done = subprocess.run(["runuser", "-u", MEMBER, "--", "sh", "-c", f"umask 002; {command}", "sh", *args],
                          input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr


def shared_folder(path: Path) -> None:
    """``path`` shared with the member's group, as a project directory is: setgid, group-writable."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, -1, pwd.getpwnam(MEMBER).pw_gid)
    path.chmod(0o2775)


@pytest.fixture(scope="module")
def shared(dev_cluster: dict[str, str], llm: ScriptedLLM) -> Iterator[dict[str, Any]]:
    """A project and its work directories in a folder the member can reach, both shared with her group."""
    base = Path(tempfile.mkdtemp(prefix="betty-shared-", dir="/tmp"))
    base.chmod(0o755)
    made = cell_run_project(base, dev_cluster, llm, {"betty": {"venv": sys.prefix}})
    for folder in (base / "project", base / "project" / ".betty", base / "work-ssh", base / "work-local"):
        shared_folder(folder)
    try:
        yield {**made, "base": base}
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def kernel(shared: dict[str, Any]) -> Iterator[Kernel]:
    with betty_kernel(shared["root"], shared["env"]) as driver:
        assert driver.run("import os\nold_umask = os.umask(0o002)").status == "ok"
        yield driver


def waiting_run(kernel: Kernel, cluster: str, flag: Path, outs: str = "--out y") -> tuple[Any, str, str]:
    """A cell run that waits for ``flag`` on the node, approved and started; its cell, token and followed view."""
    assert kernel.run(f"%betty use {cluster}").status == "ok"
    cell = kernel.run(f"%%betty run --partition cpu --time 5 --env betty {outs}\n"
                      f"import os, time\nprint('started on the node', flush=True)\n"
                      f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.2)\ny = 1\n")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    kernel.run("_run = _")
    token = kernel.run("_run.run.token").text.strip("'")
    view = approve(kernel, cell)
    try:
        kernel.wait_for(lambda: "started on the node" in kernel.texts(view), timeout=120, what="the job's first output")
    except AssertionError:
        raise AssertionError(kernel.texts(view)[-2000:] + kernel.texts(cell.widgets[0])[-2000:]) from None
    return cell, token, view


def problems(kernel: Kernel) -> list[str]:
    """What the person is told once the run's following ended (nothing came back)."""
    outcome = kernel.run("_o = _run.result(timeout=180)\n(_o.problems, _o.values, 'y' in globals())")
    assert outcome.errors == [], outcome.errors
    found, values, leaked = eval(outcome.text)  # a tuple of plain values, printed by the kernel
    assert values == {} and leaked is False, "no value came back into the notebook"
    return list(found)


def planted_files(marker: Path) -> dict[str, bytes]:
    """What the member plants where the run's results would be: a pickle that runs her code, and its company."""
    import cloudpickle

    return {"result.json": json.dumps({"ok": True, "figures": [], "outs": {"y": {"type": "int"}}}).encode(),
            "result.sig": b"0" * 64,
            "outputs.pkl": cloudpickle.dumps({"y": cloudpickle.dumps(Planted(marker))})}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_run_directory_replaced_on_the_cluster_loads_nothing(kernel: Kernel, shared, cluster: str) -> None:
    base = shared["base"]
    marker, flag = base / f"unpickled-{cluster}", base / f"go-{cluster}"
    work = base / ("work-local" if cluster.endswith("local") else "work-ssh")
    _, token, _ = waiting_run(kernel, cluster, flag)
    assert (work / "runs").stat().st_mode & 0o022 == 0, "the runs directory is the person's to write alone"
    as_member('mv "$1/runs" "$1/runs-moved" && mkdir -p "$1/runs/cell-$2"', str(work), token)
    try:
        for name, data in planted_files(marker).items():
            as_member('cat > "$1"', str(work / "runs" / f"cell-{token}" / name), data=data)
        flag.touch()
        [line] = problems(kernel)
        assert line.startswith("stopped following job ") and line.endswith(
            f"refused: {work}/runs/cell-{token} is not yours alone (another user may have replaced it); nothing of "
            "it was read"), line
        assert not marker.exists(), "the member's pickle ran in the person's kernel"
        real = work / "runs-moved" / f"cell-{token}" / "result.json"
        kernel.wait_for(real.exists, timeout=120, what="the job's own result, in its real directory")
        theirs = work / "runs" / f"cell-{token}"
        assert sorted(path.name for path in theirs.iterdir()) == ["outputs.pkl", "result.json", "result.sig"]
        assert (theirs / "result.sig").read_bytes() == b"0" * 64, "the job wrote nothing into the member's directory"
    finally:
        as_member('rm -rf "$1/runs" && mv "$1/runs-moved" "$1/runs"', str(work))


def test_a_staged_run_replaced_in_a_shared_project_loads_nothing(kernel: Kernel, shared) -> None:
    base, state = shared["base"], shared["root"] / ".betty"
    marker, flag = base / "unpickled-project", base / "go-project"
    _, token, _ = waiting_run(kernel, "betty-dev-local", flag)
    assert (state / "cell-runs").stat().st_mode & 0o077 == 0, "the staged runs are the person's alone"
    as_member('mv "$1/cell-runs" "$1/cell-runs-moved" && mkdir -p "$1/cell-runs/$2/back"', str(state), token)
    try:
        for name, data in {**planted_files(marker), "manifest.json": b'{"inputs": [], "sha256": ""}'}.items():
            folder = state / "cell-runs" / token / ("" if name == "manifest.json" else "back")
            as_member('cat > "$1"', str(folder / name), data=data)
        flag.touch()
        [line] = problems(kernel)
        uid = pwd.getpwnam(MEMBER).pw_uid
        assert line.startswith("stopped following job ") and line.endswith(
            f"{state}/cell-runs belongs to another user (uid {uid}); Betty loads nothing from it"), line
        assert not marker.exists(), "the member's pickle ran in the person's kernel"
    finally:
        as_member('rm -rf "$1/cell-runs" && mv "$1/cell-runs-moved" "$1/cell-runs"', str(state))


def test_without_out_nothing_is_unpickled_and_the_run_still_comes_back(kernel: Kernel, shared) -> None:
    marker = shared["base"] / "unpickled-no-out"
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    cell = kernel.run("%%betty run --partition cpu --time 5 --env betty\n"
                      "import pickle, pathlib\nprint('ran on the node')\n"
                      "class Planted:\n    def __reduce__(self):\n"
                      f"        return (pathlib.Path.touch, (pathlib.Path({str(marker)!r}),))\n"
                      "pathlib.Path('outputs.pkl').write_bytes(pickle.dumps({'y': pickle.dumps(Planted())}))\n")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    kernel.run("_run = _")
    approve(kernel, cell)
    outcome = kernel.run("_o = _run.result(timeout=180)\n(_o.state, _o.stdout, _o.values, _o.problems)")
    assert outcome.text == "('COMPLETED', 'ran on the node\\n', {}, [])", outcome.text + str(outcome.errors)
    assert not marker.exists(), "a pickle nobody asked for was unpickled"


def test_a_runs_directory_the_member_made_is_refused_before_anything_is_sent(kernel: Kernel, shared) -> None:
    work = shared["base"] / "work-ssh"
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    cell = kernel.run("%%betty run --partition cpu --time 5 --env betty\nprint('first')\n")
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    kernel.run("_run = _")
    approve(kernel, cell)
    assert kernel.run("_run.result(timeout=180).stdout").text == "'first\\n'"
    as_member('mv "$1/runs" "$1/runs-moved" && mkdir "$1/runs" && chmod 777 "$1/runs"', str(work))
    try:
        cell = kernel.run("%%betty run --partition cpu --time 5 --env betty\nprint('second')\n")
        kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
        kernel.run("_run = _")
        kernel.click(kernel.find(cell.widgets[0], "betty-approve")[0])
        refused = kernel.run("_run.result(timeout=180)")
        token = kernel.run("_run.run.token").text.strip("'")
        assert refused.errors == [f"UsageError: the cell run was not submitted: could not make the run's "
                                  f"directory {work}/runs/cell-{token}: {work}/runs belongs to another user; give the "
                                  "profile a work_dir of your own"], refused.errors
        assert list((work / "runs").iterdir()) == [], "nothing was sent into the member's directory"
    finally:
        as_member('rm -rf "$1/runs" && mv "$1/runs-moved" "$1/runs"', str(work))
