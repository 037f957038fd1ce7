"""What every ``%betty`` command shares: this notebook's Betty, and calling a tool as the person."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ...errors import ToolError
from ..display import shown_as
from ..session import Call, NotebookBetty

if TYPE_CHECKING:
    from ...agent.models import ToolOutcome


class Connected:
    """This notebook's Betty, connected on first use, and the calls every command makes through it."""

    _betty: "NotebookBetty | None" = None
    shell: Any
    """The IPython shell (set by :class:`~IPython.core.magic.Magics`)."""

    @property
    def connection(self) -> "NotebookBetty":
        """This notebook's Betty, connected on first use (the server's extension, or this kernel)."""
        if Connected._betty is None:
            # lazy: the backend and the configuration it reads; `%load_ext` never needs them
            from ..backend import connect

            Connected._betty = NotebookBetty(connect())
        return Connected._betty

    def _open_cluster_early(self) -> None:
        """Before this notebook's first command, a read: log in to the default cluster in the background while the
        command loads its tool and Betty (:func:`~betty_jupyter.notebook.backend.open_cluster_early`)."""
        if Connected._betty is None:
            from ..backend import open_cluster_early  # lazy: the backend; `%load_ext` never needs it

            open_cluster_early()

    def _run(self, tool: str, args: dict[str, Any], label: str,
             extra: "Callable[[ToolOutcome], list[Any]] | None" = None) -> "ToolOutcome | Call":
        """Call ``tool`` as the person; the outcome once done, or the pending call when it waits for approval."""
        from ..widgets.progress import waiting  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        call = betty.start(tool, {k: v for k, v in args.items() if v is not None})
        if not call.settle(waiting(label)):
            # lazy: the approval card and its editor; a read that asks nobody never needs them
            from ..widgets.calls import CallView

            return shown_as(call, CallView(call, betty.respond, extra, check=betty.repreview,
                                           estimate=betty.start_estimate))
        outcome: ToolOutcome = call.future.result()
        if not outcome.ok:
            raise ToolError(outcome.summary.strip().splitlines()[0] if outcome.summary.strip() else "failed")
        return outcome

    def _read(self, tool: str, args: dict[str, Any], label: str) -> Any:
        """A read's data (it waits for a person only when a rule says so: then the pending call)."""
        result = self._run(tool, args, label)
        return result if isinstance(result, Call) else result.data

    def _quiet(self, tool: str, args: dict[str, Any]) -> "ToolOutcome":
        """A call from a widget's thread: waits for the outcome; ToolFailed when it did not do it."""
        outcome = self.connection.start(tool, args).future.result()
        if not outcome.ok:
            raise ToolError(outcome.summary.strip().splitlines()[0])
        return outcome

    def _where(self) -> str:
        """The name of the cluster in use."""
        betty = self.connection
        if betty.cluster:
            return betty.cluster
        return next((str(c["name"]) for c in betty.backend.clusters() if c.get("default")), "the default cluster")
