"""``%betty mode`` in a real kernel cannot loosen the site's policy: a mode the site does not allow is one line
saying so, the mode stays, and an allowed one is taken. The kernel's own Betty (no server): the site's file named by
``$BETTY_SITE_POLICY``, a local cluster profile."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from jupyter_client.manager import start_new_kernel
from test_magics import execute


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    site = tmp_path / "site"
    site.mkdir()
    policy = site / "policy.json"
    policy.write_text(json.dumps({"modes": ["off", "propose", "confirm"]}))
    policy.chmod(0o644)
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"BettyConfig": {"clusters": [{"name": "here", "transport": "local"}]}}))
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = {**os.environ, "BETTY_SITE_POLICY": str(policy), "BETTY_CONFIG": str(mine),
           "JUPYTER_RUNTIME_DIR": str(runtime)}
    env.pop("BETTY_SERVER_URL", None)
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path / "project"))
    try:
        yield client, policy
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_mode_the_site_refuses_is_one_line_and_the_mode_stays(kernel) -> None:
    client, policy = kernel
    execute(client, "%load_ext betty_jupyter")
    shown = execute(client, "%betty mode auto")
    assert shown["error"] == [] and shown["result"] == []
    assert "".join(shown["stderr"]).strip() == (
        f"betty: your site does not allow auto mode; it allows off, propose, confirm (modes in {policy})")
    assert execute(client, "%betty mode")["result"] == ["'confirm'"]
    assert execute(client, "%betty mode propose")["result"] == ["'propose'"]


def test_betty_policy_in_a_notebook_says_what_the_site_decided(kernel) -> None:
    client, policy = kernel
    execute(client, "%load_ext betty_jupyter")
    shown = execute(client, "%betty policy")
    assert shown["error"] == [] and shown["result"] == [] and shown["stderr"] == []
    lines = "".join(shown["stdout"]).splitlines()
    assert lines[0] == f"site policy: {policy}"
    assert any(line.split() == ["modes", "off,", "propose,", "confirm", f"[site", "file", f"{policy}]"]
               for line in lines)
    assert any(line.split()[:2] == ["mcp", "on"] and line.endswith("[default]") for line in lines)
