"""SlurmClient against the real dev cluster, through the local and the SSH transport."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from betty_jupyter.cluster.delimited import SHOWN_SEPARATOR
from betty_jupyter.cluster.jobs import JobState
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.errors import SlurmError, UsageError
from advisor_support import OTHER_USER, busy  # noqa: F401 (a fixture)
from conftest import wait_for_job

pytestmark = pytest.mark.cluster

HOSTILE_NAME = "fine-tune | lr=3e-4 — Ünïcødé run"


def script(body: str, *directives: str) -> str:
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), body]
    return "\n".join(lines) + "\n"


def settled_history(slurm, ident: str, timeout: float = 60) -> dict:
    """The job's accounting row once slurmdbd has the whole record (it lags the controller a little)."""
    deadline = time.monotonic() + timeout
    while True:
        history = slurm.history([ident])
        rows = history[history["job_id"] == ident]
        settled = not rows.empty and rows.iloc[0]["partition"] and rows.iloc[0]["exit_code"]
        if settled and rows.iloc[0]["state"] == "COMPLETED":
            return rows.iloc[0].to_dict()
        assert time.monotonic() < deadline, history.to_string()
        time.sleep(0.5)


@pytest.fixture(scope="module")
def over_time_job(dev_cluster, tmp_path_factory):
    """A one-minute job that sleeps longer, submitted early so it times out while other tests run."""
    workdir = tmp_path_factory.mktemp("timeout")
    result = subprocess.run(
        ["sbatch", "--parsable", "--time=1", f"--chdir={workdir}", "--wrap", "sleep 600"],
        capture_output=True, text=True, env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_partitions_report_nodes_cpus_and_gpu_types(slurm, over_time_job):
    partitions = slurm.partitions().set_index("partition")
    assert list(partitions.index) == ["cpu", "gpu"]
    assert bool(partitions.loc["cpu", "default"]) and not bool(partitions.loc["gpu", "default"])
    assert partitions.loc["gpu", "gpu_types"] == {"a100": 4, "h100": 2}
    assert partitions.loc["gpu", "gpus"] == 6
    assert partitions.loc["cpu", "cpus"] >= 8 and partitions.loc["cpu", "nodes"] == 1
    assert partitions.loc["cpu", "memory_bytes"] > 512 * 1024**2


def test_a_job_round_trips_through_queue_job_history_and_logs(slurm, tmp_path):
    ident = slurm.submit(
        script("echo 'out line'; echo 'err line' >&2; sleep 2", f"--job-name='{HOSTILE_NAME}'"),
        extra_args=["--chdir", str(tmp_path)],
    )
    queue = slurm.queue()
    row = queue[queue["job_id"] == ident]
    assert len(row) == 1 and row.iloc[0]["name"] == HOSTILE_NAME
    assert row.iloc[0]["comment"].startswith("betty:")
    job = wait_for_job(slurm, ident)
    # until accounting has the job, its exit code is unknown (never the stub row's meaningless 0:0)
    assert job.state is JobState.COMPLETED and job.exit_code in (None, "0:0")
    assert job.name == HOSTILE_NAME and job.partition == "cpu"
    assert job.elapsed is not None and job.elapsed.total_seconds() >= 1
    record = settled_history(slurm, ident)
    assert record["name"] == HOSTILE_NAME and record["state"] == "COMPLETED" and record["partition"] == "cpu"
    assert record["exit_code"] == "0:0" and slurm.job(ident).exit_code == "0:0"
    assert "out line" in slurm.tail(ident, "out") and "err line" in slurm.tail(ident, "err")


def test_stdout_and_stderr_apart_when_the_script_asks(slurm, tmp_path):
    ident = slurm.submit(
        script("echo to-out; echo to-err >&2", f"--output={tmp_path}/o-%j.txt", f"--error={tmp_path}/e-%j.txt"),
    )
    wait_for_job(slurm, ident)
    assert slurm.tail(ident, "out", lines=5) == "to-out\n"
    assert slurm.tail(ident, "err", lines=5) == "to-err\n"


def test_an_array_job_shows_its_tasks(slurm, tmp_path):
    ident = slurm.submit(script("sleep 1", "--array=1-3%2"), extra_args=["--chdir", str(tmp_path)])
    queue = slurm.queue()
    mine = queue[queue["array_job_id"] == ident]
    assert not mine.empty and all(jid.startswith(f"{ident}_") for jid in mine["job_id"])
    deadline = time.monotonic() + 120
    while True:
        history = slurm.history([ident])
        tasks = history[history["job_id"].str.startswith(f"{ident}_")]
        if len(tasks) == 3 and set(tasks["state"]) == {"COMPLETED"}:
            break
        assert time.monotonic() < deadline, history[["job_id", "state"]].to_string()
        time.sleep(1)
    assert sorted(tasks["job_id"]) == [f"{ident}_1", f"{ident}_2", f"{ident}_3"]


def test_a_job_cancelled_while_running_is_cancelled(slurm, tmp_path):
    ident = slurm.submit(script("sleep 120"), extra_args=["--chdir", str(tmp_path)])
    wait_for_job(slurm, ident, until=lambda job: job.state is JobState.RUNNING)
    slurm.cancel(ident)
    assert wait_for_job(slurm, ident).state is JobState.CANCELLED


def test_hostile_job_ids_never_reach_the_cluster(slurm):
    for bad in ("1; rm -rf ~", "$(reboot)", "12 13", "", "-1", "1_", "abc", "１２３"):
        with pytest.raises(UsageError, match="is not a Slurm job id"):
            slurm.cancel(bad)
        with pytest.raises(UsageError):
            slurm.history([bad])


def test_unknown_job_is_a_clear_error(slurm):
    with pytest.raises(SlurmError, match="job 999999 is not known to the cluster"):
        slurm.job("999999")


def test_a_refused_submission_carries_slurms_words(slurm, tmp_path):
    with pytest.raises(SlurmError, match="sbatch: .*Requested node configuration is not available"):
        slurm.submit(script("true", "--partition=gpu", "--gres=gpu:h100:3"), extra_args=["--chdir", str(tmp_path)])


def test_a_job_over_its_memory_is_out_of_memory(ssh_profile, dev_cluster, tmp_path):
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking

    slurm = Blocking(SlurmClient(ssh_profile.open_transport(), work_dir=ssh_profile.work_dir))
    hog = "python3 -c 'import time; x = bytearray(400 * 1024 * 1024); time.sleep(10)'"
    ident = slurm.submit(script(hog, "--mem=64M"), extra_args=["--chdir", str(tmp_path)])
    job = wait_for_job(slurm, ident)
    conf = Path(dev_cluster["SLURM_CONF"]).read_text()
    if "TaskPlugin=task/cgroup" in conf:
        assert job.state is JobState.OUT_OF_MEMORY
    else:  # without memory cgroups Slurm's polling kills it and reports FAILED
        assert job.state is JobState.FAILED and "Exceeded job memory limit" in slurm.tail(ident, "err")


def test_user_format_variables_cannot_break_parsing(local_profile, monkeypatch, tmp_path):
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking

    monkeypatch.setenv("SQUEUE_FORMAT", "%.5i %j")
    monkeypatch.setenv("SACCT_FORMAT", "JobID,State")
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    monkeypatch.setenv("SBATCH_PARTITION", "gpu")  # an inherited allocation must not steer submissions
    slurm = Blocking(SlurmClient(local_profile.open_transport(), work_dir=local_profile.work_dir))
    ident = slurm.submit(script("true"), extra_args=["--chdir", str(tmp_path)])
    job = wait_for_job(slurm, ident)
    assert job.partition == "cpu" and job.submitted is not None
    assert settled_history(slurm, ident)["submitted"].year >= 2024


def test_history_falls_back_to_the_queue_when_accounting_is_off(dev_cluster, tmp_path):
    from betty_jupyter.transport.local import LocalTransport
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking

    conf = tmp_path / "slurm.conf"
    original = Path(dev_cluster["SLURM_CONF"])
    conf.write_text(original.read_text().replace(
        "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageType=accounting_storage/none"))
    for sibling in ("gres.conf", "plugstack.conf", "cgroup.conf"):
        shutil.copy(original.parent / sibling, tmp_path / sibling)
    sacct = subprocess.run(["sacct", "-X"], capture_output=True, text=True, env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"})
    assert "accounting storage is disabled" in sacct.stderr
    slurm = Blocking(SlurmClient(LocalTransport(env={"SLURM_CONF": str(conf)}), work_dir=str(tmp_path)))
    ident = slurm.submit(script("true"), extra_args=["--chdir", str(tmp_path)])
    deadline = time.monotonic() + 60
    while (history := slurm.history([ident])).empty or history.iloc[0]["state"] != "COMPLETED":
        assert time.monotonic() < deadline, history.to_string()
        time.sleep(0.5)
    assert history.iloc[0]["job_id"] == ident


def test_a_job_over_its_time_limit_times_out(ssh_profile, over_time_job):
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking

    slurm = Blocking(SlurmClient(ssh_profile.open_transport(), work_dir=ssh_profile.work_dir))
    job = wait_for_job(slurm, over_time_job, timeout=300)
    assert job.state is JobState.TIMEOUT
    assert job.time_limit is not None and job.time_limit.total_seconds() == 60


def test_history_shows_only_the_persons_jobs_unless_asked_for_everyones(slurm, busy):
    """sacct shows root, as which the dev cluster runs, everyone's jobs unless told whose: Betty tells it."""
    theirs = busy.submit("--wrap", "true", other=True)
    deadline = time.monotonic() + 60
    # accounting lists a job in a time window once slurmdbd has its whole record, a moment after it shows by id
    while theirs not in busy.run("sacct", "-n", "-X", "-P", "--allusers", "--starttime=now-1hours", "-o",
                                 "JobID").split():
        assert time.monotonic() < deadline, f"job {theirs} did not reach accounting's window"
        time.sleep(0.3)
    mine = slurm.history(since="now-1hours")
    assert theirs not in set(mine["job_id"].astype(str)) and set(mine["user"]) <= {busy.user}, set(mine["user"])
    everyone = slurm.history(since="now-1hours", all_users=True)
    assert theirs in set(everyone["job_id"].astype(str))
    assert theirs in set(slurm.history([theirs])["job_id"].astype(str)), "a job asked for by id is shown"


def test_a_strangers_job_name_with_betty_s_separator_hides_no_job_and_forges_no_field(slurm, busy):
    """Another user names a job with Betty's field separator, line breaks and what reads as a whole row of fields.
    Every read runs with a delimiter of its own (a new random word each time), so the row splits exactly: the job
    is listed under its owner with its name as written (the separator shown as ␟), and the job after it too."""
    forged_row = SEPARATOR.join(["9999", "9999", "N/A", "forged", busy.user, "acct", "cpu", "RUNNING"])
    name = f"theirs{SEPARATOR * 25}\n{forged_row}\nend"
    theirs = busy.submit("--hold", f"--job-name={name}", "--wrap", "true", other=True)
    mine = busy.submit("--hold", "--job-name=mine", "--wrap", "true")
    shown = name.replace(SEPARATOR, SHOWN_SEPARATOR)
    queue = slurm.queue().set_index("job_id")
    assert {theirs, mine} <= set(queue.index) and "9999" not in set(queue.index)
    assert (queue.loc[theirs, "user"], queue.loc[theirs, "name"], queue.loc[theirs, "state"]) == (
        OTHER_USER, shown, "PENDING")
    assert (queue.loc[mine, "user"], queue.loc[mine, "name"]) == (busy.user, "mine")
    rows = {row["job_id"]: row for row in slurm.queue_rows()}
    assert rows[theirs]["name"] == shown and rows[theirs]["user"] == OTHER_USER and rows[mine]["name"] == "mine"
    deadline = time.monotonic() + 60
    while theirs not in set((history := slurm.history([theirs, mine], all_users=True))["job_id"].astype(str)):
        assert time.monotonic() < deadline, f"job {theirs} did not reach accounting"
        time.sleep(0.3)
    recorded = history.set_index("job_id")
    assert recorded.loc[theirs, "name"] == shown and recorded.loc[theirs, "user"] == OTHER_USER
    assert recorded.loc[mine, "name"] == "mine" and "9999" not in set(recorded.index)
