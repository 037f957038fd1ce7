"""The notebooks in ``notebooks/`` run top to bottom against the dev cluster and show what they are stored with.

They run as in the demo: under a Jupyter server with Betty's extension, where a person
approves the submissions (here from the side panel's side, over REST). nbval compares every
output with the stored one after ``notebooks/sanitize.cfg`` has blanked what changes from run
to run (job ids, ports, dates).

``BETTY_RECORD_NOTEBOOKS=1`` stores the outputs of a fresh run instead (after changing a
notebook): ``BETTY_RECORD_NOTEBOOKS=1 .venv/bin/python -m pytest tests/test_notebooks.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_server_proc import JupyterServer, PanelPerson
from notebook_support import llm, project  # noqa: F401 (fixtures)

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
NAMES = ["01-tour.ipynb", "02-gpu-sizing.ipynb", "03-first-experiment.ipynb"]
RECORD = os.environ.get("BETTY_RECORD_NOTEBOOKS") == "1"


@pytest.fixture(scope="module")
def demo(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The demo's set-up: the project served with Betty's extension, no chat model, a person at the panel."""
    root: Path = project["root"]
    env = dict(project["env"])
    config = root / "betty.json"
    settings = config.read_text()
    no_model = root / "betty-no-model.json"
    import json

    data = json.loads(settings)
    data["BettyConfig"].pop("llm", None)
    no_model.write_text(json.dumps(data))
    env["BETTY_CONFIG"] = str(no_model)
    server = JupyterServer(root, env, tmp_path_factory.mktemp("runtime"))
    person = PanelPerson(server, lambda approval: approval["tool"] in ("cluster_submit", "cell_run"))
    person.start()
    try:
        yield {"root": root, "server": server, "person": person,
               "env": {**env, "BETTY_SERVER_URL": server.url, "BETTY_SERVER_TOKEN": server.token}}
    finally:
        person.stop()
        server.stop()


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_shows_what_it_is_stored_with(demo: dict[str, Any], name: str) -> None:
    copy = demo["root"] / "notebooks" / name
    shutil.copy(NOTEBOOKS / name, copy)
    if RECORD:
        _record(copy, demo["env"], NOTEBOOKS / name)
        return
    checked(demo["env"], copy)


def checked(env: dict[str, str], *copies: Path, timeout: float = 900) -> None:
    """``pytest --nbval`` with the shipped sanitize.cfg over ``copies``, as a researcher runs it: it passes."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q",
         "--nbval-sanitize-with", str(NOTEBOOKS / "sanitize.cfg"), "--nbval-cell-timeout", "300",
         *(str(copy) for copy in copies)],
        cwd=copies[0].parent, env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_the_notebooks_check_twice_in_a_row_in_the_same_project(demo: dict[str, Any], tmp_path: Path) -> None:
    """The second check in the same project on the same day names its experiments ``-2``: still the same outputs."""
    folder = demo["root"] / "notebooks" / f"twice-{tmp_path.name}"
    folder.mkdir()
    copies = [folder / name for name in NAMES]
    for name, copy in zip(NAMES, copies):
        shutil.copy(NOTEBOOKS / name, copy)
    for _ in range(2):
        checked(demo["env"], *copies, timeout=1800)


def test_a_notebook_outside_the_servers_project_checks_too(demo: dict[str, Any], tmp_path: Path) -> None:
    """A notebook in a folder of its own, its kernel under the project's server: %%betty run stages the cell where
    the server looks (the server's project), so the tour's cell run runs and comes back."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert demo["root"] not in outside.parents
    copy = outside / "01-tour.ipynb"
    shutil.copy(NOTEBOOKS / "01-tour.ipynb", copy)
    checked(demo["env"], copy)


def _record(copy: Path, env: dict[str, str], stored: Path) -> None:
    notebook = nbformat.read(copy, as_version=4)
    old = dict(os.environ)
    os.environ.update(env)
    try:
        NotebookClient(notebook, timeout=300, kernel_name="python3", store_widget_state=False,
                       resources={"metadata": {"path": str(copy.parent)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(notebook, stored)
