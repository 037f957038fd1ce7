"""The server extension app: builds Betty's services once and joins the handler tables."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp

from .._version import __version__
from ..config import BettyConfig, load_config
from . import handlers


class BettyApp(ExtensionApp):
    """Betty inside a Jupyter server."""

    name = "betty_jupyter"
    version = __version__
    description = "Betty: an assistant for researchers on Slurm clusters"
    load_other_extensions = True

    classes = [BettyConfig]

    def initialize_settings(self) -> None:
        """Build the configuration every handler shares."""
        betty_config = load_config(self.config)
        self.settings["betty_config"] = betty_config
        self.log.info(
            "Betty %s ready; clusters: %s", __version__, ", ".join(betty_config.cluster_names) or "none"
        )

    def initialize_handlers(self) -> None:
        """Join the route tables of every handlers module."""
        self.handlers.extend(handlers.handlers)
