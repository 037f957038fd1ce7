"""The layer rules of DESIGN §1, checked by importing with the outer layers blocked."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import betty_jupyter

PACKAGE_DIR = Path(betty_jupyter.__file__).parent
CORE_PACKAGES = ["cluster", "gpu", "wiki", "experiments", "agent", "devcluster"]
JUPYTER_MODULES = ["tornado", "IPython", "ipywidgets", "ipykernel", "jupyter_server", "jupyterlab"]

BLOCKER = """
import sys
blocked = set({blocked!r})
allowed_stdlib_only = {stdlib_only!r}

class Blocker:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in blocked:
            raise ImportError(f"{{name}} must not be imported here")
        if allowed_stdlib_only and top not in sys.stdlib_module_names and top != "betty_jupyter":
            raise ImportError(f"{{name}} is not in the standard library")
        return None

sys.meta_path.insert(0, Blocker())
import importlib
for module in {modules!r}:
    importlib.import_module(module)
print("imported", len({modules!r}))
"""


def core_modules() -> list[str]:
    modules = []
    for package in CORE_PACKAGES:
        if (PACKAGE_DIR / package / "__init__.py").exists():
            modules.append(f"betty_jupyter.{package}")
            for info in pkgutil.walk_packages([str(PACKAGE_DIR / package)], f"betty_jupyter.{package}."):
                modules.append(info.name)
    return modules


def import_blocked(modules: list[str], blocked: list[str], stdlib_only: bool = False) -> subprocess.CompletedProcess[str]:
    code = BLOCKER.format(blocked=blocked, modules=modules, stdlib_only=stdlib_only)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_core_layers_import_nothing_from_jupyter():
    modules = core_modules() + ["betty_jupyter.config", "betty_jupyter.errors"]
    assert "betty_jupyter.devcluster.cluster" in modules
    result = import_blocked(modules, JUPYTER_MODULES)
    assert result.returncode == 0, result.stderr
    assert f"imported {len(modules)}" in result.stdout


@pytest.mark.parametrize("modules", [["betty_jupyter.devcluster", "betty_jupyter.cli", "betty_jupyter.cli.devcluster"]])
def test_dev_cluster_and_cli_need_only_the_standard_library(modules):
    result = import_blocked(modules, [], stdlib_only=True)
    assert result.returncode == 0, result.stderr


def test_the_blocker_does_refuse_what_it_blocks():
    result = import_blocked(["betty_jupyter.server.handlers"], JUPYTER_MODULES)
    assert result.returncode != 0
    assert "must not be imported here" in result.stderr
