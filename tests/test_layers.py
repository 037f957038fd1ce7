"""The layer rules of DESIGN §1, checked by importing with the outer layers blocked; no import cycle; sessions
built once."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator

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


# ----- import cycles -----------------------------------------------------------------------------------------------

Graph = dict[str, dict[str, str]]
"""Module -> {module of the same package it imports: where the import is (``path:line``)}."""


def import_graph(package_dir: Path) -> Graph:
    """What each module of the package imports of it, read from the source, never run.

    Every import statement counts, at module level or inside a function or class, except those
    under ``if TYPE_CHECKING:`` (they never run; their ``else:`` does count). Relative imports are
    resolved; ``from pkg import name`` is an import of ``pkg.name`` when that is a module, else of
    ``pkg`` (also when the importer is inside ``pkg``: it needs what ``pkg/__init__.py`` defines).
    Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` too, so those count as well,
    unless the importer is inside them (they are initialised before it).
    """
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    graph: Graph = {}
    for name, (path, is_package) in modules.items():
        edges: dict[str, str] = {}
        for statement in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)).body):
            for target in _targets(statement, name, is_package, modules):
                edges.setdefault(target, f"{path.relative_to(package_dir.parent)}:{statement.lineno}")
        graph[name] = edges
    return graph


def _imports(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(statement: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             modules: dict[str, tuple[Path, bool]]) -> Iterator[str]:
    """The package's modules ``statement`` imports (their parent packages included), never ``module`` itself."""
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        origin = statement.module or ""
        if statement.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            origin = ".".join(base[:len(base) - statement.level + 1] + ([origin] if origin else []))
        names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
                 for alias in statement.names]
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name
        for parent in _parents(name):
            if parent != module and not module.startswith(parent + "."):
                yield parent


def _parents(name: str) -> Iterator[str]:
    while "." in name:
        name = name.rpartition(".")[0]
        yield name


def import_cycles(graph: Graph) -> list[list[str]]:
    """A shortest cycle through each module that is on one (modules on a cycle already named are not started from)."""
    cycles: list[list[str]] = []
    named: set[str] = set()
    for start in sorted(graph):
        if start in named:
            continue
        cycle = _shortest_way_back(graph, start)
        if cycle:
            cycles.append(cycle)
            named.update(cycle)
    return cycles


def _shortest_way_back(graph: Graph, start: str) -> list[str]:
    came_from: dict[str, str] = {}
    waiting = deque([start])
    while waiting:
        module = waiting.popleft()
        for target in sorted(graph.get(module, {})):
            if target == start:
                way = [module]
                while way[-1] != start:
                    way.append(came_from[way[-1]])
                return way[::-1]
            if target not in came_from:
                came_from[target] = module
                waiting.append(target)
    return []


def described(cycle: list[str], graph: Graph) -> str:
    """``a -> b (a.py:3) -> a (b.py:7)``."""
    steps = [cycle[0]] + [f"{target} ({graph[source][target]})"
                          for source, target in zip(cycle, cycle[1:] + cycle[:1])]
    return " -> ".join(steps)


def test_the_package_has_no_import_cycle():
    """No module of betty_jupyter imports itself back, through any import that runs.

    Imports inside functions count (they run at the first call); ``if TYPE_CHECKING:`` imports
    are left out, because they never run. See :func:`import_graph`.
    """
    graph = import_graph(PACKAGE_DIR)
    assert "betty_jupyter.agent.tools.base" in graph["betty_jupyter.agent.loop"], "function-level imports are read"
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(described(cycle, graph) for cycle in cycles)


def test_the_cycle_finder_sees_imports_in_functions_and_packages_but_not_type_checking_ones(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "own").mkdir()
    sources = {
        "__init__.py": "",
        "a.py": "from . import typed\n\ndef later():\n    from .sub.c import x\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nelse:\n    import os\n",
        "sub/__init__.py": "from .b import thing\n",
        "sub/b.py": "from .. import a\nthing = 1\n",
        "sub/c.py": "x = 1\n",
        "own/__init__.py": "from . import d\nNAME = 1\n",
        "own/d.py": "def later():\n    from . import NAME\n",
    }
    for name, text in sources.items():
        (package / name).write_text(text)
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.typed": "pkg/a.py:1", "pkg.sub.c": "pkg/a.py:4", "pkg.sub": "pkg/a.py:4"}
    assert graph["pkg.typed"] == {}
    cycles = import_cycles(graph)
    assert cycles == [["pkg.a", "pkg.sub", "pkg.sub.b"], ["pkg.own", "pkg.own.d"]]
    assert described(cycles[0], graph) == ("pkg.a -> pkg.sub (pkg/a.py:4) -> pkg.sub.b (pkg/sub/__init__.py:1) "
                                           "-> pkg.a (pkg/sub/b.py:1)")


# ----- sessions are built once ------------------------------------------------------------------------------------

def test_a_built_session_cannot_be_patched():
    """Every part a session is built with is read-only: hosts say what they want in a SessionSpec instead."""
    from dataclasses import fields

    from betty_jupyter.agent.loop import AgentSession, SessionParts

    exposed = {"session_id", "model", "registry", "context", "grants", "broker", "stream", "actions", "user",
               "limits", "task", "parent", "policy", "before_tool"}
    assert exposed - {"policy", "before_tool"} <= {field.name for field in fields(SessionParts)}
    session = object.__new__(AgentSession)
    for name in exposed:
        assert isinstance(getattr(AgentSession, name), property), name
        with pytest.raises(AttributeError):
            setattr(session, name, None)
