"""A search's later rounds, run as its tasks report: after each watcher tick, each searching sweep the watcher held
plans its next round (reading its tasks' objective and telling its study, a read), and a round with something to do
runs as ``sweep_round`` in its cluster's desk session, through the same policy and approvals as any call.

While the person approved later rounds within a budget, a round inside it runs without a card; a round that would
go beyond it, or one of a sweep whose rounds were not approved, waits as one card. A denied card is not shown again
while this server runs: ``betty sweeps next`` asks again.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import BettyError

if TYPE_CHECKING:
    from ..agent.loop import AgentSession
    from ..experiments.ledger import Tracked


class Desks(Protocol):
    """Where the rounds run: each cluster's desk session, and the Assistant that calls tools in it."""

    @property
    def assistant(self) -> Any:
        """The Assistant whose ``call`` runs a tool in a session, through its policy and approvals."""
        ...

    async def desk(self, cluster: str | None = None) -> "AgentSession":
        """The cluster's desk session."""
        ...

log = logging.getLogger(__name__)


class SearchRounds:
    """The watcher's tick subscriber that moves searching sweeps on, one round per sweep at a time."""

    def __init__(self, services: Desks) -> None:
        self.services = services
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._declined: set[str] = set()

    def __call__(self, held: list["Tracked"]) -> None:
        for tracked in held:
            experiment = tracked.experiment
            slug = experiment.slug
            if not (experiment.sweep or {}).get("search") or slug in self._busy or slug in self._declined:
                continue
            task = asyncio.get_running_loop().create_task(self._round(slug, experiment.cluster))
            self._busy[slug] = task
            task.add_done_callback(partial(self._done, slug))

    def _done(self, slug: str, _: "asyncio.Task[None]") -> None:
        self._busy.pop(slug, None)

    async def _round(self, slug: str, cluster: str) -> None:
        """Plan the round; run it without a card within the approved budget, else on one card."""
        # lazy: the sweep tools and the ledger; a server without a searching sweep never needs them
        from ..agent.tools.base import ToolError
        from ..agent.tools.sweep import next_round, round_within_budget, searching_sweep

        try:
            await asyncio.to_thread(importlib.import_module, "optuna")  # seconds of imports, never on the server's loop
            session = await self.services.desk(cluster)
            experiment = searching_sweep(session.context, slug)
            proposal = await next_round(session.context, experiment)
        except (ToolError, BettyError) as error:
            log.debug("sweep %s: no round now: %s", slug, error)
            return
        within = round_within_budget(experiment, proposal)
        args = {"experiment": slug, "within_budget": within}
        try:
            outcome = await self.services.assistant.call(session.session_id, "sweep_round", args, None)
        except BettyError as error:
            log.info("sweep %s: its round did not run: %s", slug, error)
            return
        if not outcome.ok and not within:
            self._declined.add(slug)
