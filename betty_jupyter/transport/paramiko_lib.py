"""paramiko, loaded without ``invoke`` until an ssh config needs it.

paramiko's config module imports ``invoke`` (a task runner with its own YAML parser, a large share of paramiko's
import) for one thing only: running the command of a ``Match exec`` line. Betty loads paramiko with that import held
back, and gives ``invoke`` to paramiko the first time a host's lookup meets a ``Match exec`` line, so a config
without one never pays for it and a config with one works as it always has.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def load() -> ModuleType:
    """The ``paramiko`` module (imported on the first call, ``invoke`` held back unless it is loaded already).

    Call it before ``import paramiko``: the import then finds the module loaded."""
    if "paramiko" in sys.modules:
        return sys.modules["paramiko"]
    held_back = "invoke" not in sys.modules
    if held_back:
        sys.modules["invoke"] = None  # type: ignore[assignment]  # paramiko's `import invoke` fails, as if absent
    try:
        import paramiko  # lazy: loading it is this function's work, with `invoke` held back
    finally:
        if held_back and sys.modules.get("invoke", ...) is None:
            del sys.modules["invoke"]
    return paramiko


def host_entry(config: Any, alias: str) -> Any:
    """``config.lookup(alias)`` of a ``paramiko.SSHConfig``; a ``Match exec`` line it meets loads ``invoke`` then."""
    try:
        return config.lookup(alias)
    except ImportError:  # paramiko's stand-in for the held-back `invoke`: a `Match exec` line needs it now
        # lazy: only a `Match exec` line needs invoke (a missing package raises here, as paramiko's lookup would)
        import invoke
        import paramiko.config

        setattr(paramiko.config, "invoke", invoke)  # where paramiko looks for it at a `Match exec` line
        return config.lookup(alias)
