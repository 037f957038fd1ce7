"""``ToolRegistry``: the tools one session (or one child session) may call, by name."""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Iterator

from .tools import ALL_TOOLS
from .tools.base import Tool, ToolError

AnyTool = Tool[Any]


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
    """Every tool Betty has."""
    return ToolRegistry(tool() for tool in ALL_TOOLS)
