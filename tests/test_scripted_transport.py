"""The shipped fake transport, and Betty's Slurm client above it: fast, no cluster.

The output scripted here is the dev cluster's own (Slurm 22.05); the same calls against the
real cluster are in ``test_cluster_client.py``.
"""

from __future__ import annotations

import pytest

from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.cluster.scripted import Reply, ScriptedTransport
from betty_jupyter.transport.interface import Transport
from betty_jupyter.errors import SlurmError, UsageError

ROW = SEPARATOR.join([
    "42", "42", "N/A", "train <b>x</b>", "alice", "lab", "gpu", "RUNNING", "None", "1:02:03", "1-00:00:00",
    "1", "8", "32G", "gres/gpu:a100:2", "node01", "2024-05-01T09:30:00", "2024-05-01T09:31:00", "(null)",
])


def test_it_is_a_transport_and_answers_from_the_newest_matching_rule():
    cluster = ScriptedTransport().on("echo", stdout="old\n").on("echo", "hi", stdout="new\n")
    assert isinstance(cluster, Transport)
    assert run_sync(cluster.run(["echo", "hi", "there"])).stdout == "new\n"
    assert run_sync(cluster.run(["echo", "other"])).stdout == "old\n"
    unknown = run_sync(cluster.run(["rm", "-rf", "/"]))
    assert unknown.exit_code == 127 and "not in the script" in unknown.stderr
    assert cluster.calls == [("echo", "hi", "there"), ("echo", "other"), ("rm", "-rf", "/")]


def test_env_in_front_is_seen_through_and_uploads_are_kept():
    cluster = ScriptedTransport(answer=lambda argv: Reply(stdout="from the function\n"))
    cluster.on("sbatch", stdout="7\n")
    assert run_sync(cluster.run(["env", "SLURM_EXPORT_ENV=ALL", "sbatch", "x.sh"])).stdout == "7\n"
    assert cluster.ran("sbatch") == [("env", "SLURM_EXPORT_ENV=ALL", "sbatch", "x.sh")]
    assert run_sync(cluster.run(["hostname"])).stdout == "from the function\n"
    assert run_sync(cluster.put(b"#!/bin/bash\n", "~/.betty/a.sh")) == "/home/researcher/.betty/a.sh"
    assert cluster.files == {"/home/researcher/.betty/a.sh": b"#!/bin/bash\n"}
    run_sync(cluster.close())
    assert cluster.closed


def test_the_slurm_client_reads_a_queue_through_it():
    cluster = ScriptedTransport().on("squeue", stdout=ROW + "\n")
    frame = run_sync(SlurmClient(cluster).queue(user="alice", states=["running"]))
    (argv,) = cluster.ran("squeue")
    assert argv[argv.index("--user") + 1] == "alice" and argv[argv.index("--states") + 1] == "RUNNING"
    row = frame.iloc[0]
    assert (row["job_id"], row["name"], row["gpus"], row["gpu_type"]) == ("42", "train <b>x</b>", 2, "a100")
    assert row["memory_bytes"] == 32 * 1024**3 and row["elapsed"].total_seconds() == 3723
    assert row["comment"] == "" and str(row["state"]) == "RUNNING"


def test_a_slurm_refusal_is_one_line():
    cluster = ScriptedTransport().on("squeue", stderr="squeue: error: Invalid user: nobody\n", exit_code=1)
    with pytest.raises(SlurmError, match="Invalid user: nobody"):
        run_sync(SlurmClient(cluster).queue(user="nobody"))


def test_moving_a_waiting_job_is_one_scontrol_update_and_a_name_with_shell_is_refused_before_it():
    cluster = ScriptedTransport().on("scontrol", "update", stdout="")
    slurm = SlurmClient(cluster)
    run_sync(slurm.move("42", "gpu"))
    assert cluster.ran("scontrol") == [("scontrol", "update", "JobId=42", "Partition=gpu")]
    for hostile in ("gpu;rm -rf ~", "gpu Partition=x", "", "-h"):
        with pytest.raises(UsageError, match="is not a partition name"):
            run_sync(slurm.move("42", hostile))
    assert len(cluster.ran("scontrol")) == 1  # nothing more reached the cluster
    cluster.on("scontrol", "update", stderr="scontrol: error: Job is no longer pending execution for job 42\n",
               exit_code=1)
    with pytest.raises(SlurmError, match="no longer pending"):
        run_sync(slurm.move("42", "gpu"))
