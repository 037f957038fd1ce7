"""Pure parsers: Slurm's text into typed rows, whatever odd values it prints."""

from __future__ import annotations

import pandas as pd
import pytest

from betty_jupyter.cluster import parsing
from betty_jupyter.cluster.jobs import JobState, job_id, parse_sbatch_output
from betty_jupyter.errors import SlurmError, UsageError

S = parsing.SEPARATOR


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 1000", JobState.CANCELLED), ("CANCELLED+", JobState.CANCELLED),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY), ("OOM", JobState.OUT_OF_MEMORY), ("NODE_FAIL", JobState.NODE_FAIL),
        ("PREEMPTED", JobState.PREEMPTED), ("REQUEUED", JobState.REQUEUED), ("PD", JobState.PENDING),
        ("TIMEOUT", JobState.TIMEOUT), ("something new", JobState.UNKNOWN), ("", JobState.UNKNOWN),
    ],
)
def test_every_state_parses_on_its_first_word(text, state):
    assert JobState.parse(text) is state


def test_finished_states():
    assert JobState.OUT_OF_MEMORY.finished and JobState.CANCELLED.finished
    assert not JobState.PENDING.finished and not JobState.REQUEUED.finished


@pytest.mark.parametrize(("stdout", "ident"), [("123\n", "123"), ("456;cluster-a\n", "456"), ("warning: x\n789\n", "789")])
def test_sbatch_parsable_output(stdout, ident):
    assert parse_sbatch_output(stdout) == ident


@pytest.mark.parametrize("stdout", ["", "Submitted batch job 12\n", "abc;x\n"])
def test_unexpected_sbatch_output_is_an_error(stdout):
    with pytest.raises(SlurmError):
        parse_sbatch_output(stdout)


@pytest.mark.parametrize("good", ["1", "123", "123_4", 42])
def test_job_ids_that_reach_a_command_line(good):
    assert job_id(good) == str(good)


def test_surrounding_whitespace_is_dropped_not_passed_on():
    assert job_id(" 123\n") == "123"


@pytest.mark.parametrize("bad", ["", "12 3", "1;ls", "123_[1-5%2]", "-5", "1_2_3", "١٢٣", "1\n2", "0x10"])
def test_job_ids_that_never_do(bad):
    with pytest.raises(UsageError, match="is not a Slurm job id"):
        job_id(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1-02:03:04", 93784), ("02:03:04", 7384), ("05:30", 330), ("00:00:01.500", 1.5), ("3-00", 259200),
     ("UNLIMITED", None), ("INVALID", None), ("Partition_Limit", None), ("", None)],
)
def test_durations(text, seconds):
    parsed = parsing.durations(pd.Series([text], dtype=str)).iloc[0]
    assert (pd.isna(parsed) if seconds is None else parsed.total_seconds() == seconds)


@pytest.mark.parametrize(
    ("text", "size"),
    [("4000M", 4000 * 2**20), ("12.5G", int(12.5 * 2**30)), ("1234K", 1234 * 1024), ("4000Mn", 4000 * 2**20),
     ("2Gc", 2 * 2**30), ("0", 0), ("512", 512 * 2**20), ("", None), ("lots", None)],
)
def test_memory_sizes(text, size):
    parsed = parsing.memory_bytes(pd.Series([text], dtype=str)).iloc[0]
    assert (pd.isna(parsed) if size is None else parsed == size)


@pytest.mark.parametrize(
    ("tres", "count", "kind"),
    [("billing=1,cpu=1,gres/gpu:h100=1,gres/gpu=1,mem=256M,node=1", 1, "h100"),
     ("cpu=4,gres/gpu=2,mem=1G", 2, None), ("gres:gpu:a100:4", 4, "a100"), ("gres/gpu:3", 3, None),
     ("cpu=1,mem=1G", 0, None), ("N/A", 0, None)],
)
def test_gpus_from_tres(tres, count, kind):
    counts, kinds = parsing.gpus_from_tres(pd.Series([tres], dtype=str))
    assert counts.iloc[0] == count and (kinds.iloc[0] == kind if kind else kinds.iloc[0] is None)


def test_history_folds_steps_into_their_job_with_the_peak_memory():
    def row(ident, state, rss="", name="train | run 1"):
        values = {name_: "" for _, name_ in parsing.SACCT_FIELDS}
        values.update(job_id=ident, job_id_raw=ident, name=name, state=state, max_rss=rss, partition="gpu",
                      alloc_tres="cpu=1,gres/gpu:a100=2,gres/gpu=2", elapsed="00:10:00", submitted="2026-11-20T10:00:00")
        return S.join(values[name_] for _, name_ in parsing.SACCT_FIELDS)

    text = "\n".join([
        row("10", "OUT_OF_MEMORY"), row("10.batch", "OUT_OF_MEMORY", "2G"), row("10.0", "OUT_OF_MEMORY", "900M"),
        row("10.extern", "COMPLETED", "0"),
        row("11_3", "CANCELLED by 1000"), row("11_3.batch", "CANCELLED", "10K"),
        row("12", "COMPLETED", name="no steps"),
    ]) + "\n"
    history = parsing.parse_history(text)
    assert list(history["job_id"]) == ["10", "11_3", "12"]
    assert list(history["state"]) == ["OUT_OF_MEMORY", "CANCELLED", "COMPLETED"]
    assert list(history["max_rss_bytes"].astype(object).where(history["max_rss_bytes"].notna(), None)) == [2 * 2**30, 10 * 1024, None]
    assert [None if pd.isna(name) else name for name in history["max_rss_step"]] == ["batch", "batch", None]
    assert list(history["gpus"]) == [2, 2, 2] and set(history["gpu_type"]) == {"a100"}
    assert history["elapsed"].iloc[0] == pd.Timedelta(minutes=10)
    assert history["submitted"].iloc[0] == pd.Timestamp("2026-11-20T10:00:00")
    assert history["name"].iloc[0] == "train | run 1"


