"""Reads that start fast and counts that count array tasks: the plain-row tables print exactly what the pandas
tables print, a pending array's row counts as its tasks, and a prompt exit loses no output."""

from __future__ import annotations

import subprocess
import sys

import pytest

from betty_jupyter.agent.condense import condense_table
from betty_jupyter.agent.tools.cluster import counts_by_state
from betty_jupyter.cluster import parsing
from betty_jupyter.cluster.jobs import array_task_count
from betty_jupyter.cluster.tables import PARTITION_COLUMNS, QUEUE_COLUMNS, text_table
from betty_jupyter.cluster.text_tables import rows_table
from betty_jupyter.read_commands import ME
from conftest import REPO
from hostile import hostile

S = "\x1f"
HOSTILE = [text for text in hostile() if S not in text]


@pytest.mark.parametrize(("spec", "tasks"), [
    ("", 1), ("4", 1), ("0-999", 1000), ("0-999%10", 1000), ("[0-999%10]", 1000), ("1,3,5-9", 7),
    ("0-20:5", 5), ("0-9,20,22,24,26,28%3", 15), ("9-0", 1), ("x-y", 1), ("0-3:0", 1), ("１-９", 1),
])
def test_an_array_row_counts_its_tasks(spec, tasks):
    assert array_task_count(spec) == tasks


def queue_text(*rows: dict[str, str]) -> str:
    lines = []
    for row in rows:
        values = {name: "" for _, name in parsing.SQUEUE_FIELDS}
        values.update({"partition": "cpu", "state": "PENDING", "elapsed": "0:00", "time_limit": "UNLIMITED",
                       "tres_per_node": "N/A", "memory": "1000M", "nodes": "1", "cpus": "1",
                       "submitted": "2026-11-20T10:00:00", "started": "N/A", "array_task_id": "N/A",
                       "reason": "None", "nodelist": "", **row})
        lines.append(S.join(values[name] for _, name in parsing.SQUEUE_FIELDS))
    return "\n".join(lines) + "\n"


QUEUE = queue_text(
    {"job_id": "7", "name": "train", "user": "ada", "state": "RUNNING", "elapsed": "1-02:03:04",
     "time_limit": "2-00:00:00", "tres_per_node": "gres/gpu:a100:2", "nodelist": "n1"},
    {"job_id": "8_[0-999%10]", "array_job_id": "8", "array_task_id": "0-999%10", "name": "sweep", "user": "ada",
     "reason": "JobHeldUser"},
    *({"job_id": str(100 + index), "name": text, "user": "bob", "reason": "Priority"}
      for index, text in enumerate(HOSTILE)),
)


def test_betty_jobs_prints_what_the_pandas_table_prints():
    plain = rows_table(parsing.queue_rows(QUEUE), QUEUE_COLUMNS)
    assert plain == text_table(parsing.parse_queue(QUEUE), QUEUE_COLUMNS)
    assert "\x1b" not in plain and len(plain.splitlines()) == 3 + len(HOSTILE)


def test_betty_partitions_prints_what_the_pandas_table_prints():
    rows = [{"partition": "cpu*", "availability": "up", "nodes_by_state": "1/1/0/2", "cpus_by_state": "2/6/0/8",
             "memory": "2000", "gres": "(null)", "time_limit": "infinite", "nodes": "2"},
            {"partition": "gpu", "availability": "down", "nodes_by_state": "0/1/0/1", "cpus_by_state": "0/8/0/8",
             "memory": "4000+", "gres": "gpu:a100:4,gpu:h100:2(S:0)", "time_limit": "1-00:00:00", "nodes": "1"}]
    text = "".join(S.join(row[name] for _, name in parsing.SINFO_FIELDS) + "\n" for row in rows)
    plain = rows_table(parsing.plain_partitions(text), PARTITION_COLUMNS)
    assert plain == text_table(parsing.parse_partitions(text), PARTITION_COLUMNS)
    assert "INFINITE" in plain and "1-00:00:00" in plain and "a100:4,h100:2" in plain


def test_counts_count_the_tasks_of_a_pending_array():
    frame = parsing.parse_queue(QUEUE)
    assert list(frame["tasks"][:2]) == [1, 1000]
    assert counts_by_state(frame).startswith(f"{1001 + len(HOSTILE)} job(s): {1000 + len(HOSTILE)} PENDING, 1 RUNNING")
    many = parsing.parse_queue(QUEUE + queue_text(*({"job_id": str(500 + i), "user": "cy"} for i in range(40))))
    condensed = condense_table(many, user="ada")
    assert condensed.splitlines()[0] == f"{len(many)} rows, {1041 + len(HOSTILE)} jobs (array tasks counted)."
    assert f"by user: ada: 1001, bob: {len(HOSTILE)}, cy: 40" in condensed
    assert "all 1001 jobs of ada, in 2 rows:" in condensed


def run_python(code: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def test_a_prompt_exit_keeps_exit_handlers_and_unflushed_output():
    code = ("import atexit, sys\nfrom betty_jupyter.cli import exit_promptly\n"
            "atexit.register(lambda: print('handler ran'))\nsys.stdout.write('unflushed; ')\n"
            "sys.stderr.write('to stderr')\nexit_promptly(3)\n")
    process = run_python(code)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (3, "unflushed; handler ran\n", "to stderr")


def test_a_prompt_exit_waits_for_a_thread_that_is_still_working():
    code = ("import sys, threading\nfrom betty_jupyter.cli import exit_promptly\n"
            "def work():\n    line = sys.stdin.readline()\n    print('finished ' + line.strip(), flush=True)\n"
            "threading.Thread(target=work).start()\nprint('ready', flush=True)\nexit_promptly(0)\n")
    process = run_python(code, stdin=subprocess.PIPE)
    assert process.stdout.readline() == "ready\n"
    out, _ = process.communicate("go\n", timeout=60)
    assert (process.returncode, out) == (0, "finished go\n")


def test_each_command_is_found_in_the_module_that_adds_it():
    import importlib

    from betty_jupyter.cli import COMMAND_MODULES, COMMANDS, build_parser
    from betty_jupyter.cli.parser import Parser

    for module in COMMAND_MODULES:
        commands = Parser().add_subparsers()
        importlib.import_module(f"betty_jupyter.cli.{module}").add_commands(commands)
        assert set(commands.choices) == {name for name, owner in COMMANDS.items() if owner == module}, module
    every = build_parser([]).format_help()
    assert all(name in every for name in COMMANDS)
    only = build_parser(["jobs", "--me"])
    assert only.parse_args(["jobs", "--me"]).user == ME and "wiki" not in only.format_help()


def test_a_read_imports_only_its_own_commands():
    code = ("import sys\nfrom betty_jupyter.cli import build_parser\nbuild_parser(['jobs', '--json'])\n"
            "print(' '.join(sorted(name for name in sys.modules if name.startswith('betty_jupyter.cli.'))))")
    process = run_python(code)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out.split()) == (0, ["betty_jupyter.cli.parser", "betty_jupyter.cli.reads"]), err
