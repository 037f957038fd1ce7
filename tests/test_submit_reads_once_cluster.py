"""A submission reads its batch script once: the check, the record and ``sbatch`` take the one checked script.

Every reading of a script is counted through the real parser (it still reads each one); each tool then submits to
the dev cluster for real, and the script that ran was read exactly once on the way there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections import Counter
from pathlib import Path

import pytest

from betty_jupyter.agent.tools import ToolContext
from betty_jupyter.agent.tools.catalog import CellRun, ClusterSubmit, NotebookSubmit
from betty_jupyter.compute.cell_job import stage
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace

pytestmark = pytest.mark.cluster


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each text was read as a batch script (by the real parser, which still reads it)."""
    seen: Counter[str] = Counter()
    parse = SbatchScript.parse.__func__  # type: ignore[attr-defined]

    def counting(cls: type[SbatchScript], text: str) -> SbatchScript:
        seen[text] += 1
        return parse(cls, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(SbatchScript, "parse", classmethod(counting))
    return seen


@pytest.fixture
def project(tmp_path: Path) -> Workspace:
    init_workspace(tmp_path / "project")
    return Workspace.at(tmp_path / "project")


def submitted(context: ToolContext, tool, args: dict) -> str:  # type: ignore[no-untyped-def]
    """Execute ``tool`` with ``args``; the script the job ran, as recorded."""
    async def go() -> str:
        try:
            outcome = await tool.execute(context, args)
            assert outcome.ok, outcome.summary
            slurm_id = outcome.data["job_id"] if isinstance(outcome.data, dict) else outcome.data.job_id
            await context.slurm.cancel(slurm_id)  # it has done its part: free the one node
            tracked = Ledger(context.workspace.ledger_path).get(str(slurm_id))
            assert tracked is not None
            return tracked.experiment.script
        finally:
            await context.close()
    return asyncio.run(go())


def test_a_script_submitted_and_recorded_is_read_once(local_profile, project, reads) -> None:
    script = "#!/bin/bash\n#SBATCH --job-name=read-once\n#SBATCH --partition=cpu\n#SBATCH --time=1\ntrue\n"
    ran = submitted(ToolContext.open(local_profile, project, "s-once"), ClusterSubmit(),
                    {"script": script, "goal": "read the script once"})
    assert ran == script and reads[script] == 1


def test_a_cell_run_is_read_once_as_its_writer_wrote_it(local_profile, project, reads) -> None:
    run = stage(project.state, "print(1)\n", {}, [])
    ran = submitted(ToolContext.open(local_profile, project, "s-cell"), CellRun(),
                    {"run": run.token, "partition": "cpu", "time": 1})
    assert "#SBATCH --job-name=cell\n" in ran and reads[ran] == 1


def test_a_notebook_run_is_read_once_as_its_writer_wrote_it(local_profile, project, reads) -> None:
    import hashlib
    import json

    book = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "1"}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
    (project.root / "nb.ipynb").write_text(json.dumps(book))
    profile = dataclasses.replace(local_profile, environments={"betty": {"venv": sys.prefix}})
    ran = submitted(ToolContext.open(profile, project, "s-nb"), NotebookSubmit(),
                    {"notebook": "nb.ipynb", "partition": "cpu", "time": 1, "env": "betty",
                     "sha256": hashlib.sha256((project.root / "nb.ipynb").read_bytes()).hexdigest()})
    assert "notebook_runner.py" in ran and reads[ran] == 1
