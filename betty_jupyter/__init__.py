"""Betty: a Jupyter-native assistant for researchers who run work on a Slurm cluster.

Importing this package is cheap on purpose: the server extension, the labextension paths
and the IPython extension are found here, and each loads its own modules only when used.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt side panel shipped in the wheel."""
    return [{"src": "labextension", "dest": "betty-jupyter"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Betty's server extension, found by jupyter_server when it is enabled."""
    # lazy: the Jupyter server stack; `import betty_jupyter` (the CLI, every kernel) never needs it
    from .server.app import BettyApp

    return [{"module": "betty_jupyter", "app": BettyApp}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext betty_jupyter``: register the ``%betty`` magics and how Betty's results show.

    A cluster's login questions (a second factor) are asked under the running ``%betty`` cell.
    """
    # lazy: IPython and the magics load on `%load_ext`, never on `import betty_jupyter` or in `betty`
    from .transport.login import answer_login_questions_with
    from .notebook.display import register
    from .notebook.login import cell_login
    from .notebook.magics import BettyMagics

    ipython.register_magics(BettyMagics)
    register(ipython)
    answer_login_questions_with(cell_login)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext betty_jupyter``: nothing to undo beyond IPython's own bookkeeping."""
