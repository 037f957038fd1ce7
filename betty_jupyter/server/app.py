"""The server extension app: builds Betty's services once and joins the handler tables.

Start-up stays cheap: the agent (pydantic models, tools, the Assistant) loads once the
server's loop runs or at the first request, and pandas, openai, paramiko and matplotlib only
when a handler first needs them.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Enum, Float, Unicode

from .._version import __version__
from ..agent.vocabulary import MODES, Mode
from ..config import BettyConfig, load_config
from ..experiments.workspace import Workspace
from ..saved_records import keep_records
from . import handlers
from .services import BettyServices
from .shutdown import end_worker_threads_at_exit, stop_on_interrupt_without_terminal


class BettyApp(ExtensionApp):
    """Betty inside a Jupyter server."""

    name = "betty_jupyter"
    version = __version__
    description = "Betty: an assistant for researchers on Slurm clusters"
    load_other_extensions = True

    classes = [BettyConfig]

    workspace = Unicode(
        "", help="The project whose wiki, experiment notebooks and .betty/ Betty uses (default: the server's root_dir)."
    ).tag(config=True)

    mode = Enum(list(MODES), Mode.CONFIRM.value,
                help="The agent mode new sessions start in: off, propose, confirm or auto.").tag(config=True)

    approval_timeout = Float(600.0, help="Seconds an approval card waits for an answer before it is timed out.").tag(
        config=True
    )

    automation_lease_seconds = Float(60.0, help=(
        "Seconds an automation run's lease lasts without a heartbeat: a run whose server died is resumed by "
        "the next server once its lease ran out.")).tag(config=True)

    def initialize_settings(self) -> None:
        """Read the configuration and set up the services every handler shares (the Assistant comes later)."""
        betty_config = load_config(self.config)
        assert self.serverapp is not None
        workspace = Workspace.at(self.workspace or self.serverapp.root_dir)
        services = BettyServices(workspace, betty_config, mode=self.mode, approval_timeout=self.approval_timeout,
                                 automation_lease=self.automation_lease_seconds, server_config=self.config)
        self.settings.update(betty_config=betty_config, betty_services=services)
        # a saved notebook keeps Betty's widgets as their records: their views die with the kernel
        contents: Any = self.serverapp.contents_manager
        contents.register_pre_save_hook(keep_records)
        end_worker_threads_at_exit()
        self._default_interrupt = stop_on_interrupt_without_terminal(self.serverapp)
        self.log.info("Betty %s ready in %s; clusters: %s", __version__, workspace.root,
                      ", ".join(betty_config.cluster_names) or "none")

    def initialize_handlers(self) -> None:
        """Join the route tables of every handlers module."""
        self.handlers.extend(handlers.handlers)

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """Once the server's loop runs (and it already answers): build the Assistant, start the job watcher and
        the automation runner."""
        self.settings["betty_services"].start()

    async def stop_extension(self) -> None:
        """Stop background calls, approvals (cancelled), the watcher and the links to clusters."""
        await self.settings["betty_services"].close()
        self._default_interrupt()
