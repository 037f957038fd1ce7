"""Every action the agent can take, as a small :class:`Tool` with a preview (see ``docs/agent-tools.md``).

Each tool is a module of this package; Betty's own are listed in :mod:`.catalog`, which the
``betty_jupyter.tools`` entry point names. This package itself holds only what every tool stands on.
"""

from __future__ import annotations

from .base import JobId, Tool, ToolArgs, ToolContext, ToolError

__all__ = ["JobId", "Tool", "ToolArgs", "ToolContext", "ToolError"]
