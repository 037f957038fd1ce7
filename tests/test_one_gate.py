"""One gate: every face reaches a tool only through the session's call (policy, card, digest, action log), and
nothing in Betty changes the cluster except a tool that gate ran.

Two checks, both over the code as it is, so that a new route or face cannot forget the gate:

* every route of the server extension, with each of its methods, is named in :data:`ROUTES` with what it does;
  a route that is not (or a method that is gone) fails the test until someone says what it is, and a route
  said to reach a tool must call one of the gate's entries;
* the operations that change the cluster (``sbatch``, ``scancel``, uploads into a run directory, a recorded
  submission) and ``Tool.execute`` are called only where the gate leads: tools, and the gate itself.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

import betty_jupyter
from betty_jupyter.server import handlers

PACKAGE = Path(betty_jupyter.__file__).parent

GATE = "reaches a tool through the gate"
READ = "reads, changes nothing"
ANSWER = "a person's answer to a card or a login question"
OWN = "the person's own settings of Betty (sessions, modes, automations, trust, MCP credentials), never the cluster"
HOOK = "a webhook with its own secret: starts an automation, whose calls go through the gate"

ROUTES: dict[tuple[str, str], str] = {
    ("/betty/api/health", "get"): READ,
    ("/betty/api/policy", "get"): READ,
    ("/betty/api/docs/llm", "get"): READ,
    ("/betty/api/sessions", "get"): READ,
    ("/betty/api/sessions", "post"): OWN,
    ("/betty/api/sessions/(?P<session_id>[^/]+)", "get"): READ,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/mode", "put"): OWN,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/ask", "post"): GATE,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/stop", "post"): OWN,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/events", "get"): READ,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/tools", "get"): READ,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/tools/(?P<tool>[^/]+)", "post"): GATE,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/ws", "get"): READ,
    ("/betty/api/sessions/(?P<session_id>[^/]+)/ws", "on_message"): ANSWER,
    ("/betty/api/approvals", "get"): READ,
    ("/betty/api/approvals/(?P<approval_id>[^/]+)", "post"): ANSWER,
    ("/betty/api/approvals/(?P<approval_id>[^/]+)/preview", "post"): READ,
    ("/betty/api/approvals/(?P<approval_id>[^/]+)/start", "get"): READ,
    ("/betty/api/actions", "get"): READ,
    ("/betty/api/timeline", "get"): READ,
    ("/betty/api/timeline/replay", "post"): READ,
    ("/betty/api/timeline/bundle", "get"): READ,
    ("/betty/api/clusters", "get"): READ,
    ("/betty/api/clusters/(?P<name>[^/]+)/health", "get"): READ,
    ("/betty/api/clusters/(?P<name>[^/]+)/overview", "get"): GATE,
    ("/betty/api/clusters/(?P<name>[^/]+)/test", "post"): READ,
    ("/betty/api/clusters/(?P<name>[^/]+)/trust", "post"): OWN,
    ("/betty/api/clusters/(?P<name>[^/]+)/jobs/(?P<job>[^/]+)/why", "get"): READ,
    ("/betty/api/jobs", "get"): READ,
    ("/betty/api/jobs/history", "get"): READ,
    ("/betty/api/jobs/efficiency", "get"): READ,
    ("/betty/api/jobs/(?P<job>[^/]+)/cancel", "post"): GATE,
    ("/betty/api/jobs/(?P<job>[^/]+)/resubmit", "post"): GATE,
    ("/betty/api/jobs/(?P<job>[^/]+)/extend", "post"): GATE,
    ("/betty/api/partitions", "get"): READ,
    ("/betty/api/node-kernels", "get"): GATE,
    ("/betty/api/node-kernels/(?P<token>[^/]+)/stop", "post"): GATE,
    ("/betty/api/node-kernels/(?P<token>[^/]+)/forwards", "post"): GATE,
    ("/betty/api/node-kernels/(?P<token>[^/]+)/forwards", "delete"): OWN,
    ("/betty/api/login-questions", "get"): READ,
    ("/betty/api/login-questions/(?P<ident>[^/]+)", "post"): ANSWER,
    ("/betty/api/login-questions/(?P<ident>[^/]+)", "delete"): ANSWER,
    ("/betty/api/gpu/models", "get"): READ,
    ("/betty/api/gpu/estimate", "post"): READ,
    ("/betty/api/gpu/advise", "post"): READ,
    ("/betty/api/wiki", "get"): READ,
    ("/betty/api/wiki/page", "get"): READ,
    ("/betty/api/wiki/search", "get"): READ,
    ("/betty/api/experiments", "get"): READ,
    ("/betty/api/notebooks/open", "put"): OWN,
    ("/betty/api/experiments/(?P<slug>[^/]+)", "get"): READ,
    ("/betty/api/experiments/(?P<slug>[^/]+)/pipeline", "get"): READ,
    ("/betty/api/sweeps", "get"): READ,
    ("/betty/api/sweeps/(?P<slug>[^/]+)", "get"): GATE,
    ("/betty/api/notebooks/context", "get"): READ,
    ("/betty/api/notebooks/changes/(?P<change_id>[^/]+)", "post"): ANSWER,
    ("/betty/api/automations", "get"): READ,
    ("/betty/api/automations", "post"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)", "get"): READ,
    ("/betty/api/automations/(?P<automation_id>[^/]+)", "put"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)", "delete"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/pause", "post"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/resume", "post"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/run", "post"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/kill", "post"): OWN,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/runs", "get"): READ,
    ("/betty/api/automations/(?P<automation_id>[^/]+)/runs/(?P<run_id>[^/]+)", "get"): READ,
    ("/betty/api/hooks/(?P<automation_id>[^/]+)", "post"): HOOK,
    ("/betty/api/mcp/credentials", "get"): READ,
    ("/betty/api/mcp/credentials", "post"): OWN,
    ("/betty/api/mcp/credentials/(?P<name>[^/]+)", "delete"): OWN,
    ("/betty/mcp", "get"): GATE,
    ("/betty/mcp", "post"): GATE,
    ("/betty/mcp", "delete"): OWN,
}
"""Every route and method of the server extension, and what it may do."""

METHODS = ("get", "post", "put", "patch", "delete", "on_message")
ENTRIES = {"call_tool", "call", "agent_call", "start_call", "ask", "handle", "overview"}
"""The names through which a handler reaches the gate: ``BettyHandler.call_tool``, ``Assistant.call`` and ``ask``,
``BettyServices.agent_call``/``start_call``/``overview``, and the MCP endpoint's ``handle``."""

