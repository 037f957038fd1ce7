"""Following a cell run's job from the kernel, without a cluster: the looks as ``cell_run_status`` gives them, what
comes back into the namespace, and stopping. (The dev-cluster tests follow real jobs in a real kernel.)"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from betty_jupyter.agent.models import ToolOutcome
from betty_jupyter.compute.cell_job import StagedRun, stage
from betty_jupyter.compute.cell_runner import SIGNED, signature
from betty_jupyter.errors import CellRunError, UsageError
from betty_jupyter.notebook.cell_run import CellRun
from betty_jupyter.notebook.session import Call

RUNNING = {"state": "RUNNING", "finished": False, "line": "job 7 RUNNING", "out": "step 1\n", "err": "", "result": None}


def submitted(tmp_path: Path, looks: list[dict[str, Any]], namespace: dict[str, Any], outs: tuple[str, ...] = ("y",),
              back: dict[str, bytes] | None = None, signed: bool = True,
              planted: dict[str, bytes] | None = None) -> tuple[CellRun, threading.Event]:
    """A run whose card was approved and whose job is 7; each look gives the next of ``looks`` (the last again).
    ``back``: the files its job sent back, signed with the run's key (or not); ``planted``: files someone else put
    beside them. All are in place before the run is followed."""
    call = Call("call-1", "cell_run")
    run_files = stage(tmp_path, "y = 2\n", {}, [])
    if back is not None:
        sent_back(run_files, back, signed)
    for name, data in (planted or {}).items():
        run_files.back.write(name, data)
    looked = threading.Event()

    def poll(token: str, job: str) -> dict[str, Any]:
        assert (token, job) == (run_files.token, "7")
        looked.set()
        return looks.pop(0) if len(looks) > 1 else looks[0]

    run = CellRun(call, run_files, outs, namespace, poll, lambda job: f"card for {job}", view=None, every=0.01)
    call.future.set_result(ToolOutcome(summary="submitted job 7", data={"job_id": "7", "run": run_files.token}))
    return run, looked


def sent_back(run: StagedRun, files: dict[str, bytes], signed: bool = True) -> None:
    """Put ``files`` into the run's ``back`` folder with a signature, as ``cell_run_status`` brings them."""
    back = run.back.make()
    figures = json.loads(files["result.json"]).get("figures", [])
    key = run.key if signed else bytes(32)
    back.write("result.sig", signature(key, run.token, {n: files.get(n) for n in (*SIGNED, *figures)}).encode())
    for name, data in files.items():
        back.write(name, data)


class Planted:
    """A value whose unpickling leaves a marker file: what another user would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def ended(tmp_path: Path) -> dict[str, Any]:
    return {**RUNNING, "state": "COMPLETED", "finished": True, "out": "step 1\ndone\n", "result": str(tmp_path)}


def test_what_comes_back_is_set_in_the_namespace_and_returned(tmp_path: Path) -> None:
    files = {"result.json": json.dumps({"ok": True, "figures": [], "outs": {"y": {"type": "int"}}}).encode(),
             "outputs.pkl": cloudpickle.dumps({"y": cloudpickle.dumps(2), "z": cloudpickle.dumps(3)})}
    namespace: dict[str, Any] = {}
    run, _ = submitted(tmp_path, [RUNNING, ended(tmp_path)], namespace, back=files)
    outcome = run.result(timeout=30)
    assert (outcome.state, outcome.values, outcome.stdout) == ("COMPLETED", {"y": 2}, "step 1\ndone\n")
    assert namespace == {"y": 2}, "only the --out names come back"
    assert run.status == "COMPLETED" and run.job_id == "7"
    with pytest.raises(UsageError, match="job 7 already ended"):
        run.cancel()


def test_a_cell_that_raised_raises_with_its_traceback(tmp_path: Path) -> None:
    traceback = 'Traceback (most recent call last):\n  File "<cell>", line 1\nValueError: <b>no</b>\n'
    files = {"result.json": json.dumps({"ok": False, "error": traceback}).encode()}
    run, _ = submitted(tmp_path, [{**RUNNING, "state": "FAILED", "finished": True, "result": str(tmp_path)}], {},
                       back=files)
    with pytest.raises(CellRunError, match=r"^the cell raised on the cluster: ValueError: <b>no</b> \(the") as raised:
        run.result(timeout=30)
    assert raised.value.traceback == traceback


@pytest.mark.parametrize("how", ["unsigned", "planted beside", "outer layer", "no --out"])
def test_a_planted_pickle_is_never_unpickled(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "unpickled"
    planted = cloudpickle.dumps({"y": cloudpickle.dumps(Planted(marker))})
    result = json.dumps({"ok": True, "figures": [], "outs": {"y": {"type": "int"}}}).encode()
    files = {"result.json": result, "outputs.pkl": planted}
    outs: tuple[str, ...] = ("y",)
    if how == "outer layer":
        files["outputs.pkl"] = cloudpickle.dumps(Planted(marker))
    if how == "no --out":
        outs = ()
    namespace: dict[str, Any] = {}
    if how == "planted beside":  # the job sent no outputs.pkl; one is planted beside what it sent
        run, _ = submitted(tmp_path, [ended(tmp_path)], namespace, outs, back={"result.json": result},
                           planted={"outputs.pkl": planted})
    else:
        run, _ = submitted(tmp_path, [ended(tmp_path)], namespace, outs, back=files, signed=how != "unsigned")
    outcome = run.result(timeout=30)
    assert not marker.exists() and namespace == {} and outcome.values == {}
    if how in ("unsigned", "planted beside"):
        assert outcome.problems == [f"what came back for cell run {run.run.token} is not the run's own (its signature "
                                    "does not match): nothing of it was loaded; someone else may have written into "
                                    "its directory on the cluster"]
    elif how == "outer layer":
        touch = Path.touch  # its module is pathlib on Python 3.11, pathlib._local on 3.13
        assert outcome.problems[0].startswith(f"outputs.pkl names {touch.__module__}.{touch.__qualname__}")


def test_stopping_ends_the_wait_and_the_job_goes_on(tmp_path: Path) -> None:
    run, looked = submitted(tmp_path, [RUNNING], {})
    assert looked.wait(30)
    assert run.cancel() == "card for 7", "a running job is cancelled through its card"
    run.stop_following()
    outcome = run.result(timeout=30)
    assert outcome.problems == ["stopped following job 7; it goes on on the cluster (`%betty status` follows it)"]
