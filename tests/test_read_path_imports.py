"""The read path loads only what it uses: paramiko without ``invoke`` unless an ssh config's ``Match exec`` line needs it.

Each check runs in a fresh interpreter and asserts which modules are loaded (``sys.modules``), not how long it took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

RESOLVE = """
import json, sys
from betty_jupyter.transport.ssh import SSHTarget
target = SSHTarget.from_ssh_config("hpc", sys.argv[1])
print(json.dumps({"hostname": target.hostname, "port": target.port, "user": target.user,
                  "invoke": "invoke" in sys.modules, "paramiko": "paramiko" in sys.modules}))
"""


def resolve(config: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", RESOLVE, str(config)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_ssh_login_resolves_its_host_without_loading_invoke(tmp_path):
    config = tmp_path / "config"
    config.write_text("Host hpc\n    HostName login.example.org\n    Port 2222\n    User ada\n")
    assert resolve(config) == {"hostname": "login.example.org", "port": 2222, "user": "ada", "invoke": False,
                               "paramiko": True}


def test_a_match_exec_line_still_decides_where_to_go(tmp_path):
    config = tmp_path / "config"
    config.write_text("Match host hpc exec \"false\"\n    HostName never.example.org\n"
                      "Match host hpc exec \"true\"\n    HostName login.example.org\n    User ada\n")
    assert resolve(config) == {"hostname": "login.example.org", "port": 22, "user": "ada", "invoke": True,
                               "paramiko": True}


def test_paramiko_keeps_invoke_when_it_was_loaded_first():
    code = ("import sys, invoke\nfrom betty_jupyter.transport import paramiko_lib\nparamiko = paramiko_lib.load()\n"
            "print(paramiko.config.invoke is invoke, sys.modules['invoke'] is invoke)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.split()) == (0, ["True", "True"]), done.stderr
