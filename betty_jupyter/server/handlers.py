"""Handlers for Betty's health endpoint. Every handler here requires an authenticated user."""

from __future__ import annotations

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from .._version import __version__
from ..config import BettyConfig
from .models import Health


class HealthHandler(ExtensionHandlerMixin, APIHandler):
    """``GET /betty/api/health``: Betty's version and the clusters it is configured for."""

    @property
    def betty_config(self) -> BettyConfig:
        """The configuration the extension app built at start-up."""
        config: BettyConfig = self.settings["betty_config"]
        return config

    @web.authenticated
    def get(self) -> None:
        """Answer with the version and the configured clusters."""
        config = self.betty_config
        health: Health = {
            "status": "ok",
            "version": __version__,
            "clusters": config.cluster_names,
            "default_cluster": config.active_cluster,
        }
        self.finish(health)


handlers = [
    (r"/betty/api/health", HealthHandler),
]
