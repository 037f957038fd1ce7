"""Continuation chains without a cluster: the script each segment runs, its helper run by a real bash, the card's
figures, and each segment's outcome read from Slurm's states."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from betty_jupyter.cluster.continuation import CONTINUE_EXIT, ChainPlan, card, chain_script, segment_outcomes
from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.errors import UsageError

SCRIPT = "#!/bin/bash\n#SBATCH --time=10\n#SBATCH --job-name=train\n\nset -euo pipefail\nbetty_run {command}\necho after\n"


def test_the_signal_goes_after_the_options_and_the_helper_before_the_first_command() -> None:
    text = chain_script(SCRIPT.format(command="python train.py"), ChainPlan(3, 60), "s", "~/.betty/chains/s")
    lines = text.splitlines()
    assert lines[:4] == ["#!/bin/bash", "#SBATCH --time=10", "#SBATCH --job-name=train", "#SBATCH --signal=B:USR1@60"]
    assert 'export BETTY_CHAIN_DIR="$HOME/.betty/chains/s"' in lines
    assert lines.index("betty_run() {") < lines.index("set -euo pipefail") < lines.index("betty_run python train.py")


def test_a_script_that_asks_for_its_own_signal_is_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="already has #SBATCH --signal"):
        chain_script("#!/bin/bash\n#SBATCH --time=10\n#SBATCH --signal=USR1@60\nbetty_run x\n", ChainPlan(3), "s",
                     "/w/chains/s")


def test_a_script_without_betty_run_runs_its_commands_as_one_program() -> None:
    text = chain_script("#!/bin/bash\n#SBATCH --time=10\ncd 'my dir'\npython train.py\n", ChainPlan(3), "s", "/w/c")
    assert text.endswith("\nbetty_run_script 'cd '\"'\"'my dir'\"'\"'\npython train.py'\n")


@pytest.mark.parametrize(("plan", "minutes", "words"), [
    (ChainPlan(1), 10, "2 to 50 segments"), (ChainPlan(51), 10, "2 to 50 segments"),
    (ChainPlan(3), None, "needs #SBATCH --time"), (ChainPlan(3, 600), 10, "less than the limit"),
])
def test_a_plan_that_cannot_work_is_refused(plan: ChainPlan, minutes: int | None, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        plan.check(minutes)


def test_the_card_names_segments_signal_cap_and_the_most_it_takes() -> None:
    shown = card(ChainPlan(4, 300), 120, 2)
    assert shown["segments"].startswith("up to 4 jobs of 120 min each")
    assert "--signal=B:USR1@300" in shown["signal"] and shown["cap"].startswith("4 segments")
    assert shown["at most"] == "8.0 h of wall time, 16.0 GPU-hours"


def job(ident: str, state: str, exit_code: str | None = None) -> Job:
    ended = datetime(2026, 1, 1, 12, 0) if JobState(state).finished else None
    return Job(ident, "train", "me", "cpu", JobState(state), exit_code=exit_code, ended=ended)


@pytest.mark.parametrize(("states", "whys", "ended"), [
    ([("TIMEOUT", "0:15"), ("FAILED", f"{CONTINUE_EXIT}:0"), ("RUNNING", None), ("PENDING", None)],
     ["time limit → continued", "time limit → continued", "running", "waiting"], None),
    ([("FAILED", f"{CONTINUE_EXIT}:0"), ("COMPLETED", "0:0"), ("CANCELLED", "0:0"), ("COMPLETED", "0:0")],
     ["time limit → continued", "done", "not needed", "not needed"], "done"),
    ([("FAILED", f"{CONTINUE_EXIT}:0"), ("TIMEOUT", "0:15")], ["time limit → continued", "cap reached"],
     "cap reached"),
    ([("FAILED", "1:0"), ("PENDING", None)], ["failed", "not needed"], "failed"),
    ([("PREEMPTED", "0:15"), ("RUNNING", None)], ["preempted → continued", "running"], None),
])
def test_each_segment_says_why_it_ended(states, whys, ended) -> None:
    ids = [str(100 + n) for n in range(len(states))]
    jobs = {ident: job(ident, state, code) for ident, (state, code) in zip(ids, states)}
    segments, chain_end = segment_outcomes(ids, jobs)
    assert [s["why"] for s in segments] == whys and chain_end == ended
    assert [s["job_id"] for s in segments] == ids


# The helper, run by a real bash as a segment would run it (Slurm's part played by the test: the job id, the signal).

PROGRAM = """\
import signal, sys, time, pathlib
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
pathlib.Path(sys.argv[1]).write_text("started")
for _ in range(600 if sys.argv[3] == "wait" else 0):
    if stop:
        print("checkpointed", flush=True)
        sys.exit(0)
    time.sleep(0.05)
