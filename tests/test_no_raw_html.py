"""No HTML is built from a value that did not go through ``betty_jupyter.safe_text``.

The package's source is read as Python syntax: every f-string, ``+`` chain, ``%`` or
``.format`` whose constant text holds an HTML tag may interpolate only values known to be
safe — a call to an escaper (``html_text``, ``markdown_html``, any ``*_html`` function), a
number, a constant, or a local name assigned only such values. Escaping and markdown
rendering themselves happen in ``safe_text.py`` alone.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "betty_jupyter"
ESCAPER = PACKAGE / "safe_text.py"
ESCAPING_CALLS = {"html_text", "markdown_html"}
NUMERIC_CALLS = {"len", "int", "round"}
HTML_TAGS = set(
    "a abbr b blockquote body br button canvas caption code col details div dl dt dd em embed font footer form h1 h2 "
    "h3 h4 h5 h6 head header hr html i iframe img input label li link math meta nav object ol option p pre s script "
    "section select small source span strong style sub summary sup svg table tbody td textarea tfoot th thead title "
    "tr u ul video".split())
_TAG = re.compile(r"<\s*/?\s*([A-Za-z][A-Za-z0-9]*)")
_NUMERIC_SPEC = re.compile(r"^[-+ #0-9,_.]*[dfeEgGn%xXob]$")


def holds_html(text: str) -> bool:
    """Whether constant text opens or closes an HTML tag (or ends where a tag's name would be interpolated)."""
    return any(name.lower() in HTML_TAGS for name in _TAG.findall(text))


@dataclass
class Scope:
    """The names a module and one function bind, to tell a constant or escaped local from anything else."""

    module: dict[str, list[ast.expr | None]]
    local: dict[str, list[ast.expr | None]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)


def _bindings(body: list[ast.stmt], *, nested: bool) -> dict[str, list[ast.expr | None]]:
    """Each name bound in ``body`` and what it is bound to (None for a loop variable, a parameter, an import…)."""
    bound: dict[str, list[ast.expr | None]] = {}
    nodes = [n for stmt in body for n in ast.walk(stmt)] if nested else body

    def add(target: ast.AST, value: ast.expr | None) -> None:
        for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
            keep = value if isinstance(target, ast.Name) else None
            bound.setdefault(name, []).append(keep)

    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                add(target, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            add(node.target, node.value if isinstance(node, ast.AnnAssign) else None)
        elif isinstance(node, ast.NamedExpr):
            add(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            add(node.target, None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    add(item.optional_vars, None)
    return bound


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _constant_table(node: ast.expr, scope: Scope) -> bool:
    """A module-level name bound once to a dict, tuple or list of constants (a lookup table)."""
    if not isinstance(node, ast.Name) or node.id in scope.local:
        return False
    values = scope.module.get(node.id, [])
    return len(values) == 1 and isinstance(values[0], (ast.Dict, ast.Tuple, ast.List, ast.Set)) \
        and all(isinstance(n, (ast.Constant, ast.Dict, ast.Tuple, ast.List, ast.Set, ast.Load)) or n is values[0]
                for n in ast.walk(values[0]))


def safe(node: ast.AST | None, scope: Scope) -> bool:
    """Whether ``node`` can only evaluate to text that is safe inside HTML."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(safe(part, scope) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        spec = node.format_spec
        if isinstance(spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in spec.values):
            if _NUMERIC_SPEC.match("".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))):
                return True
        return safe(node.value, scope)
    if isinstance(node, ast.IfExp):
        return safe(node.body, scope) and safe(node.orelse, scope)
    if isinstance(node, ast.BinOp):
        return safe(node.left, scope) and safe(node.right, scope)
    if isinstance(node, ast.UnaryOp):
        return safe(node.operand, scope)
    if isinstance(node, ast.BoolOp):
        return all(safe(value, scope) for value in node.values)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(safe(item, scope) for item in node.elts)
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return safe(node.elt, scope)
    if isinstance(node, ast.Subscript):
        return _constant_table(node.value, scope)
    if isinstance(node, ast.Call):
        return _safe_call(node, scope)
    if isinstance(node, ast.Name):
        return _safe_name(node.id, scope)
    return False


def _safe_call(node: ast.Call, scope: Scope) -> bool:
    name = _call_name(node)
    if name in ESCAPING_CALLS or name.endswith("_html") or name in NUMERIC_CALLS:
        return True
    func = node.func
    if name == "join" and isinstance(func, ast.Attribute):
        return safe(func.value, scope) and all(safe(arg, scope) for arg in node.args)
    if name == "get" and isinstance(func, ast.Attribute) and _constant_table(func.value, scope):
        return all(safe(arg, scope) for arg in node.args[1:])
    return False


def _safe_name(name: str, scope: Scope) -> bool:
    if name.endswith("_html"):
        return True
    if name in scope.seen:
        return True  # a name assigned from itself adds nothing unsafe of its own
    values = scope.local.get(name) or scope.module.get(name)
    if not values:
        return False
    scope.seen.add(name)
    try:
        return all(safe(value, scope) for value in values)
    finally:
        scope.seen.discard(name)


def _html_text_in(node: ast.AST) -> bool:
    """Whether the constant text of ``node`` (an f-string, a ``+`` chain, a format string) holds HTML."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return holds_html(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = [str(v.value) if isinstance(v, ast.Constant) else "\0" for v in node.values]
        # a tag whose name is interpolated: the constant before it ends where the name would start
        named = any(part.endswith(("<", "</")) for part in parts[:-1])
        return named or holds_html("".join(parts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _html_text_in(node.left) or _html_text_in(node.right)
    return False


def _built_html(node: ast.AST) -> list[ast.AST]:
    """The parts ``node`` interpolates into HTML text, when it builds HTML text; else []."""
    if isinstance(node, ast.JoinedStr) and _html_text_in(node):
        return [v for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _html_text_in(node):
        return [node.left, node.right]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _html_text_in(node.left):
        return [node.right]
    if isinstance(node, ast.Call) and _call_name(node) == "format" and isinstance(node.func, ast.Attribute) \
            and _html_text_in(node.func.value):
        return [*node.args, *(k.value for k in node.keywords)]
    return []


def _escapes_elsewhere(node: ast.AST) -> str | None:
    """A second escaper or markdown renderer: ``html.escape``, markupsafe, mistune outside safe_text."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "escape" \
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("html", "markupsafe"):
        return f"{node.func.value.id}.escape"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        hit = [n for n in names if n.split(".")[0] in ("mistune", "markdown", "markupsafe", "bleach")]
        return f"import {hit[0]}" if hit else None
    return None


def violations(source: str, where: str = "<source>") -> list[str]:
    """Every place in ``source`` that builds HTML from a value not known to be safe, ``file:line: code``."""
    tree = ast.parse(source)
    module = _bindings(tree.body, nested=False)
    found: dict[int, str] = {}
    specs = {id(n.format_spec) for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec}

    def visit(node: ast.AST, scope: Scope) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                body = child.body if isinstance(child.body, list) else []
                inner = Scope(module, {**scope.local, **_bindings(body, nested=True)})
                for arg in ast.walk(child.args):
                    if isinstance(arg, ast.arg):
                        inner.local[arg.arg] = [None]
            built = [] if id(child) in specs else _built_html(child)  # `{x:<10}` aligns, it opens no tag
            unsafe = [part for part in built if not safe(part, inner)]
            second = _escapes_elsewhere(child)
            if (unsafe or second) and child.lineno not in found:  # type: ignore[attr-defined]
                code = second or (ast.get_source_segment(source, child) or "").splitlines()[0][:120]
                found[child.lineno] = f"{where}:{child.lineno}: {code}"  # type: ignore[attr-defined]
            visit(child, inner)

    visit(tree, Scope(module))
    return list(found.values())


def test_no_html_is_built_from_unescaped_values() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == ESCAPER or "labextension" in path.parts:
            continue
        found += violations(path.read_text(), str(path.relative_to(REPO)))
    assert found == [], "HTML built from values that did not go through betty_jupyter.safe_text:\n" + "\n".join(found)


def test_the_escaper_module_is_where_escaping_lives() -> None:
    source = ESCAPER.read_text()
    assert "html.escape(" in source and "import mistune" in source
    assert "ipywidgets" not in source and "IPython" not in source and "tornado" not in source


@pytest.mark.parametrize("code", [
    'f"<td>{name}</td>"',
    'f"<span class=\'x\'>{job.name} ({html_text(job.state)})</span>"',
    '"<b>" + name + "</b>"',
    '"<td>%s</td>" % name',
    '"<i>{}</i>".format(name)',
    'f"<{tag}>"',
    'f"<td>{WORDS.get(key, key)}</td>"',
    'f"<td>{time.strftime(\'%H:%M\')}</td>"',
    'f"<td>{name!r}</td>"',
    'f"<td>{name:>10}</td>"',
    'f"<td>{name:<{width}}</td>"',
    'html.escape(name)',
    '__import__("x")\n    import markupsafe',
    '__import__("x")\n    from mistune import html',
])
def test_the_detector_flags_raw_interpolation(code: str) -> None:
    source = f"WORDS = {{'a': 'b'}}\n\ndef show(name, job, tag, key, time):\n    return {code}\n"
    assert len(violations(source)) == 1, violations(source)


@pytest.mark.parametrize("code", [
    'f"<td>{html_text(name)}</td>"',
    'f"<b>{size:.1f} GiB</b>"',
    'f"<i>… {len(lines) - 6} more</i>"',
    'f"<td>{WORDS.get(key, \'\')}</td>"',
    'f"<td>{WORDS[key]}</td>"',
    'f"<div>{markdown_html(name)}</div>" + details_table_html(job)',
    '"<br>".join(html_text(line) for line in lines)',
    'f"<Betty call {name}: waiting>"',
    'f"job {name} is <RUNNING> now"',
    'f"{name:<{size}}  {key}"',
])
def test_the_detector_lets_escaped_and_constant_parts_through(code: str) -> None:
    source = f"WORDS = {{'a': 'b'}}\n\ndef show(name, job, key, size, lines):\n    return {code}\n"
    assert violations(source) == []


def test_a_local_name_is_as_safe_as_what_it_is_given() -> None:
    escaped = textwrap.dedent("""
        def show(ok, name):
            colour = "#2e7d32" if ok else "#c62828"
            body = "<br>".join(html_text(line) for line in name.splitlines())
            return f"<div style='color:{colour}'>{body}</div>"
    """)
    raw = escaped.replace("html_text(line)", "line")
    assert violations(escaped) == []
    assert len(violations(raw)) == 1 and "<div style=" in violations(raw)[0]
