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
from betty_jupyter.cluster.cell_job import stage
from betty_jupyter.errors import CellRunError, UsageError
from betty_jupyter.notebook.cell_run import CellRun
from betty_jupyter.notebook.session import Call

RUNNING = {"state": "RUNNING", "finished": False, "line": "job 7 RUNNING", "out": "step 1\n", "err": "", "result": None}


def submitted(tmp_path: Path, looks: list[dict[str, Any]], namespace: dict[str, Any]) -> tuple[CellRun, threading.Event]:
    """A run whose card was approved and whose job is 7; each look gives the next of ``looks`` (the last again)."""
    call = Call("call-1", "cell_run")
    run_files = stage(tmp_path, "y = 2\n", {}, [])
    looked = threading.Event()

    def poll(token: str, job: str) -> dict[str, Any]:
        assert (token, job) == (run_files.token, "7")
        looked.set()
        return looks.pop(0) if len(looks) > 1 else looks[0]

    run = CellRun(call, run_files, ("y",), namespace, poll, lambda job: f"card for {job}", view=None, every=0.01)
    call.future.set_result(ToolOutcome(summary="submitted job 7", data={"job_id": "7", "run": run_files.token}))
    return run, looked


def test_what_comes_back_is_set_in_the_namespace_and_returned(tmp_path: Path) -> None:
    back = tmp_path / "back"
    back.mkdir()
    (back / "result.json").write_text(json.dumps({"ok": True, "figures": [], "outs": {"y": {"type": "int"}}}))
    (back / "outputs.pkl").write_bytes(cloudpickle.dumps({"y": cloudpickle.dumps(2), "z": cloudpickle.dumps(3)}))
    ended = {**RUNNING, "state": "COMPLETED", "finished": True, "out": "step 1\ndone\n", "result": str(back)}
    namespace: dict[str, Any] = {}
    run, _ = submitted(tmp_path, [RUNNING, ended], namespace)
    outcome = run.result(timeout=30)
    assert (outcome.state, outcome.values, outcome.stdout) == ("COMPLETED", {"y": 2}, "step 1\ndone\n")
    assert namespace == {"y": 2}, "only the --out names come back"
    assert run.status == "COMPLETED" and run.job_id == "7"
    with pytest.raises(UsageError, match="job 7 already ended"):
        run.cancel()


def test_a_cell_that_raised_raises_with_its_traceback(tmp_path: Path) -> None:
    back = tmp_path / "back"
    back.mkdir()
    traceback = 'Traceback (most recent call last):\n  File "<cell>", line 1\nValueError: <b>no</b>\n'
    (back / "result.json").write_text(json.dumps({"ok": False, "error": traceback}))
    run, _ = submitted(tmp_path, [{**RUNNING, "state": "FAILED", "finished": True, "result": str(back)}], {})
    with pytest.raises(CellRunError, match=r"^the cell raised on the cluster: ValueError: <b>no</b> \(the") as raised:
        run.result(timeout=30)
    assert raised.value.traceback == traceback


def test_stopping_ends_the_wait_and_the_job_goes_on(tmp_path: Path) -> None:
    run, looked = submitted(tmp_path, [RUNNING], {})
    assert looked.wait(30)
    assert run.cancel() == "card for 7", "a running job is cancelled through its card"
    run.stop_following()
    outcome = run.result(timeout=30)
    assert outcome.problems == ["stopped following job 7; it goes on on the cluster (`%betty status` follows it)"]
