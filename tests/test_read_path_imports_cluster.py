"""``betty jobs`` over SSH against the dev cluster loads only what its read uses (``sys.modules`` after the read)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.cluster

UNUSED = ("invoke", "betty_jupyter.agent.delegation", "pandas", "numpy", "openai", "matplotlib", "ipywidgets", "yaml",
          "filelock", "betty_jupyter.wiki.store")
"""Modules a queue read never needs: paramiko's task runner, the child sessions, the DataFrame and chart stack, the
chat model's client, the notebook's widgets, and the wiki's pages (PyYAML, the page store: a person's one call writes
no prompt, and the action log takes its lock itself)."""

READ = """
import json, sys
from betty_jupyter.cli import main
code = main(["jobs", "--dir", sys.argv[1]])
print(json.dumps({"code": code, "over_ssh": "paramiko" in sys.modules,
                  "loaded": [name for name in json.loads(sys.argv[2]) if name in sys.modules]}))
"""


def test_betty_jobs_over_ssh_loads_nothing_its_read_does_not_use(cluster_env, tmp_path):
    project = tmp_path / "project"
    done = subprocess.run([sys.executable, "-c", READ, str(project), json.dumps(UNUSED)], cwd=REPO, env=cluster_env,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last == {"code": 0, "over_ssh": True, "loaded": []}
