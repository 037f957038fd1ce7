"""The layer rules of DESIGN §1, checked by importing with the outer layers blocked and by reading every import in
the source; no import cycle; every import inside a function says why it is lazy; sessions built once."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import re
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator

import pytest

import betty_jupyter

PACKAGE_DIR = Path(betty_jupyter.__file__).parent
CORE_PACKAGES = ["transport", "cluster", "compute", "gpu", "advisor", "wiki", "experiments", "agent", "devcluster"]
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


TRACE_EXTRA = ("torch", "transformers", "peft")
"""The optional ``trace`` extra: only the modules under ``gpu.trace`` (its package aside) import it, at their top."""


def trace_extra_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in TRACE_EXTRA)


def core_modules() -> list[str]:
    """Every core module; those that need the optional trace extra only when it is installed."""
    modules = []
    for package in CORE_PACKAGES:
        if (PACKAGE_DIR / package / "__init__.py").exists():
            modules.append(f"betty_jupyter.{package}")
            for info in pkgutil.walk_packages([str(PACKAGE_DIR / package)], f"betty_jupyter.{package}."):
                if info.name.startswith("betty_jupyter.gpu.trace.") and not trace_extra_installed():
                    continue
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


IMPORTS_TORCH = """
import sys
import betty_jupyter, betty_jupyter.gpu, betty_jupyter.gpu.trace, betty_jupyter.server, betty_jupyter.notebook
from betty_jupyter.cli import main
code = main(["gpu", "estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--gpu", "a100"])
print(code, sorted(name for name in sys.modules if name.split(".")[0] in {extra!r}))
"""


def test_betty_and_the_formula_estimate_never_import_the_trace_extra():
    """torch takes seconds to import: Betty, the server, the magics and `betty gpu estimate` without --trace never do."""
    result = subprocess.run([sys.executable, "-c", IMPORTS_TORCH.format(extra=TRACE_EXTRA)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 []"


def test_the_blocker_does_refuse_what_it_blocks():
    result = import_blocked(["betty_jupyter.server.handlers"], JUPYTER_MODULES)
    assert result.returncode != 0
    assert "must not be imported here" in result.stderr


# ----- import cycles -----------------------------------------------------------------------------------------------

Graph = dict[str, dict[str, str]]
"""Module -> {module of the same package it imports: where the import is (``path:line``)}."""


def import_graph(package_dir: Path) -> Graph:
    """What each module of the package imports of it, read from the source, never run.

    Every import statement counts, at module level, inside a function or class, and under
    ``if TYPE_CHECKING:`` too: a type-only import still ties the two modules together (a change
    to one is read by the other, and either is understood only with the other), so it may not
    close a circle any more than a running one. Relative imports are
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
    """No module of betty_jupyter imports itself back, through any import at all.

    Imports inside functions count (they run at the first call), and so do ``if TYPE_CHECKING:``
    imports: what a module needs of one above it is a ``typing.Protocol`` in a module below both
    (``agent/turn.py``, ``agent/task_specs.py``). See :func:`import_graph`.
    """
    graph = import_graph(PACKAGE_DIR)
    assert "betty_jupyter.agent.tools.base" in graph["betty_jupyter.agent.loop"], "function-level imports are read"
    assert "betty_jupyter.agent.registry" in graph["betty_jupyter.agent.offer"], "type-only imports are read"
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(described(cycle, graph) for cycle in cycles)


