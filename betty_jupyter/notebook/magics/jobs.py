"""``%betty squeue|sinfo|sacct|overview|efficiency|status|why|logs|wait|cancel``: the cluster's jobs in a notebook.

The reads are those of :mod:`betty_jupyter.read_commands`: their options come from there, derived
from each tool; this module adds what only a notebook has (``--follow``) and shows each result.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, Callable

from ...cluster.tables import HISTORY_COLUMNS, PARTITION_COLUMNS, QUEUE_COLUMNS
from ...errors import UsageError
from ...read_commands import ME, ReadCommand
from ..display import efficiency_frame, job_frame, shown_as, table_frame
from ..session import Call
from .base import Connected
from .parsing import MagicParser, job_parser

if TYPE_CHECKING:
    import pandas as pd

SETTLE_SECONDS = 60.0
"""How long ``%betty wait`` waits after a job's end for accounting to record its exit code."""

Shown = Callable[[Any, dict[str, Any], argparse.Namespace], Any]


def add_face_options(parser: argparse.ArgumentParser, command: ReadCommand) -> None:
    """The options only a notebook has, per read."""
    if command.name == "logs":
        parser.add_argument("--follow", action="store_true", help="keep showing the end of the log until the job ends")


class JobCommands(Connected):
    """The job commands; each read of the table is shown by its ``_show_<name>``, or as its data when it has none."""

    def shown(self, command: ReadCommand) -> Callable[[dict[str, Any], argparse.Namespace], Any]:
        """How the read ``command`` is shown: its tool called with ``values``, the result as a widget."""
        show: Shown | None = getattr(type(self), f"_show_{command.name}", None)
        if show is None:  # a read without a view of its own: its data, as IPython shows it
            return lambda values, args: self._read(command.tool, values, f"reading {command.help}")
        return lambda values, args: show(self, values, args)

    def job_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module that are not reads of the table."""
        return {"wait": (self._wait_parser, self._wait), "cancel": (self._cancel_parser, self._cancel)}

    # ----- the reads of the table --------------------------------------------------------------------------------
    def _show_queue(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        if values.get("user") == ME:
            values["user"] = self.connection.user()
            if not values["user"]:
                raise UsageError("Betty could not learn your login name on this cluster, so --me cannot filter")
        if values.get("states"):
            values["states"] = [state.upper() for state in values["states"]]
        return self._job_table("cluster_queue", values, f"queue on {self._where()}", QUEUE_COLUMNS)

    def _show_partitions(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        frame = self._read("cluster_partitions", values, f"reading the partitions of {self._where()}")
        return frame if isinstance(frame, Call) else table_frame(frame, PARTITION_COLUMNS)

    def _show_history(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        return self._job_table("cluster_history", values, f"history on {self._where()}", HISTORY_COLUMNS)

    def _show_overview(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        from ..overview import ShownOverview  # lazy: the figure's module; `%load_ext` never needs it

        overview = self._read("cluster_overview", values, f"reading what {self._where()} is doing")
        return overview if isinstance(overview, Call) else ShownOverview(overview)

    def _show_efficiency(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        data = self._read("cluster_efficiency", values, f"reading accounting on {self._where()}")
        return data if isinstance(data, Call) else efficiency_frame(data)

    def _show_status(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        return self._live(values["job_id"], with_log=True)

    def _show_why(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        from ..why import WhyPendingView  # lazy: only `%betty why` needs it

        which = f"job {values['job_id']}" if values.get("job_id") else "your newest pending job"
        data = self._read("cluster_why", values, f"asking Slurm why {which} waits")
        if isinstance(data, Call):
            return data
        view = WhyPendingView(data)
        move = (data.get("sooner") or {}).get("resubmit")
        if not move:
            return view
        from IPython.display import display  # lazy: only a move offered needs it
        from ..why import move_offer  # lazy: ipywidgets; only a move offered needs it
        from ..widgets.calls import CallView  # lazy: ipywidgets; only a move offered needs it

        betty = self.connection
        display(view)
        return move_offer(data, lambda: CallView(betty.start("cluster_submit", move), betty.respond,
                                                 check=betty.repreview))

    def _show_logs(self, values: dict[str, Any], args: argparse.Namespace) -> Any:
        stream, lines = values.get("stream", "out"), values.get("lines", 50)
        if args.follow:
            if not values.get("job_id"):
                raise UsageError("%betty logs --follow: name the job, e.g. `%betty logs 1234 --follow`")
            return self._live(values["job_id"], with_log=True, stream=stream, lines=lines)
        which = f"job {values['job_id']}'s" if values.get("job_id") else "your newest job's"
        outcome = self._run("job_logs", values, f"reading {which} std{stream}")
        if isinstance(outcome, Call):
            return outcome
        print(outcome.summary)
        return None

    # ----- tables and live jobs ----------------------------------------------------------------------------------
    def _job_table(self, tool: str, query: dict[str, Any], title: str, columns: list[str]) -> Any:
        frame = self._read(tool, query, f"reading the {title}")
        if isinstance(frame, Call):
            return frame

        def fetch() -> "pd.DataFrame":
            frame: pd.DataFrame = self._quiet(tool, {k: v for k, v in query.items() if v is not None}).data
            return frame

        def table(shown: "pd.DataFrame") -> Any:
            from ..widgets.jobs import JobTable  # lazy: ipywidgets; only a table that is shown needs it

            made = JobTable(title, frame, columns, fetch, mine=self.connection.user(), cancel=self._cancel_view)
            made.kept_with(shown)  # the table pages through the person's DataFrame while they keep it
            return made

        return job_frame(frame, table)

    def _cancel_view(self, job_id: str) -> Any:
        from ..widgets.calls import CallView  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        return CallView(betty.start("cluster_cancel", {"job_id": job_id}), betty.respond, check=betty.repreview)

    def _live(self, job_id: str, with_log: bool, stream: str = "out", lines: int = 20) -> Any:
        job = self._read("cluster_status", {"job_id": job_id}, f"reading job {job_id}")
        if isinstance(job, Call):
            return job
        return shown_as(job, self._live_view(job, with_log, stream, lines))

    def _live_view(self, job: Any, with_log: bool = True, stream: str = "out", lines: int = 20) -> Any:
        """A :class:`LiveJob` for ``job``, woken by the watcher's updates and re-reading it until it ends."""
        from ..widgets.live import LiveJob  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection

        def read_job(ident: str) -> Any:
            return self._quiet("cluster_status", {"job_id": ident}).data

        def read_log(ident: str) -> str:
            return str(self._quiet("job_logs", {"job_id": ident, "stream": stream, "lines": lines}).summary)

        view = LiveJob(job, read_job, read_log if with_log else None)
        view.unfollow = betty.follow(view.on_event)
        return view

    # ----- wait and cancel ---------------------------------------------------------------------------------------
    @staticmethod
    def _wait_parser() -> MagicParser:
        parser = job_parser("wait", "wait until a job ends (the cell runs meanwhile, like a sleep); its final record")
        parser.add_argument("--timeout", type=float, default=3600, metavar="S", help="give up after S seconds")
        parser.add_argument("--every", type=float, default=5, metavar="S", help="look every S seconds (default 5)")
        return parser

    def _wait(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..widgets.progress import waiting  # lazy: ipywidgets; `%load_ext` never needs it

        if args.every < 1 or args.timeout <= 0:
            raise UsageError("%betty wait: --every is at least 1 second and --timeout positive")
        deadline = time.monotonic() + args.timeout
        remove = waiting(f"waiting for job {args.job_id} to end")()
        ended_at: float | None = None
        try:
            while True:
                job = self._quiet("cluster_status", {"job_id": args.job_id}).data
                if job.state.finished:
                    # its exit code comes with accounting, a moment after the end
                    ended_at = ended_at or time.monotonic()
                    if job.exit_code or time.monotonic() - ended_at >= SETTLE_SECONDS:
                        return job
                if time.monotonic() + args.every > deadline:
                    raise UsageError(f"job {args.job_id} is still {job.state.value} after {args.timeout:g} s")
                time.sleep(args.every)
        finally:
            remove()

    @staticmethod
    def _cancel_parser() -> MagicParser:
        return job_parser("cancel", "cancel a job; Betty shows the job and the scancel command for your approval")

    def _cancel(self, args: argparse.Namespace, cell: str | None) -> Any:
        return self._run("cluster_cancel", {"job_id": args.job_id}, f"looking up job {args.job_id}")
