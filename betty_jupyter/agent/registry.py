"""``ToolRegistry``: the tools one session (or one child session) may call, by name, and where they come from.

Every tool is discovered through the ``betty_jupyter.tools`` entry-point group (:func:`discovered_tools`):
Betty's own table (:data:`BETTY_ENTRY`, its order is the system prompt's) first, then each other
package's entries, in the order of their names. A third-party entry is a :class:`Tool` subclass or a
sequence of them; it stands under the same tiers, policy, cards and action log as Betty's own. One
that does not load or is not a tool is skipped with one logged line, and one whose name is taken is
refused with one: neither stops Betty.
"""

from __future__ import annotations

import difflib
import logging
import re
import sys
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Iterable, Iterator

from pydantic import BaseModel

from ..errors import ConfigError
from .models import Tier
from .tools.base import Tool, ToolError

AnyTool = Tool[Any]
TOOLS_GROUP = "betty_jupyter.tools"
"""The entry-point group every tool is registered in."""
BETTY_ENTRY = "betty_jupyter.agent.tools.catalog:BETTY_TOOLS"
"""The entry that registers Betty's own tools (``betty = "…"`` in Betty's ``pyproject.toml``)."""
TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
"""A tool's name: what a model writes in a call (OpenAI allows no more than 64 such characters)."""
log = logging.getLogger(__name__)


class ToolRegistry:
    """An ordered set of tools with unique names."""

    def __init__(self, tools: Iterable[AnyTool]) -> None:
        self._tools: dict[str, AnyTool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ToolError(f"two tools are called {tool.name!r}; tool names must be unique")
            self._tools[tool.name] = tool

    def get(self, name: str) -> AnyTool:
        """The tool called ``name``; a ToolError naming the closest tools when there is none."""
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"there is no tool {str(name)[:60]!r}; {self._closest(str(name))}")
        return tool

    def _closest(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._tools), n=3, cutoff=0.5)
        if close:
            return f"did you mean {' or '.join(close)}?"
        return f"the tools are {', '.join(self._tools)}"

    def names(self) -> list[str]:
        """The tool names, in order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self, subset: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The OpenAI ``tools=[…]`` list, for every tool or for ``subset`` (unknown names refused)."""
        names = self.names() if subset is None else list(subset)
        return [self.get(name).schema() for name in names]

    def subset(self, names: Iterable[str]) -> "ToolRegistry":
        """A registry with only ``names``: a child never holds a tool its parent lacks."""
        wanted = list(dict.fromkeys(names))
        missing = [name for name in wanted if name not in self._tools]
        if missing:
            raise ToolError(f"refused: {', '.join(missing)} not among this session's tools "
                            f"({', '.join(self._tools)}); a child gets only tools its parent has")
        return ToolRegistry(self._tools[name] for name in wanted)


def default_registry() -> ToolRegistry:
    """Every tool Betty has: its own and those other packages registered (:func:`discovered_tools`)."""
    return ToolRegistry(tool() for tool in discovered_tools())


def registry_of(names: Iterable[str]) -> ToolRegistry:
    """A registry of only ``names``, in that order, loading no other tool where it can: Betty's own tools from its
    table (their modules alone), another package's through discovery. A ToolError when there is no such tool."""
    return ToolRegistry(tool_class(name)() for name in dict.fromkeys(names))


def tool_class(name: str) -> type[AnyTool]:
    """The class of the tool called ``name``: Betty's own first (its module alone is imported), else a discovered
    one; a ToolError naming the closest tools when there is none."""
    from .tools import catalog  # lazy: the table only; each tool's module loads when it is asked for

    if name in catalog.TOOL_CLASSES:
        return catalog.betty_tool(name)
    return type(default_registry().get(name))


def discovered_tools() -> tuple[type[AnyTool], ...]:
    """Every tool class registered in :data:`TOOLS_GROUP`: Betty's own in their order, then the others'.

    ConfigError when Betty's own entry is missing (its package metadata is older than its code:
    install it again); another package's broken or clashing entry is skipped with one logged line.
    Read once per ``sys.path``.
    """
    return _discovered(tuple(sys.path))


@lru_cache(maxsize=4)
def _discovered(path: tuple[str, ...]) -> tuple[type[AnyTool], ...]:
    """:func:`discovered_tools` for ``sys.path`` ``path`` (what the entry points are read from: the cache's key)."""
    found = sorted(entry_points(group=TOOLS_GROUP), key=lambda entry: (entry.name, entry.value))
    own = [entry for entry in found if entry.value == BETTY_ENTRY]
    if not own:
        raise ConfigError(f"Betty's own tools are not registered: no {TOOLS_GROUP} entry names {BETTY_ENTRY} "
                          "(the installed metadata is older than this code); install Betty again "
                          "(bash scripts/install.sh, or pip install -e .)")
    tools = list(_tools_of(own[0]))
    problems = [problem for tool in tools for problem in tool_problems(tool)]
    if problems:
        raise ConfigError(f"Betty's own tools are broken: {'; '.join(problems)}")
    taken = {tool.name: "Betty" for tool in tools}
    for entry in found:
        if entry.value == BETTY_ENTRY:
            continue
        try:
            theirs = list(_tools_of(entry))
        except Exception as error:  # anything a third-party import raises: skipped, never Betty stopped
            log.warning("betty: tool entry point %s = %s is skipped: %s", entry.name, entry.value, _said(error))
            continue
        for tool in theirs:
            if problems := tool_problems(tool) or _made_problems(tool):
                log.warning("betty: tool %r of entry point %s is skipped: %s", str(getattr(tool, "name", tool))[:80],
                            entry.name, "; ".join(problems))
            elif tool.name in taken:
                log.warning("betty: tool %r of entry point %s is refused: %s already has a tool of that name",
                            tool.name, entry.name, taken[tool.name])
            else:
                taken[tool.name] = f"entry point {entry.name}"
                tools.append(tool)
    return tuple(tools)


def _tools_of(entry: EntryPoint) -> list[Any]:
    """What ``entry`` registers: one tool class, or a sequence of them."""
    loaded = entry.load()
    return list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]


def _made_problems(tool: type[AnyTool]) -> list[str]:
    """Why ``tool`` cannot be made and shown to a model (empty when it can): its class is checked, its code is not."""
    try:
        tool().schema()
    except Exception as error:  # anything a third-party tool raises: it is skipped, Betty goes on
        return [f"it cannot be made: {_said(error)}"]
    return []


def _said(error: BaseException) -> str:
    """``error`` in one short line, as a log line tells it."""
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def tool_problems(tool: Any) -> list[str]:
    """What keeps ``tool`` from being a tool Betty can offer (empty when it is one): every :class:`Tool` needs a
    ``name`` a model can write, a ``description``, an ``Args`` model and a ``tier``."""
    if not (isinstance(tool, type) and issubclass(tool, Tool)):
        return [f"{str(tool)[:80]} is not a subclass of betty_jupyter.agent.tools.base.Tool"]
    problems = []
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        problems.append(f"its name {str(name)[:80]!r} is not a letter then up to 63 letters, digits or _")
    if not isinstance(getattr(tool, "description", None), str) or not tool.description.strip():
        problems.append("it has no description")
    args = getattr(tool, "Args", None)
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        problems.append("its Args is not a pydantic model (subclass betty_jupyter.agent.tools.base.ToolArgs)")
    if not isinstance(getattr(tool, "tier", None), Tier):
        problems.append("its tier is not a Tier (Tier.AUTO, Tier.ONCE_PER_SESSION or Tier.ALWAYS_ASK)")
    return problems