WRITES = {"submit", "cancel", "move", "upload", "upload_files"}
"""What changes the cluster: Slurm's ``sbatch``, ``scancel`` and ``scontrol update``, and uploads into a run directory."""
WRITE_RECEIVERS = {"slurm", "client", "cell_transfer"}
"""The objects those are called on (a ``SlurmClient`` by its usual names, the transfer module); ``submit`` of a
thread pool or ``cancel`` of a task is not a write."""
WRITE_FUNCTIONS = {"submit_experiment", "submit_server"}
"""The functions that submit (a recorded experiment, ``betty llm serve``'s server)."""
WRITERS_OUTSIDE_TOOLS = {
    "experiments/record.py": "submit_experiment itself, which only tools call",
    "experiments/chain.py": "submit_chain and extend_chain themselves, which only tools call",
    "experiments/pipeline.py": "submit_pipeline and cancel_stranded themselves, which only tools call",
    "llmserve.py": "`betty llm serve`: the person's own foreground command, which shows its job before it runs",
    "cli/llm.py": "`betty llm serve` cancels its own job when the person stops it",
    "compute/cell_transfer.py": "upload, which only tools call",
    "compute/node_kernel.py": "upload, which only the node_kernel tool calls",
}


def routes() -> dict[tuple[str, str], type]:
    """Every (route, method) the extension serves, with its handler class."""
    found = {}
    for route, handler, *_ in handlers.handlers:
        for method in METHODS:
            if any(method in klass.__dict__ for klass in handler.__mro__ if klass.__module__.startswith("betty_jupyter")):
                found[route, method] = handler
    return found


