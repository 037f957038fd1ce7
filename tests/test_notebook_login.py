"""A second factor asked under the running ``%betty`` cell, in a real kernel.

The cluster is a real login node asking for a TOTP code (:mod:`second_factor`); the test types
the code into the password box the cell opens, as a person would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from kernel_driver import Kernel
from notebook_support import betty_kernel
from second_factor import ALIAS, control_dir, login_node, totp  # noqa: F401 (fixtures)


@pytest.fixture
def kernel(dev_cluster: dict[str, str], tmp_path: Path, login_node, control_dir) -> Iterator[Kernel]:  # noqa: F811
    """A kernel in a project whose only cluster is behind the login node, over openssh."""
    made = run_betty("init", str(tmp_path / "project"))
    assert made.returncode == 0, made.stderr
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{
        "name": "mfa", "transport": "openssh", "host": ALIAS,
        "ssh_config": str(login_node.ssh_config(control_path=f"{control_dir}/%C"))}], "default_cluster": "mfa"}}))
    with betty_kernel(tmp_path / "project", {**os.environ, **dev_cluster, "BETTY_CONFIG": str(config)}) as driver:
        yield driver


def test_the_cell_asks_for_the_code_once_and_the_command_runs(kernel: Kernel) -> None:
    typed: list[str] = []

    def person(prompt: str, password: bool) -> str:
        assert password, "a one-time code is asked without echo"
        typed.append(totp())
        return typed[-1]

    cell = kernel.run("%betty squeue", answer=person)
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    assert len(cell.prompts) == 1 and "Verification code" in cell.prompts[0] and ALIAS in cell.prompts[0]
    assert cell.widgets, "the queue is shown"
    again = kernel.run("%betty sinfo", answer=person)  # the login holds: no second question
    assert again.status == "ok" and not again.stderr and again.prompts == []
    shown: list[Any] = [cell.stdout, again.stdout, json.dumps(cell.displays), json.dumps(again.displays)]
    assert not any(typed[0] in text for text in shown)


def test_a_notebook_that_cannot_ask_gets_one_line(kernel: Kernel) -> None:
    cell = kernel.run("%betty squeue")  # this frontend opens no input box (allow_stdin is off)
    assert cell.status == "ok"
    lines = [line for line in cell.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("betty: ") and "Verification code" in lines[0], cell.stderr
