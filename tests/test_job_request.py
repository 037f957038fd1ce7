"""One job request and one writer: the ``#SBATCH`` lines of a cell run's and a notebook run's script are written by
:meth:`SbatchScript.written`, as an edit writes one, so a value is quoted or refused the same way in all three."""

from __future__ import annotations

import pytest

from betty_jupyter.agent.tools.cell_run import CellRunArgs
from betty_jupyter.agent.tools.job_args import JobRequestArgs
from betty_jupyter.agent.tools.notebook_job import NotebookSubmitArgs
from betty_jupyter.cluster.job_request import CellEnvironment, JobRequest
from betty_jupyter.compute.cell_job import CellJob
from betty_jupyter.compute.notebook_job import NotebookJob
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.errors import ScriptError

RUN = "/scratch/alice/.betty/runs/cell-0123"


def scripts(request: JobRequest, run_dir: str = RUN) -> list[SbatchScript]:
    """The cell run's and the notebook run's scripts of ``request``."""
    return [CellJob(run_dir, request).script(), NotebookJob(run_dir, request).script()]


def edited(**options: str) -> SbatchScript:
    """The line an edit of a person's script writes for each option."""
    return SbatchScript.parse("#!/bin/bash\necho hi\n").with_options(**options)


def directive_lines(script: SbatchScript, option: str) -> list[str]:
    return [line for line in script.text.splitlines() if line.startswith(f"#SBATCH --{option}=")]


@pytest.mark.parametrize("name", ['a b', 'say "hi"', "x#y", "back\\slash", "it's", "tab\there"])
def test_a_job_name_sbatch_would_split_is_quoted_as_an_edit_quotes_it_and_reads_back_whole(name: str) -> None:
    expected = directive_lines(edited(job_name=name), "job-name")
    assert len(expected) == 1 and expected[0] != f"#SBATCH --job-name={name}"  # quoted, not pasted
    for script in scripts(JobRequest("cpu", 5, name=name)):
        assert directive_lines(script, "job-name") == expected
        assert script.get("job-name") == name  # sbatch reads back exactly the name asked for


@pytest.mark.parametrize("value", ["cpu\n#SBATCH --uid=0", "cpu\r", "cpu\0"])
def test_a_line_break_in_a_partition_or_name_is_refused_by_all_three(value: str) -> None:
    with pytest.raises(ScriptError, match="line break or NUL") as by_edit:
        edited(partition=value)
    for make in (lambda: CellJob(RUN, JobRequest(value, 5)).script(),
                 lambda: NotebookJob(RUN, JobRequest(value, 5)).script(),
                 lambda: NotebookJob(RUN, JobRequest("cpu", 5, name=value)).script()):
        with pytest.raises(ScriptError, match="line break or NUL") as by_job:
            make()
        assert str(by_job.value).replace("--job-name", "--partition") == str(by_edit.value)


def test_a_run_directory_with_a_space_is_quoted_where_sbatch_reads_it() -> None:
    where = "/home/alice/my work/.betty/runs/cell-0123"
    for script in scripts(JobRequest("cpu", 5), where):
        assert script.get("chdir") == where and str(script.get("output")).startswith(where + "/")
        assert f'#SBATCH --chdir="{where}"' in script.text


def test_both_jobs_write_the_same_header_for_the_same_request() -> None:
    request = JobRequest("gpu", 90, 2, CellEnvironment("torch", prefix="/opt/venv"), "run-1")
    cell, notebook = scripts(request)
    options = ["job-name", "partition", "time", "gpus", "chdir"]
    assert [(d.option, d.value) for d in cell.directives][:5] == [(d.option, d.value) for d in notebook.directives][:5]
    assert [d.option for d in cell.directives][:5] == options
    assert (cell.get("time"), cell.get("gpus"), cell.gpu_request()) == ("90", "2", (None, 2))


def test_both_tools_take_the_one_job_request_with_the_same_fields() -> None:
    shared = JobRequestArgs.model_json_schema()["properties"]
    for args in (CellRunArgs, NotebookSubmitArgs):
        assert issubclass(args, JobRequestArgs)
        properties = args.model_json_schema()["properties"]
        for name in ("partition", "gpus", "env", "name"):
            assert properties[name] == shared[name]
        assert {k: v for k, v in properties["time"].items() if k != "description"} == \
            {k: v for k, v in shared["time"].items() if k != "description"}
    assert set(CellRunArgs.model_json_schema()["required"]) == {"run", "partition", "time"}
    assert set(NotebookSubmitArgs.model_json_schema()["required"]) == {"notebook", "partition", "time"}
    asked = CellRunArgs.model_validate({"run": "0" * 32, "partition": "gpu", "time": 30, "gpus": 1})
    assert asked.job_request(CellEnvironment(), "cell") == JobRequest("gpu", 30, 1, CellEnvironment(), "cell")
