"""A notebook's parameters, injected as papermill does: values become literals, never code."""

from __future__ import annotations

import ast

import pytest

from betty_jupyter.cluster.job_request import CellEnvironment, JobRequest
from betty_jupyter.compute.notebook_job import (
    INJECTED_TAG, NotebookJob, inject, parameters_source, parse_parameters, parse_value, read_notebook,
)
from betty_jupyter.errors import UsageError

HOSTILE = ['"); import os', "a'b\"c", "line one\nline two", "'''; __import__('os').system('id') #", "\\", "${HOME}",
           "__import__('os')", "x = 1; y = 2", "\x00nul"]


def notebook(*cells: dict, minor: int = 5) -> dict:
    return {"nbformat": 4, "nbformat_minor": minor, "metadata": {}, "cells": list(cells)}


def code(source: str, *tags: str, ident: str = "c") -> dict:
    return {"cell_type": "code", "id": ident, "metadata": {"tags": list(tags)}, "source": source, "outputs": [],
            "execution_count": None}


def test_values_are_literals_or_else_the_text_itself():
    assert parse_parameters(["lr=3e-4", "epochs=10", "flag=True", "dims=[1, 2]", "tag=run a", "none=None"]) == {
        "lr": 3e-4, "epochs": 10, "flag": True, "dims": [1, 2], "tag": "run a", "none": None}
    assert parse_value("'quoted'") == "quoted"
    assert parse_value("__import__('os')") == "__import__('os')"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_ends_up_as_a_string_literal_never_code(value):
    source = parameters_source(parse_parameters([f"msg={value}"]))
    statements = ast.parse(source).body
    assert len(statements) == 1 and isinstance(statements[0], ast.Assign)
    assert isinstance(statements[0].value, ast.Constant) and statements[0].value.value == value
    namespace: dict = {}
    exec(compile(source, "<injected>", "exec"), {"__builtins__": {}}, namespace)  # no builtins: only literals run
    assert namespace == {"msg": value}


@pytest.mark.parametrize("word", ["1x=2", "import=1", "os.system=1", "a b=1", "__class__=1", "lr", "=3"])
def test_a_bad_name_is_refused_in_one_line(word):
    with pytest.raises(UsageError) as refused:
        parse_parameters([word])
    assert "\n" not in str(refused.value) and "--param" in str(refused.value)


def test_a_name_given_twice_is_refused():
    with pytest.raises(UsageError, match="twice"):
        parse_parameters(["lr=1", "lr=2"])


def test_the_injected_cell_follows_the_parameters_cell_and_replaces_an_earlier_one():
    book = notebook(code("import math", ident="a"), code("lr = 0.1\nepochs = 1", "parameters", ident="b"),
                    code("# old", INJECTED_TAG, ident=INJECTED_TAG), code("print(lr)", ident="d"))
    injected = inject(book, {"lr": 3e-4})
    cells = injected.notebook["cells"]
    assert [c["id"] for c in cells] == ["a", "b", INJECTED_TAG, "d"]
    assert cells[2]["metadata"]["tags"] == [INJECTED_TAG] and cells[2]["source"] == injected.source
    assert "lr = 0.0003\n" in injected.source and injected.after == 1
    assert "after cell 2" in injected.where()
    assert len(book["cells"]) == 4 and book["cells"][2]["source"] == "# old"  # the original is left as it was


def test_without_a_parameters_cell_it_goes_at_the_top_and_says_so():
    injected = inject(notebook(code("print(1)"), minor=4), {"n": 2})
    assert injected.after is None and "at the top" in injected.where()
    assert injected.notebook["cells"][0]["source"].endswith("n = 2\n")
    assert "id" not in injected.notebook["cells"][0]  # nbformat 4.4 has no cell ids


def test_the_script_runs_the_runner_on_the_notebook_in_the_environment():
    request = JobRequest("debug", 5, 1, CellEnvironment("betty", prefix="/opt/venv"), "nb-t")
    job = NotebookJob("/w/runs/notebook-x", request)
    script = job.script().text
    assert "#SBATCH --gpus=1" in script and "#SBATCH --chdir=/w/runs/notebook-x" in script
    assert script.rstrip().endswith('exec /opt/venv/bin/python3 -u notebook_runner.py "notebook.ipynb" '
                                    '"executed.ipynb"')
    swept = NotebookJob("/w/r", JobRequest("debug", 5), tasks=2).script().text
    assert "notebook-%a.out" in swept and '"notebook-$SLURM_ARRAY_TASK_ID.ipynb"' in swept


def test_the_environment_is_checked_for_nbclient_and_ipykernel():
    argv, problem = CellEnvironment("box", modules=("cuda/12",), prefix="~/envs/t").imports_check(
        ("nbclient", "ipykernel"))
    assert argv[:2] == ["bash", "-lc"]
    assert argv[2] == "module load cuda/12 && \"$HOME\"/envs/t/bin/python3 -c 'import nbclient, ipykernel'"
    assert problem == "environment box cannot import nbclient, ipykernel"


def test_a_grid_name_that_is_a_python_keyword_is_refused_in_one_line(offline_context, tmp_path):
    """``--grid class=1,2`` is a valid shell variable but not a Python one: refused before anything is asked."""
    import asyncio
    import json

    from betty_jupyter.agent.tools import ToolError
    from betty_jupyter.agent.tools.catalog import NotebookSubmit

    (tmp_path / "project" / "nb.ipynb").write_text(json.dumps(notebook(code("print(1)"))))
    asked = {"notebook": "nb.ipynb", "grid": ["class=1,2"], "partition": "cpu", "time": 5}
    with pytest.raises(ToolError) as refused:
        asyncio.run(NotebookSubmit().dry_run(offline_context, asked))
    assert str(refused.value) == "--grid: 'class' is not a Python variable's name; e.g. --grid lr=1e-4,3e-4"


@pytest.mark.parametrize("depth", [201, 5_000, 200_000])
def test_a_notebook_nested_too_deep_is_refused_in_one_line(tmp_path, depth):
    """A notebook whose JSON nests without end (its outputs are anyone's) is one line, not a RecursionError."""
    path = tmp_path / "deep.ipynb"
    path.write_text('{"nbformat": 4, "cells": [], "metadata": {"x": ' + "[" * depth + "]" * depth + "}}")
    with pytest.raises(UsageError) as refused:
        read_notebook(path)
    assert "nests more than 200 levels" in str(refused.value) and "\n" not in str(refused.value)


def test_a_notebook_with_nested_outputs_is_read(tmp_path):
    path = tmp_path / "nested.ipynb"
    path.write_text('{"nbformat": 4, "cells": [], "metadata": {"x": ' + "[" * 150 + "]" * 150 + "}}")
    assert read_notebook(path)["nbformat"] == 4