def written_package(root: Path, sources: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with these files (relative path -> text), folders made as needed."""
    package = root / "pkg"
    for name, text in sources.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_cycle_finder_sees_imports_in_functions_packages_and_type_checking_blocks(tmp_path):
    package = written_package(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import typed\n\ndef later():\n    from .sub.c import x\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nelse:\n    import os\n",
        "sub/__init__.py": "from .b import thing\n",
        "sub/b.py": "from .. import a\nthing = 1\n",
        "sub/c.py": "x = 1\n",
        "own/__init__.py": "from . import d\nNAME = 1\n",
        "own/d.py": "def later():\n    from . import NAME\n",
    })
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.typed": "pkg/a.py:1", "pkg.sub.c": "pkg/a.py:4", "pkg.sub": "pkg/a.py:4"}
    assert graph["pkg.typed"] == {"pkg.a": "pkg/typed.py:3"}
    cycles = import_cycles(graph)
    assert cycles == [["pkg.a", "pkg.typed"], ["pkg.own", "pkg.own.d"], ["pkg.sub", "pkg.sub.b", "pkg.a"]]
    assert described(cycles[0], graph) == "pkg.a -> pkg.typed (pkg/a.py:1) -> pkg.a (pkg/typed.py:3)"
    graph["pkg.typed"] = {}  # without the type-only import, the circle through the subpackage is still found
    assert import_cycles(graph)[0] == ["pkg.a", "pkg.sub", "pkg.sub.b"]
    assert described(import_cycles(graph)[0], graph) == (
        "pkg.a -> pkg.sub (pkg/a.py:4) -> pkg.sub.b (pkg/sub/__init__.py:1) -> pkg.a (pkg/sub/b.py:1)")


# ----- the layer rules, read from the source ------------------------------------------------------------------------

STDLIB_ONLY = ["devcluster", "cli/__init__.py", "cli/parser.py", "cli/devcluster.py"]
"""What ``betty dev-cluster`` runs before Betty's dependencies are installed: the standard library and Betty only."""
CORE = CORE_PACKAGES + ["config.py", "errors.py"]


def imported_tops(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """``(line, top-level name)`` of every module ``path`` imports: at module level, inside functions and classes, and
    under ``if TYPE_CHECKING:`` too (a layer does not even name what it must not use). A relative import names
    ``package``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, package if node.level else (node.module or "").split(".")[0]


def _sources(package_dir: Path, entries: list[str]) -> Iterator[Path]:
    """The ``.py`` files of each entry: a subpackage (every module under it) or one module."""
    for entry in entries:
        where = package_dir / entry
        if where.is_dir():
            yield from sorted(where.rglob("*.py"))
        elif where.exists():
            yield where


def layer_violations(package_dir: Path) -> list[str]:
    """``path:line imports NAME (why not)`` for each import, anywhere in a file, that breaks a layer rule: the core
    (:data:`CORE`) never imports Jupyter, and :data:`STDLIB_ONLY` imports only the standard library and Betty."""
    package, problems = package_dir.name, []
    for path in _sources(package_dir, CORE):
        for line, top in imported_tops(path, package):
            if top in JUPYTER_MODULES:
                problems.append(f"{path.relative_to(package_dir.parent)}:{line} imports {top} (the core never imports "
                                "Jupyter)")
    for path in _sources(package_dir, STDLIB_ONLY):
        for line, top in imported_tops(path, package):
            if top != package and top not in sys.stdlib_module_names:
                problems.append(f"{path.relative_to(package_dir.parent)}:{line} imports {top} (only the standard "
                                "library and Betty here)")
    return problems


def test_the_layer_rules_hold_for_every_import_in_the_source():
    """What the blocked imports above check, read from the source instead: imports inside functions count too."""
    assert all((PACKAGE_DIR / entry).exists() for entry in CORE + STDLIB_ONLY), "a layer entry was renamed"
    problems = layer_violations(PACKAGE_DIR)
    assert not problems, "imports across a layer rule:\n" + "\n".join(problems)


def test_the_layer_reader_sees_imports_in_functions_and_under_type_checking(tmp_path):
    package = written_package(tmp_path, {
        "__init__.py": "",
        "config.py": "import json\nfrom jupyter_server.utils import url_path_join\n",
        "errors.py": "class Oops(Exception):\n    pass\n",
        "cluster/__init__.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                               "    from IPython import get_ipython\n",
        "cluster/jobs.py": "import pandas\n\ndef show():\n    import ipywidgets.widgets as w\n",
        "devcluster/__init__.py": "import os\nfrom . import up\n",
        "devcluster/up.py": "import pkg.errors\n\nclass Up:\n    def run(self):\n        import yaml\n",
        "cli/__init__.py": "from . import devcluster, parser, other\n",
        "cli/parser.py": "from __future__ import annotations\nimport argparse\n",
        "cli/devcluster.py": "def run():\n    from ..devcluster import up\n    import requests\n",
        "cli/other.py": "import tornado\n",
        "notebook/__init__.py": "import IPython\n",
    })
    assert layer_violations(package) == [
        "pkg/cluster/__init__.py:4 imports IPython (the core never imports Jupyter)",
        "pkg/cluster/jobs.py:4 imports ipywidgets (the core never imports Jupyter)",
        "pkg/config.py:2 imports jupyter_server (the core never imports Jupyter)",
        "pkg/devcluster/up.py:5 imports yaml (only the standard library and Betty here)",
        "pkg/cli/devcluster.py:3 imports requests (only the standard library and Betty here)",
    ]


# ----- Betty's own layers ---------------------------------------------------------------------------------------

FACES = {"agent", "experiments", "server", "notebook", "cli", "read_commands", "mcp_server", "mcp_stdio", "llm_check",
         "llmserve", "schemas"}
NEVER_IMPORTS: dict[str, set[str]] = {
    "transport": {"cluster", "compute", "advisor", "gpu", "wiki"} | FACES,
    "cluster": {"compute", "advisor", "gpu", "wiki"} | FACES,
    "compute": {"advisor", "gpu", "wiki"} | FACES,
    "gpu": {"transport", "cluster", "compute", "advisor", "wiki"} | FACES,
    "advisor": {"compute", "wiki"} | FACES,
    "wiki": {"transport", "cluster", "compute", "advisor", "gpu"} | FACES,
    "notebook": {"server", "cli"},
    "server": {"notebook", "cli"},
}
"""Which of Betty's own packages each lower package never imports, not even under ``if TYPE_CHECKING:`` or in a
function. How Betty reaches a cluster (``transport``) knows no Slurm; Slurm (``cluster``) stands on it; what runs on
a compute node for a person (``compute``) stands on both; GPU memory (``gpu``) knows none of them; the advisor stands
on Slurm and GPU memory; all of them are below every face. The faces (the kernel's magics, the server, the terminal)
stand side by side: each speaks to the others only through the wire."""


def betty_imports(path: Path, package_dir: Path) -> Iterator[tuple[int, str]]:
    """``(line, package)`` for each of Betty's own top-level packages or modules ``path`` imports, relative imports
    resolved, anywhere in the file."""
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    here = parts[:-1]  # the package the file is in (a package's __init__ is in the package itself)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[list[str]] = []
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level + 1] if node.level > 1 else list(here)
            module = base + (node.module.split(".") if node.module else [])
            targets = [module] if module else [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package_dir.name:
            module = (node.module or "").split(".")[1:]
            targets = [module] if module else [[alias.name] for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name.split(".")[1:] for alias in node.names if alias.name.split(".")[0] == package_dir.name]
        for target in targets:
            if target:
                yield node.lineno, target[0]


def inner_layer_violations(package_dir: Path) -> list[str]:
    """``path:line imports NAME (why not)`` for each import that breaks :data:`NEVER_IMPORTS`."""
    problems = []
    for lower, never in NEVER_IMPORTS.items():
        for path in _sources(package_dir, [lower]):
            for line, there in betty_imports(path, package_dir):
                if there in never:
                    problems.append(f"{path.relative_to(package_dir.parent)}:{line} imports {there} ({lower} never "
                                    f"imports {there})")
    return problems


def test_betty_s_lower_packages_never_import_what_stands_on_them():
    assert all((PACKAGE_DIR / lower).is_dir() for lower in NEVER_IMPORTS), "a layer was renamed"
    problems = inner_layer_violations(PACKAGE_DIR)
    assert not problems, "imports across Betty's layers:\n" + "\n".join(problems)


def test_the_inner_layer_reader_resolves_relative_imports_anywhere(tmp_path):
    package = written_package(tmp_path, {
        "__init__.py": "",
        "cluster/__init__.py": "",
        "cluster/slurm.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..advisor import x\n"
                            "def f():\n    from .. import gpu\n    import pkg.agent.loop\nfrom . import jobs\n",
        "cluster/jobs.py": "from ..errors import Oops\n",
        "gpu/__init__.py": "from pkg.cluster import slurm\n",
        "advisor/__init__.py": "from ..cluster import slurm\nfrom ..gpu import x\n",
        "wiki/__init__.py": "",
    })
    assert inner_layer_violations(package) == [
        "pkg/cluster/slurm.py:3 imports advisor (cluster never imports advisor)",
        "pkg/cluster/slurm.py:5 imports gpu (cluster never imports gpu)",
        "pkg/cluster/slurm.py:6 imports agent (cluster never imports agent)",
        "pkg/gpu/__init__.py:1 imports cluster (gpu never imports cluster)",
    ]


# ----- imports inside functions say why ---------------------------------------------------------------------------

LAZY = re.compile(r"#\s*lazy:\s*\S")


def unexplained_lazy_imports(package_dir: Path) -> list[str]:
    """``path:line`` of each import inside a function (not under ``if TYPE_CHECKING:``) that gives no reason.

    A reason is a ``# lazy: <why>`` comment trailing the import, or on its own line directly above a run of import
    statements with nothing between them (it covers the whole run).
    """
    missing = []
    for path in sorted(package_dir.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text, str(path))
        starts = {node.end_lineno: node.lineno for node in ast.walk(tree)
                  if isinstance(node, (ast.Import, ast.ImportFrom))}
        for node in _function_imports(tree.body, inside=False):
            if not _gives_reason(node, lines, starts):
                missing.append(f"{path.relative_to(package_dir.parent)}:{node.lineno}")
    return missing


def _function_imports(nodes: Iterable[ast.AST], inside: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _function_imports(node.orelse, inside)
            continue
        if inside and isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _function_imports(ast.iter_child_nodes(node), inside or isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _gives_reason(node: ast.Import | ast.ImportFrom, lines: list[str], starts: dict[int | None, int]) -> bool:
    if any(LAZY.search(lines[number - 1]) for number in range(node.lineno, (node.end_lineno or node.lineno) + 1)):
        return True
    above = node.lineno - 1
    while above in starts:  # an import ends on the line above: the same run
        above = starts[above] - 1
    return above >= 1 and LAZY.match(lines[above - 1].strip()) is not None


def test_every_import_inside_a_function_says_why_it_is_lazy():
    """An import inside a function hides a dependency: it stays only where it keeps a start-up light (``betty``,
    ``import betty_jupyter``, ``%load_ext``, the server's extension), and says so in a ``# lazy:`` comment."""
    missing = unexplained_lazy_imports(PACKAGE_DIR)
    assert not missing, ("imports inside functions without a `# lazy: <reason>` (move them to the top of the module, "
                         "or say why they must wait):\n" + "\n".join(missing))


def test_the_lazy_reader_wants_a_reason_on_the_import_or_above_its_run(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("import json\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"           # 1
        "import os  # lazy: not inside a function\n"    # 2
        "\n"                                            # 3
        "def f():\n"                                    # 4
        "    import pandas  # lazy: heavy\n"            # 5
        "    # lazy: the server stack\n"                # 6
        "    import tornado\n"                          # 7
        "    from jupyter_server import (\n"            # 8
        "        serverapp)\n"                          # 9
        "    import yaml\n"                             # 10
        "\n"                                            # 11
        "def g():\n"                                    # 12
        "    # lazy: a blank line ends the run\n"       # 13
        "\n"                                            # 14
        "    import paramiko\n"                         # 15
        "    import openai  # lazy:\n"                  # 16
        "    if TYPE_CHECKING:\n"                       # 17
        "        import numpy\n"                        # 18
        "    x = 1\n"                                   # 19
        "    import mistune\n"                          # 20
        "\n"                                            # 21
        "class C:\n"                                    # 22
        "    import csv\n"                              # 23
        "    def m(self):\n"                            # 24
        "        key = lambda: __import__('x')\n"       # 25
        "        from . import b  # lazy: a cycle\n"    # 26
        "        from . import c\n"                     # 27
    )
    assert unexplained_lazy_imports(package) == ["pkg/a.py:15", "pkg/a.py:16", "pkg/a.py:20", "pkg/a.py:27"]


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
