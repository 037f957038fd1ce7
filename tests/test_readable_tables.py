"""Slurm's tables in the words and units a person reads: the CLI's, the agent's and the notebook's tables."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from betty_jupyter.cluster import parsing
from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.cluster.tables import HISTORY_COLUMNS, PARTITION_COLUMNS, QUEUE_COLUMNS, memory_text, readable, text_table
from betty_jupyter.experiments.content import status_text
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.gpu import EstimateRequest, estimate
from betty_jupyter.gpu.report import render_estimate, render_estimate_record

S = "\x1f"


@pytest.mark.parametrize(("size", "shown"), [
    (104857600, "100 MiB"), (629145600, "600 MiB"), (1.5 * 2**30, "1.5 GiB"), (4 * 2**30, "4 GiB"),
    (123456789, "118 MiB"), (512, "512 B"), (2048, "2 KiB"), (3 * 2**40, "3 TiB"), (0, "0 B"),
    (None, ""), (float("nan"), ""), (pd.NA, ""),
])
def test_sizes_read_as_a_person_says_them(size, shown):
    assert memory_text(size) == shown


def history(*rows: dict[str, str]) -> pd.DataFrame:
    lines = []
    for row in rows:
        values = {name: "" for _, name in parsing.SACCT_FIELDS}
        values.update(partition="cpu", submitted="2026-11-20T10:00:00", **row)
        lines.append(S.join(values[name] for _, name in parsing.SACCT_FIELDS))
    return parsing.parse_history("\n".join(lines) + "\n")


def test_history_shows_sizes_no_limit_and_exit_codes_only_for_ended_jobs():
    frame = history(
        {"job_id": "10", "job_id_raw": "10", "name": "train", "state": "RUNNING", "exit_code": "0:0",
         "time_limit": "UNLIMITED", "elapsed": "00:01:00"},
        {"job_id": "10.batch", "job_id_raw": "10.batch", "state": "RUNNING", "max_rss": "100M"},
        {"job_id": "11", "job_id_raw": "11", "name": "eval", "state": "FAILED", "exit_code": "1:0",
         "time_limit": "01:00:00", "elapsed": "00:00:03"},
        {"job_id": "11.batch", "job_id_raw": "11.batch", "state": "FAILED", "max_rss": "614400K"},
    )
    shown = readable(frame, [*HISTORY_COLUMNS, "time_limit"])
    assert list(shown.columns) == ["job_id", "name", "user", "partition", "state", "exit_code", "started", "elapsed",
                                   "gpus", "max_rss", "time_limit"], "a size's header no longer says bytes"
    assert list(shown["max_rss"]) == ["100 MiB", "600 MiB"]
    assert list(shown["exit_code"]) == ["", "1:0"], "a running job has no exit code yet (accounting writes 0:0)"
    assert list(shown["time_limit"]) == ["INFINITE", "01:00:00"]
    assert list(shown["elapsed"]) == ["01:00", "00:03"]
    assert "NaT" not in text_table(frame, HISTORY_COLUMNS) and "104857600" not in text_table(frame, HISTORY_COLUMNS)


def test_partitions_without_a_limit_say_infinite():
    values = {"partition": "cpu*", "availability": "up", "nodes_by_state": "1/0/0/1", "cpus_by_state": "2/2/0/4",
              "memory": "2000", "gres": "(null)", "time_limit": "infinite", "nodes": "1"}
    frame = parsing.parse_partitions(S.join(values[name] for _, name in parsing.SINFO_FIELDS) + "\n")
    assert readable(frame, PARTITION_COLUMNS)["time_limit"].tolist() == ["INFINITE"]


def test_a_queue_cell_stays_on_its_line():
    frame = pd.DataFrame([{"job_id": "7", "name": "a\nforged 8 row\x1b[2J", "state": "PENDING",
                           "time_limit": pd.Timedelta(minutes=5)}])
    text = text_table(frame, QUEUE_COLUMNS)
    assert len(text.splitlines()) == 2 and "a\\nforged 8 row\\x1b[2J" in text and "05:00" in text


def test_a_submissions_gpu_estimate_reads_as_its_breakdown():
    result = estimate("Llama-3.1-8B", EstimateRequest(method="lora"))
    shown = render_estimate_record(result.as_dict())
    assert shown.splitlines()[1:] == render_estimate(result).splitlines()[1:], "the same breakdown as the CLI's"
    assert shown.splitlines()[0] == "Llama-3.1-8B, lora, bf16-mixed, hf"
    # The agent passes the estimate on: what is not a number is left out, nothing is evaluated.
    odd = render_estimate_record({"model": "m", "breakdown": {"weights": "lots", "runtime": 1.0}, "peak_gib": True,
                                  "notes": "not a list"})
    assert odd == "m\n  runtime            1.00 GiB"


@pytest.mark.parametrize(("state", "shown"), [
    ("RUNNING", "job 12 on dev: RUNNING · elapsed 00:01:00 · peak memory 600 MiB"),
    ("FAILED", "job 12 on dev: FAILED · exit code 1:0 · elapsed 00:01:00 · peak memory 600 MiB"),
])
def test_an_experiments_status_line_names_an_exit_code_only_once_the_job_ended(state, shown):
    experiment = Experiment(slug="s", job_id="12", cluster="dev", submitted="2026-11-20", goal="g", script="#!/bin/bash",
                            script_path="~/s.sbatch")
    job = Job(job_id="12", name="s", user="u", partition="cpu", state=JobState(state),
              exit_code="0:0" if state == "RUNNING" else "1:0", elapsed=timedelta(minutes=1), max_rss_bytes=600 * 2**20)
    assert status_text(experiment, job, state) == shown