def test_every_route_says_what_it_may_do() -> None:
    served = set(routes())
    unnamed = sorted(served - set(ROUTES))
    gone = sorted(set(ROUTES) - served)
    assert not unnamed, f"routes no one said what they do (add them to ROUTES): {unnamed}"
    assert not gone, f"routes named in ROUTES that are not served any more: {gone}"


@pytest.mark.parametrize("route", sorted(key for key, kind in ROUTES.items() if kind == GATE))
def test_a_route_that_reaches_a_tool_goes_through_the_gate(route: tuple[str, str]) -> None:
    handler = routes()[route]
    method = next(klass.__dict__[route[1]] for klass in handler.__mro__ if route[1] in klass.__dict__)
    called = _called_names(ast.parse(textwrap.dedent(inspect.getsource(method))))
    called |= {name for helper in _helpers(handler, called) for name in _called_names(helper)}
    assert called & ENTRIES, f"{route} reaches a tool, but not through one of {sorted(ENTRIES)}: it calls {called}"


def test_only_the_gate_runs_a_tool() -> None:
    callers = {path for path, call in _calls() if _name(call.func) == "execute" and _receiver(call.func) == "tool"}
    assert callers == {"agent/loop.py"}, f"Tool.execute is called outside the gate: {callers}"


def test_only_tools_change_the_cluster() -> None:
    outside = sorted({(path, ast.unparse(call.func)) for path, call in _calls()
                      if _writes(call.func)
                      and not path.startswith("agent/tools/") and path not in WRITERS_OUTSIDE_TOOLS})
    assert not outside, f"the cluster is changed outside a tool, so outside the gate: {outside}"
    for path, why in WRITERS_OUTSIDE_TOOLS.items():
        assert (PACKAGE / path).is_file(), f"{path} ({why}) is gone: take it off WRITERS_OUTSIDE_TOOLS"


def test_the_checks_see_a_write_and_a_bypass() -> None:
    """The checks above would see the code they forbid (so their silence means something)."""
    bad = ast.parse("async def f(ctx, tool, args):\n    await ctx.slurm.submit('x')\n    await tool.execute(ctx, args)\n"
                    "    await submit_experiment(1)\n    await cell_transfer.upload_files(1, 2, 3)\n")
    calls = [node for node in ast.walk(bad) if isinstance(node, ast.Call)]
    assert [(_name(c.func), _receiver(c.func), _writes(c.func)) for c in calls] == [
        ("submit", "slurm", True), ("execute", "tool", False), ("submit_experiment", None, True),
        ("upload_files", "cell_transfer", True)]
    harmless = ast.parse("pool.submit(f)\nsubmit(coroutine)\ntask.cancel()\n")
    assert not any(_writes(node.func) for node in ast.walk(harmless) if isinstance(node, ast.Call))


def _writes(func: ast.expr) -> bool:
    """Whether a call changes the cluster."""
    receiver = _receiver(func)
    return _name(func) in WRITE_FUNCTIONS if receiver is None else (
        _name(func) in WRITES and receiver in WRITE_RECEIVERS)


def _calls() -> list[tuple[str, ast.Call]]:
    found = []
    for source in sorted(PACKAGE.rglob("*.py")):
        path = source.relative_to(PACKAGE).as_posix()
        found += [(path, node) for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Call)]
    return found


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _receiver(func: ast.expr) -> str | None:
    """The last name of what a method is called on (``ctx.slurm.submit`` → ``slurm``); None for a plain function."""
    if not isinstance(func, ast.Attribute):
        return None
    value = func.value
    return value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else "?"


def _called_names(tree: ast.AST) -> set[str]:
    return {name for node in ast.walk(tree) if isinstance(node, ast.Call) and (name := _name(node.func))}


def _helpers(handler: type, names: set[str]) -> list[ast.AST]:
    """The handler's own methods among ``names`` (one level), parsed."""
    found = []
    for name in names:
        method = getattr(handler, name, None)
        if callable(method) and getattr(method, "__module__", "").startswith("betty_jupyter.server"):
            try:
                found.append(ast.parse(textwrap.dedent(inspect.getsource(method))))
            except (OSError, TypeError):
                continue
    return found