sys.exit(int(sys.argv[2]))
"""


def run_segment(tmp_path: Path, job_id: str, code: int = 0, signal_it: bool = False,
                whole: bool = False, stop_all: bool = False) -> tuple[int, str]:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    started = tmp_path / f"started-{job_id}"
    command = f"{sys.executable} {program} {started} {code} {'wait' if signal_it else 'end'}"
    text = SCRIPT.replace("betty_run {command}", command) if whole else SCRIPT.format(command=command)
    script = chain_script(text, ChainPlan(3), "s", str(tmp_path / "chain"))
    (tmp_path / "segment.sh").write_text(script)
    bash = subprocess.Popen(["bash", str(tmp_path / "segment.sh")], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "SLURM_JOB_ID": job_id, "PATH": os.environ["PATH"]},
                            start_new_session=stop_all)
    if signal_it:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert time.monotonic() < deadline and bash.poll() is None
            time.sleep(0.02)
        if stop_all:  # as Slurm stops a job it preempts: SIGTERM to every process of it
            os.killpg(bash.pid, signal.SIGTERM)
        else:
            bash.send_signal(signal.SIGUSR1)
    out, _ = bash.communicate(timeout=60)
    return bash.returncode, out


def test_the_helper_forwards_the_signal_and_leaves_the_work_to_the_next_segment(tmp_path: Path) -> None:
    code, out = run_segment(tmp_path, "7", signal_it=True)
    assert code == CONTINUE_EXIT and "checkpointed" in out and "after" not in out
    assert not (tmp_path / "chain" / "done").exists() and not (tmp_path / "chain" / "failed").exists()


def test_work_that_ends_marks_the_chain_done_and_a_later_segment_does_not_run_it(tmp_path: Path) -> None:
    code, out = run_segment(tmp_path, "8", code=0)
    assert code == 0 and "after" in out and (tmp_path / "chain" / "done").read_text().strip() == "8"
    code, out = run_segment(tmp_path, "9", code=0)
    assert code == 0 and "not needed" in out and not (tmp_path / "started-9").exists()


def test_work_that_fails_ends_the_chain_with_its_exit_code(tmp_path: Path) -> None:
    code, _ = run_segment(tmp_path, "10", code=3)
    assert code == 3 and (tmp_path / "chain" / "failed").read_text().split() == ["10", "3"]


def test_a_whole_script_run_as_one_program_passes_the_signal_to_the_program_it_runs(tmp_path: Path) -> None:
    code, out = run_segment(tmp_path, "11", signal_it=True, whole=True)
    assert code == CONTINUE_EXIT and "checkpointed" in out
    code, out = run_segment(tmp_path, "12", whole=True)
    assert code == 0 and out.rstrip().endswith("after") and (tmp_path / "chain" / "done").read_text().strip() == "12"


def test_a_segment_slurm_stops_is_not_marked_failed_so_it_resumes_when_requeued(tmp_path: Path) -> None:
    code, out = run_segment(tmp_path, "13", signal_it=True, stop_all=True)
    assert code == 143 and "stopped by Slurm" in out
    assert not (tmp_path / "chain" / "failed").exists() and not (tmp_path / "chain" / "done").exists()


def test_a_job_the_person_lets_slurm_requeue_is_one_segment_with_requeue_on_its_card() -> None:
    plan = ChainPlan(1, 60, requeue=True)
    plan.check(10)
    with pytest.raises(UsageError, match="2 to 50 segments"):
        ChainPlan(1, 60).check(10)
    lines = chain_script(SCRIPT.format(command="python train.py"), plan, "s", "/w/s").splitlines()
    assert lines[3:5] == ["#SBATCH --signal=B:USR1@60", "#SBATCH --requeue"]
    shown = card(plan, 10, 0)
    assert shown["requeue"].startswith("--requeue: if Slurm preempts a segment") and "one job of 10 min" in shown[
        "segments"]


def test_a_preempted_segment_that_may_be_requeued_waits_and_its_interruption_is_listed() -> None:
    first = datetime(2026, 1, 1, 10, 0, 0)
    running = Job("41", "t", "me", "p", JobState("RUNNING"), started=first)
    (seen,), _ = segment_outcomes(["41"], {"41": running}, requeue=True)
    assert (seen["why"], seen["started"], "interruptions" in seen) == ("running", "2026-01-01 10:00:00", False)
    preempted = Job("41", "t", "me", "p", JobState("PREEMPTED"), started=first, ended=datetime(2026, 1, 1, 10, 1))
    (waiting,), ended = segment_outcomes(["41"], {"41": preempted}, [seen], requeue=True,
                                         now=datetime(2026, 1, 1, 10, 2))
    assert (waiting["why"], ended) == ("waiting", None)
    (given_up,), ended = segment_outcomes(["41"], {"41": preempted}, [seen], requeue=True,
                                          now=datetime(2026, 1, 1, 10, 30))
    assert ended == "cap reached"
    pending = Job("41", "t", "me", "p", JobState("PENDING"))
    (requeued,), _ = segment_outcomes(["41"], {"41": pending}, [seen], requeue=True)
    assert requeued["interruptions"] == ["2026-01-01 10:00:00"]
    again = Job("41", "t", "me", "p", JobState("COMPLETED"), started=datetime(2026, 1, 1, 10, 3),
                ended=datetime(2026, 1, 1, 10, 4))
    (done,), ended = segment_outcomes(["41"], {"41": again}, [requeued], requeue=True)
    assert (done["why"], done["interruptions"], ended) == ("done", ["2026-01-01 10:00:00"], "done")
