"""Where a job writes, read field by field from Slurm's real output: no job name can move a path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from betty_jupyter.cluster.jobfiles import SeveralRecords, parse_scontrol_json, parse_scontrol_text
from betty_jupyter.errors import SlurmError

DATA = Path(__file__).parent / "data" / "scontrol"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_a_name_holding_stdout_does_not_move_the_path() -> None:
    files = parse_scontrol_text(text("22.05-name-with-stdout.txt"), "86")
    assert files is not None
    assert (files.stdout, files.stderr, files.work_dir) == ("/tmp/c_cap/o-86.out", "/tmp/c_cap/o-86.out", "/tmp/c_cap")
    assert (files.user, files.user_id) == ("root", 0)


def test_expanded_patterns_are_taken_as_the_controller_prints_them() -> None:
    files = parse_scontrol_text(text("22.05-stderr-pattern.txt"), "90")
    assert files is not None
    assert (files.stream("out"), files.stream("err")) == ("/tmp/c_cap/slurm-90.out", "/tmp/c_cap/e-plain-90.err")


@pytest.mark.parametrize(("name", "ident", "why"), [
    ("22.05-name-with-key-lines.txt", "87", "UserId appears twice"),
    ("22.05-name-with-record.txt", "88", "lists 2 jobs"),
])
def test_a_name_with_line_breaks_that_fakes_fields_is_refused(name: str, ident: str, why: str) -> None:
    with pytest.raises(SlurmError, match=why) as refused:
        parse_scontrol_text(text(name), ident)
    assert "\n" not in str(refused.value)


def test_a_forged_record_is_never_asked_for_alone() -> None:
    with pytest.raises(SeveralRecords) as refused:
        parse_scontrol_text(text("22.05-name-with-record.txt"), "88")
    assert refused.value.task is None


def test_an_array_id_names_its_own_task_which_is_then_read_alone() -> None:
    with pytest.raises(SeveralRecords) as several:
        parse_scontrol_text(text("22.05-array.txt"), "89")
    assert several.value.task == "89_2"
    task = parse_scontrol_text(text("22.05-array-task.txt"), "89_1")
    assert task is not None and task.stdout == "/tmp/c_cap/slurm-89_1.out"
    with pytest.raises(SlurmError, match="names another job"):
        parse_scontrol_text(text("22.05-array-task.txt"), "89_2")


def test_a_record_of_another_job_or_none_at_all() -> None:
    with pytest.raises(SlurmError, match="names another job"):
        parse_scontrol_text(text("22.05-name-with-stdout.txt"), "860")
    assert parse_scontrol_text("", "86") is None
    assert parse_scontrol_json('{"jobs": [], "errors": []}', "86") is None


def test_slurm_24_json_reads_wrapped_numbers_and_ignores_the_name() -> None:
    files = parse_scontrol_json(text("24.11-job.json"), "4242")
    assert files is not None
    assert (files.user, files.user_id, files.work_dir) == ("alice", 1000, "/home/alice/run")
    assert files.stdout == files.stderr == "/home/alice/run/slurm-4242.out"


def test_slurm_24_json_array_id_picks_the_task_with_that_id() -> None:
    files = parse_scontrol_json(text("24.11-array.json"), "4300")
    assert files is not None and files.stdout == "/scratch/alice/sweep/slurm-4300_2.out"
    task = parse_scontrol_json(text("24.11-array.json"), "4300_1")
    assert task is not None and task.stdout == "/scratch/alice/sweep/slurm-4300_1.out"


def test_slurm_23_json_with_plain_numbers() -> None:
    job = {"job_id": 7, "array_job_id": 0, "array_task_id": 4294967294, "user_id": 1001, "user_name": "bob",
           "current_working_directory": "/w", "standard_output": "/w/o.txt", "standard_error": ""}
    files = parse_scontrol_json(json.dumps({"jobs": [job]}), "7")
    assert files is not None and (files.user_id, files.stdout, files.stderr) == (1001, "/w/o.txt", None)


@pytest.mark.parametrize("payload", ["not json", "[]", '{"jobs": {}}', '{"jobs": [1]}',
                                     '{"jobs": [{"job_id": 9}]}', '{"jobs": [{"job_id": 7}, {"job_id": 7}]}'])
def test_malformed_or_foreign_json_is_refused(payload: str) -> None:
    with pytest.raises(SlurmError):
        parse_scontrol_json(payload, "7")
