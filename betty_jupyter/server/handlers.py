"""Betty's health endpoint, and the route table every handlers module contributes to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tornado import web

from .._version import __version__
from . import (approvals, automations, cluster_routes, docs, knowledge, login, mcp_http, mcp_tokens, node_kernels,
               open_notebook, sessions, sweeps, timeline, ws)
from .base import BettyHandler

if TYPE_CHECKING:
    from .models import Health, SitePolicyView


class HealthHandler(BettyHandler):
    """``GET /betty/api/health``: Betty's version and the clusters it is configured for."""

    @web.authenticated
    def get(self) -> None:
        """Answer with the version and the configured clusters."""
        config = self.betty_config
        health: Health = {
            "status": "ok",
            "version": __version__,
            "clusters": config.cluster_names,
            "default_cluster": config.active_cluster,
            "project": str(self.services.workspace.root),
        }
        self.answer(health)


class PolicyHandler(BettyHandler):
    """``GET /betty/api/policy``: the site's policy in effect, each field with its value and where it came from."""

    @web.authenticated
    async def get(self) -> None:
        """Answer with :class:`~.models.SitePolicyView`; ``?usage=1`` adds the cost meter (each budgeted account's
        use this month, read from the default cluster's accounting)."""
        config = self.betty_config
        if self.query("usage") and config.site.budgets and config.cluster_names:
            # lazy: the accounting reads and the shared cluster; only the cost meter needs them
            from ..agent.site_gate import policy_with_use
            from ..cluster.shared import shared_cluster

            profile = config.profile(None)
            self.answer(await policy_with_use(config.site, profile, shared_cluster(profile).slurm))
            return
        view: SitePolicyView = config.site.as_dict()  # type: ignore[assignment]
        self.answer(view)


handlers: list[tuple[str, type[Any]]] = [
    (r"/betty/api/health", HealthHandler),
    (r"/betty/api/policy", PolicyHandler),
    *sessions.handlers,
    *ws.handlers,
    *approvals.handlers,
    *timeline.handlers,
    *cluster_routes.handlers,
    *node_kernels.handlers,
    *login.handlers,
    *knowledge.handlers,
    *sweeps.handlers,
    *open_notebook.handlers,
    *automations.handlers,
    *mcp_http.handlers,
    *mcp_tokens.handlers,
    *docs.handlers,
]
"""Every route of Betty's server extension (``docs/server-api.md``), each with its handler class."""