def test_queue_with_pending_array_and_reason():
    values = ["123_[1-5%2]", "123", "N/A", "sweep", "alice", "proj", "gpu", "PENDING", "JobArrayTaskLimit",
              "0:00", "1-00:00:00", "1", "4", "16G", "gres/gpu:h100:1", "", "2026-11-21T09:00:00", "N/A", "betty:abc"]
    queue = parsing.parse_queue(S.join(values) + "\n")
    row = queue.iloc[0]
    assert row["job_id"] == "123_[1-5%2]" and row["array_job_id"] == "123" and row["array_task_id"] == ""
    assert row["state"] == "PENDING" and row["reason"] == "JobArrayTaskLimit"
    assert row["time_limit"] == pd.Timedelta(days=1) and pd.isna(row["started"])
    assert row["gpus"] == 1 and row["gpu_type"] == "h100" and row["memory_bytes"] == 16 * 2**30


@pytest.mark.parametrize("name", ["a\nb", "x\n   UserId=alice(1000)", "\n", "two\n\nbreaks"])
def test_a_job_name_with_line_breaks_stays_one_row(name):
    def row(ident: str, job_name: str) -> str:
        return S.join([ident, ident, "N/A", job_name, "alice", "proj", "cpu", "RUNNING", "None", "0:01", "5:00",
                       "1", "1", "1G", "", "node1", "2026-11-21T09:00:00", "2026-11-21T09:00:01", ""])
    queue = parsing.parse_queue(row("1", "first") + "\n" + row("2", name) + "\n" + row("3", "last") + "\n")
    assert list(queue["job_id"]) == ["1", "2", "3"] and list(queue["name"]) == ["first", name, "last"]
    assert list(queue["user"]) == ["alice"] * 3 and list(queue["state"]) == ["RUNNING"] * 3


def test_a_row_holding_the_separator_itself_is_left_out_not_misread():
    good = S.join(["7", "7", "N/A", "ok", "alice", "proj", "cpu", "RUNNING", "None", "0:01", "5:00",
                   "1", "1", "1G", "", "node1", "2026-11-21T09:00:00", "2026-11-21T09:00:01", ""])
    forged = good.replace("ok", f"x{S}root{S}\n8{S}8", 1).replace("7", "9", 2)
    queue = parsing.parse_queue(f"{good}\n{forged}\n{good}\n")
    assert list(queue["job_id"]) == ["7", "7"] and set(queue["user"]) == {"alice"}


def test_empty_output_gives_empty_typed_tables():
    assert parsing.parse_queue("").empty and parsing.parse_history("").empty
    assert parsing.parse_partitions("").empty


def test_partitions_merge_node_groups():
    text = (f"gpu*{S}up{S}1/2/0/3{S}8/40/0/48{S}192000{S}gpu:a100:4(S:0-1){S}2-00:00:00{S}3\n"
            f"gpu*{S}up{S}0/1/1/2{S}0/32/0/32{S}96000{S}gpu:h100:8{S}2-00:00:00{S}2\n"
            f"debug{S}down{S}0/1/0/1{S}0/4/0/4{S}8000{S}(null){S}30:00{S}1\n")
    partitions = parsing.parse_partitions(text).set_index("partition")
    gpu = partitions.loc["gpu"]
    assert gpu["default"] and gpu["nodes"] == 5 and gpu["nodes_idle"] == 3 and gpu["cpus"] == 80
    assert gpu["gpu_types"] == {"a100": 4, "h100": 8} and gpu["gpus"] == 3 * 4 + 2 * 8
    assert gpu["memory_bytes"] == 96000 * 2**20 and gpu["time_limit"] == pd.Timedelta(days=2)
    assert gpu["memory_bytes_max"] == 192000 * 2**20 and partitions.loc["debug", "memory_bytes_max"] == 8000 * 2**20
    assert partitions.loc["debug", "availability"] == "down" and partitions.loc["debug", "gpus"] == 0


def test_the_peak_names_its_step_in_slurms_units():
    """MaxRSS is per step, in K, M or G: the job's peak is the largest, named after the step that reached it."""
    def row(ident, rss):
        values = {name_: "" for _, name_ in parsing.SACCT_FIELDS}
        values.update(job_id=ident, job_id_raw=ident, name="train", state="FAILED", max_rss=rss)
        return S.join(values[name_] for _, name_ in parsing.SACCT_FIELDS)

    text = "\n".join([row("7", ""), row("7.batch", "631212K"), row("7.0", "1.5G"), row("7.1", "900M"),
                      row("8", ""), row("8.batch", ""), row("8.extern", "0")]) + "\n"
    history = parsing.parse_history(text)
    assert history["max_rss_bytes"].iloc[0] == round(1.5 * 2**30) and history["max_rss_step"].iloc[0] == "0"
    assert history["max_rss_bytes"].iloc[1] == 0 and history["max_rss_step"].iloc[1] == "extern"
