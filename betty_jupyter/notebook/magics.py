"""``%betty`` and ``%%betty``: Betty in a notebook. A user error prints one line, never a traceback.

Each command returns the object a researcher computes with — ``_`` holds the DataFrame,
the Job, the Estimate, the pending call — and shows it as a widget. Nothing waits for a
person inside a cell: a call that needs an approval returns at once with its card.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from .._version import __version__
from ..agent.vocabulary import MODES
from ..cluster.jobs import job_id
from ..cluster.tables import HISTORY_COLUMNS, PARTITION_COLUMNS, QUEUE_COLUMNS
from ..errors import BettyError, ToolError, UsageError
from ..gpu import estimate, gpu_type
from ..gpu.options import job_options, request_from
from ..safe_text import markdown_html
from .display import efficiency_frame, job_frame, shown_as, table_frame
from .login import cell_login
from .session import Call, NotebookBetty

if TYPE_CHECKING:
    import pandas as pd

    from ..agent.models import ToolOutcome

SETTLE_SECONDS = 60.0
"""How long ``%betty wait`` waits after a job's end for accounting to record its exit code."""

_HELP = """\
%betty COMMAND [OPTIONS] — Betty, an assistant for your Slurm cluster. `%betty COMMAND --help` explains one.

  clusters                      the configured clusters (* marks the one in use)
  use NAME                      work on another cluster from now on
  squeue [--me] [--partition P] [--state S]   the queue, as a live table
  sinfo                         the partitions: nodes, CPUs, GPUs, limits
  overview                      what the cluster is doing: a figure of partitions by state, the queue, your share
  sacct [JOBID…] [--since WHEN] [--all-users]  jobs from accounting
  efficiency [JOBID…] [--since 7d] [--experiment SLUG]  CPU, memory, time used vs asked; right-sizing
  status JOBID                  one job, kept current until it ends
  why JOBID                     why a pending job of yours waits, and what would start it sooner
  logs JOBID [--err] [--lines N] [--follow]   the end of a job's output
  wait JOBID [--timeout S]      wait (blocking the cell) until a job ends; its final record
  cancel JOBID                  cancel a job (after your approval)
  gpu [estimate] --model M --method X …      GPU memory per GPU (options of `betty gpu estimate`; --trace runs the step)
  gpu calculator                sliders for model, method, batch, sequence, GPUs
  %%betty submit [--slug S] [--goal "…"]     submit the cell as a batch script (after your approval)
  %%betty sweep --grid lr=1e-4,3e-4 seed=0,1 [--at-once N]   the cell at every point of a grid: one job array
  sweep SLUG                    a sweep's tasks side by side: states, metrics, plots
  %%betty run --partition P --time MIN [--gpus N] [--env NAME] [--in x,y] [--out a,b]   the cell's Python as a job
  advise FILE  /  %%betty advise [--partition P] [--nodes N…]   when and where a script would start
  ask "PROMPT"  /  %%betty ask  ask Betty's agent (quote a question: IPython reads a trailing ? as help)
  wiki [search Q | show PAGE]   the project's wiki
  mode [off|propose|confirm|auto]   what Betty's agent may do without asking
  log [--limit N]               this notebook's actions (the action log)
  approvals                     every approval waiting for you (automations' too, under a Betty server)
  where                         where Betty runs: the server's extension or this kernel
  version                       Betty's version
"""


class _HelpShown(Exception):
    """``--help`` printed the help; the command stops quietly."""


class MagicParser(argparse.ArgumentParser):
    """argparse for a magic: a mistake is one :class:`UsageError` line, ``--help`` prints and stops."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, end="")
        raise _HelpShown()


def _parser(name: str, description: str) -> MagicParser:
    return MagicParser(prog=f"%betty {name}", description=description, add_help=True)


def _job_parser(name: str, description: str) -> MagicParser:
    """A parser for a command about one job (``JOBID`` first)."""
    parser = _parser(name, description)
    parser.add_argument("job_id", metavar="JOBID", type=_job_id)
    return parser


def _job_id(text: str) -> str:
    try:
        return job_id(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@magics_class
class BettyMagics(Magics):
    """``%betty …`` and ``%%betty …`` in a notebook: parse, call Betty, show the result."""

    _betty: "NotebookBetty | None" = None

    @line_cell_magic
    def betty(self, line: str, cell: str | None = None) -> object:
        """Run one ``%betty`` command; returns its result so it flows into ``_``."""
        try:
            words = shlex.split(line)
            command, args = (words[0], words[1:]) if words else ("help", [])
            entry = self._commands().get(command)
            if entry is None:
                raise UsageError(f"unknown %betty command {command!r}; try `%betty help`")
            build, run = entry
            parsed = build().parse_args(args)
            with cell_login.running():  # a cluster's login may ask under this cell
                return run(parsed, cell)
        except _HelpShown:
            return None
        except (BettyError, ValueError) as error:
            print(f"betty: {error}", file=sys.stderr)
            return None

    # ----- the connection ----------------------------------------------------------------------
    @property
    def connection(self) -> "NotebookBetty":
        """This notebook's Betty, connected on first use (the server's extension, or this kernel)."""
        if self._betty is None:
            # lazy: the backend and the configuration it reads; `%load_ext` never needs them
            from .backend import connect

            BettyMagics._betty = NotebookBetty(connect())
        assert self._betty is not None
        return self._betty

    def _run(self, tool: str, args: dict[str, Any], label: str,
             extra: "Callable[[ToolOutcome], list[Any]] | None" = None) -> "ToolOutcome | Call":
        """Call ``tool`` as the person; the outcome once done, or the pending call when it waits for approval."""
        from .widgets.progress import waiting  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        call = betty.start(tool, {k: v for k, v in args.items() if v is not None})
        if not call.settle(waiting(label)):
            # lazy: the approval card and its editor; a read that asks nobody never needs them
            from .widgets.calls import CallView

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

    def _where(self) -> str:
        """The name of the cluster in use."""
        betty = self.connection
        if betty.cluster:
            return betty.cluster
        return next((str(c["name"]) for c in betty.backend.clusters() if c.get("default")), "the default cluster")

    # ----- the commands ------------------------------------------------------------------------
    def _commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        return {
            "help": (lambda: _parser("help", "Betty's commands"), self._help),
            "version": (lambda: _parser("version", "Betty's version"), self._version),
            "where": (lambda: _parser("where", "where Betty runs for this notebook"), self._where_cmd),
            "clusters": (lambda: _parser("clusters", "the configured clusters"), self._clusters),
            "use": (self._use_parser, self._use),
            "squeue": (self._squeue_parser, self._squeue),
            "sinfo": (lambda: _parser("sinfo", "the partitions of the cluster in use"), self._sinfo),
            "overview": (lambda: _parser("overview", "what the cluster is doing: CPUs and GPUs by state per "
                                         "partition, the queue's depth, expected waits, your share"), self._overview),
            "sacct": (self._sacct_parser, self._sacct),
            "efficiency": (self._efficiency_parser, self._efficiency),
            "status": (self._status_parser, self._status),
            "why": (lambda: _job_parser("why", "why a pending job of yours waits, and what would start it sooner"),
                    self._why),
            "logs": (self._logs_parser, self._logs),
            "wait": (self._wait_parser, self._wait),
            "cancel": (self._cancel_parser, self._cancel),
            "gpu": (self._gpu_parser, self._gpu),
            "submit": (self._submit_parser, self._submit),
            "sweep": (self._sweep_parser, self._sweep),
            "run": (self._run_parser, self._run_cell),
            "advise": (self._advise_parser, self._advise),
            "ask": (self._ask_parser, self._ask),
            "wiki": (self._wiki_parser, self._wiki),
            "mode": (self._mode_parser, self._mode),
            "log": (self._log_parser, self._log),
            "approvals": (lambda: _parser("approvals", "every approval waiting for a person — the agent's, "
                                          "automations' (under a Betty server), other sessions'"), self._approvals),
        }

    @staticmethod
    def _help(args: argparse.Namespace, cell: str | None) -> None:
        print(_HELP, end="")

    @staticmethod
    def _version(args: argparse.Namespace, cell: str | None) -> str:
        return f"Betty {__version__}"

    def _where_cmd(self, args: argparse.Namespace, cell: str | None) -> str:
        return f"Betty runs in {self.connection.backend.where}"

    def _clusters(self, args: argparse.Namespace, cell: str | None) -> "pd.DataFrame":
        import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it

        betty = self.connection
        rows = betty.backend.clusters()
        frame = pd.DataFrame(rows, columns=["name", "transport", "host", "default"])
        in_use = betty.cluster or next((r["name"] for r in rows if r.get("default")), None)
        frame["in_use"] = frame["name"] == in_use
        return frame

    @staticmethod
    def _use_parser() -> MagicParser:
        parser = _parser("use", "work on another configured cluster from now on (see `%betty clusters`)")
        parser.add_argument("name", metavar="NAME")
        return parser

    def _use(self, args: argparse.Namespace, cell: str | None) -> str:
        name = self.connection.use(args.name)
        print(f"Betty works on {name} now.")
        return name

    @staticmethod
    def _squeue_parser() -> MagicParser:
        parser = _parser("squeue", "the jobs in the queue, as a live table a page at a time "
                         "(a Cancel action for your own jobs)")
        parser.add_argument("--me", action="store_true", help="only your jobs")
        parser.add_argument("--partition", metavar="P", help="only this partition")
        parser.add_argument("--state", metavar="S", action="append", help="only jobs in this state (repeatable)")
        return parser

    def _squeue(self, args: argparse.Namespace, cell: str | None) -> Any:
        me = self.connection.user() if args.me else None
        if args.me and not me:
            raise UsageError("Betty could not learn your login name on this cluster, so --me cannot filter")
        query = {"user": me, "states": [s.upper() for s in args.state] if args.state else None,
                 "partition": args.partition}
        return self._job_table("cluster_queue", query, f"queue on {self._where()}", QUEUE_COLUMNS)

    def _job_table(self, tool: str, query: dict[str, Any], title: str, columns: list[str]) -> Any:
        from .widgets.jobs import JobTable  # lazy: ipywidgets; `%load_ext` never needs it

        frame = self._read(tool, query, f"reading the {title}")
        if isinstance(frame, Call):
            return frame

        def fetch() -> "pd.DataFrame":
            frame: pd.DataFrame = self._quiet(tool, {k: v for k, v in query.items() if v is not None}).data
            return frame

        table = JobTable(title, frame, columns, fetch, mine=self.connection.user(), cancel=self._cancel_view)
        return job_frame(frame, table)

    def _cancel_view(self, job_id: str) -> Any:
        from .widgets.calls import CallView  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        return CallView(betty.start("cluster_cancel", {"job_id": job_id}), betty.respond, check=betty.repreview)

    def _sinfo(self, args: argparse.Namespace, cell: str | None) -> Any:
        frame = self._read("cluster_partitions", {}, f"reading the partitions of {self._where()}")
        return frame if isinstance(frame, Call) else table_frame(frame, PARTITION_COLUMNS)

    def _overview(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .overview import ShownOverview  # lazy: the figure's module; `%load_ext` never needs it

        overview = self._read("cluster_overview", {}, f"reading what {self._where()} is doing")
        return overview if isinstance(overview, Call) else ShownOverview(overview)

    @staticmethod
    def _sacct_parser() -> MagicParser:
        parser = _parser("sacct", "jobs from Slurm accounting: state, exit code, elapsed, peak memory")
        parser.add_argument("job_ids", nargs="*", metavar="JOBID", type=_job_id)
        parser.add_argument("--since", metavar="WHEN", help="jobs started since, e.g. 2026-11-20 or now-2days")
        parser.add_argument("--all-users", action="store_true", help="every user's jobs, not only yours")
        return parser

    def _sacct(self, args: argparse.Namespace, cell: str | None) -> Any:
        query = {"job_ids": args.job_ids or None, "since": args.since, "all_users": args.all_users or None}
        return self._job_table("cluster_history", query, f"history on {self._where()}", HISTORY_COLUMNS)

    @staticmethod
    def _efficiency_parser() -> MagicParser:
        parser = _parser("efficiency", "what finished jobs used of what they asked for, with a picture")
        parser.add_argument("job_ids", nargs="*", metavar="JOBID", type=_job_id)
        parser.add_argument("--since", default="7d", help="jobs started since: 7d, 12h, 30m or a date (default 7d)")
        parser.add_argument("--experiment", metavar="SLUG", help="an experiment's runs and its right-sized request")
        return parser

    def _efficiency(self, args: argparse.Namespace, cell: str | None) -> Any:
        query = {"job_ids": args.job_ids or None, "since": args.since, "experiment": args.experiment}
        data = self._read("cluster_efficiency", query, f"reading accounting on {self._where()}")
        return data if isinstance(data, Call) else efficiency_frame(data)

    @staticmethod
    def _status_parser() -> MagicParser:
        return _job_parser("status", "one job's state, kept current until it ends")

    def _status(self, args: argparse.Namespace, cell: str | None) -> Any:
        return self._live(args.job_id, with_log=True)

    def _why(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .why import WhyPendingView  # lazy: only `%betty why` needs it

        data = self._read("cluster_why", {"job_id": args.job_id}, f"asking Slurm why job {args.job_id} waits")
        return data if isinstance(data, Call) else WhyPendingView(data)

    def _live(self, job_id: str, with_log: bool, stream: str = "out", lines: int = 20) -> Any:
        job = self._read("cluster_status", {"job_id": job_id}, f"reading job {job_id}")
        if isinstance(job, Call):
            return job
        return shown_as(job, self._live_view(job, with_log, stream, lines))

    def _live_view(self, job: Any, with_log: bool = True, stream: str = "out", lines: int = 20) -> Any:
        """A :class:`LiveJob` for ``job``, woken by the watcher's updates and re-reading it until it ends."""
        from .widgets.live import LiveJob  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection

        def read_job(ident: str) -> Any:
            return self._quiet("cluster_status", {"job_id": ident}).data

        def read_log(ident: str) -> str:
            return str(self._quiet("job_logs", {"job_id": ident, "stream": stream, "lines": lines}).summary)

        view = LiveJob(job, read_job, read_log if with_log else None)
        view.unfollow = betty.follow(view.on_event)
        return view

    def _quiet(self, tool: str, args: dict[str, Any]) -> "ToolOutcome":
        """A call from a widget's thread: waits for the outcome; ToolFailed when it did not do it."""
        outcome = self.connection.start(tool, args).future.result()
        if not outcome.ok:
            raise ToolError(outcome.summary.strip().splitlines()[0])
        return outcome

    @staticmethod
    def _wait_parser() -> MagicParser:
        parser = _job_parser("wait", "wait until a job ends (the cell runs meanwhile, like a sleep); its final record")
        parser.add_argument("--timeout", type=float, default=3600, metavar="S", help="give up after S seconds")
        parser.add_argument("--every", type=float, default=5, metavar="S", help="look every S seconds (default 5)")
        return parser

    def _wait(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .widgets.progress import waiting  # lazy: ipywidgets; `%load_ext` never needs it

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
    def _logs_parser() -> MagicParser:
        parser = _job_parser("logs", "the last lines a job wrote")
        parser.add_argument("--err", action="store_true", help="stderr instead of stdout")
        parser.add_argument("--lines", type=int, default=50, metavar="N", help="how many lines (default 50)")
        parser.add_argument("--follow", action="store_true", help="keep showing the end of the log until the job ends")
        return parser

    def _logs(self, args: argparse.Namespace, cell: str | None) -> Any:
        stream = "err" if args.err else "out"
        if not 1 <= args.lines <= 2000:
            raise UsageError("%betty logs: --lines must be between 1 and 2000")
        if args.follow:
            return self._live(args.job_id, with_log=True, stream=stream, lines=args.lines)
        outcome = self._run("job_logs", {"job_id": args.job_id, "stream": stream, "lines": args.lines},
                            f"reading job {args.job_id}'s std{stream}")
        if isinstance(outcome, Call):
            return outcome
        print(outcome.summary)
        return None

    @staticmethod
    def _cancel_parser() -> MagicParser:
        return _job_parser("cancel", "cancel a job; Betty shows the job and the scancel command for your approval")

    def _cancel(self, args: argparse.Namespace, cell: str | None) -> Any:
        return self._run("cluster_cancel", {"job_id": args.job_id}, f"looking up job {args.job_id}")

    @staticmethod
    def _gpu_parser() -> MagicParser:
        parser = MagicParser(prog="%betty gpu", parents=[job_options()], add_help=True,
                             description="GPU memory per GPU for one job (the options of `betty gpu estimate`); "
                             "`%betty gpu calculator` opens sliders instead")
        parser.add_argument("action", nargs="?", choices=["estimate", "calculator"], default="estimate")
        parser.add_argument("--gpu", metavar="TYPE", help="say whether it fits on this GPU type (e.g. a100-80gb)")
        parser.add_argument("--trace", action="store_true",
                            help="run the real step on meta tensors and count its memory (needs the trace extra)")
        for action in parser._actions:
            if action.dest in ("model", "method"):
                action.required = False
        return parser

    def _gpu(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .widgets.gpu import GpuCalculator  # lazy: ipywidgets; `%load_ext` never needs them

        if args.action == "calculator":
            shape = {"batch_size": args.batch_size, "seq_len": args.seq_len, "gpus": args.gpus}
            return GpuCalculator(model=args.model or "Llama-3.1-8B", method=args.method or "lora", **shape)
        if not args.model or not args.method:
            raise UsageError("%betty gpu: --model and --method are needed (or `%betty gpu calculator`)")
        result = estimate(args.model, request_from(args))
        gpus = [gpu_type(args.gpu)] if args.gpu else []
        if args.trace:
            return self._traced(args.model, result, gpus)
        if args.gpu:
            from .widgets.gpu import EstimateView  # lazy: ipywidgets; `%load_ext` never needs them

            return shown_as(result, EstimateView(result, gpus))
        return result

    @staticmethod
    def _traced(model: str, formula: Any, gpus: list[Any]) -> Any:
        """The traced estimate, shown beside the formula's with its timeline; each phase told while it runs."""
        # lazy: ipywidgets, and the trace (torch itself is lazier still); only `%betty gpu --trace` needs them
        from ..gpu.trace import trace_estimate
        from .widgets.gpu import TracedView
        from .widgets.progress import stages

        with stages(f"tracing one step of {formula.model}") as tell:
            traced = trace_estimate(model, formula.request, gpus[0] if gpus else None, tell)
        return shown_as(traced, TracedView(traced, formula, gpus))

    @staticmethod
    def _submit_parser() -> MagicParser:
        parser = _parser("submit", "%%betty submit: the cell is the batch script; Betty shows it for your "
                         "approval, submits it once and records it as an experiment (wiki page + notebook)")
        parser.add_argument("--slug", metavar="S", help="a short name for the experiment (default: the job name)")
        parser.add_argument("--goal", metavar="TEXT", help="what this run is for (recorded on its wiki page)")
        return parser

    def _submit(self, args: argparse.Namespace, cell: str | None) -> Any:
        goal = args.goal or "submitted from a notebook"
        return self._submit_cell("submit", "cluster_submit", cell, {"goal": goal, "name": args.slug})

    def _submit_cell(self, command: str, tool: str, cell: str | None, tool_args: dict[str, Any]) -> Any:
        """``%%betty submit``/``sweep``: the cell is the script; its card, then the job followed once it is queued."""
        if cell is None or not cell.strip():
            raise UsageError(f"%%betty {command} takes the batch script as the cell's body (use the cell magic "
                             "%%betty)")

        def follow_job(outcome: "ToolOutcome") -> list[Any]:
            return [self._live_view(self._quiet("cluster_status", {"job_id": outcome.data.job_id}).data)]

        # the cell's first line is the magic's own: the script's line 1 is the cell's line 2
        return self._run(tool, {"script": cell, **tool_args, "first_line": 2},
                         f"checking the script against {self._where()}", follow_job)

    @staticmethod
    def _sweep_parser() -> MagicParser:
        parser = _parser("sweep", "%%betty sweep --grid lr=1e-4,3e-4 seed=0,1: the cell is the batch script, run at "
                         "every point of the grid as one job array; one approval, one experiment. "
                         "%betty sweep SLUG: the sweep's tasks compared, with plots")
        parser.add_argument("experiment", nargs="?", metavar="SLUG|JOBID", help="a recorded sweep to compare")
        parser.add_argument("--grid", nargs="+", metavar="NAME=V1,V2",
                            help="each parameter and its values; the script reads them as $NAME")
        parser.add_argument("--at-once", type=int, metavar="N", help="at most N tasks running at a time")
        parser.add_argument("--slug", metavar="S", help="a short name for the experiment (default: the job name)")
        parser.add_argument("--goal", metavar="TEXT", help="what this sweep is for (recorded on its wiki page)")
        return parser

    def _sweep(self, args: argparse.Namespace, cell: str | None) -> Any:
        if cell is None:
            return self._compare_sweep(args.experiment)
        if not args.grid:
            raise UsageError("%%betty sweep needs --grid NAME=V1,V2 … (e.g. --grid lr=1e-4,3e-4 seed=0,1)")
        goal = args.goal or f"a sweep over {' '.join(args.grid)}, from a notebook"
        return self._submit_cell("sweep", "cluster_sweep", cell,
                                 {"grid": args.grid, "at_once": args.at_once, "goal": goal, "name": args.slug})

    def _compare_sweep(self, experiment: str | None) -> Any:
        """``%betty sweep SLUG``: every task of a recorded sweep side by side, with plots."""
        from .sweep import SweepView  # lazy: the comparison's table and plots; only `%betty sweep SLUG` needs them

        if not experiment:
            raise UsageError("%betty sweep SLUG compares a recorded sweep's tasks; %%betty sweep --grid … runs one")
        data = self._read("sweep_compare", {"experiment": experiment}, f"reading sweep {experiment}'s tasks")
        return data if isinstance(data, Call) else SweepView(data)

    @staticmethod
    def _run_parser() -> MagicParser:
        parser = _parser("run", "%%betty run: the cell's Python runs on the cluster as a batch job (after your "
                         "approval), with the variables named by --in; its output, figures and the --out values "
                         "come back into this notebook (docs/compute.md)")
        parser.add_argument("--partition", required=True, metavar="P")
        parser.add_argument("--time", required=True, type=int, metavar="MIN", help="the time limit in minutes")
        parser.add_argument("--gpus", type=int, default=0, metavar="N")
        parser.add_argument("--env", metavar="NAME", help="a named environment of the cluster's profile "
                            "(default: the cluster's python3)")
        parser.add_argument("--in", dest="inputs", metavar="x,y", help="variables sent with the cell (pickled)")
        parser.add_argument("--out", dest="outs", metavar="a,b", help="variables that come back once it ends")
        parser.add_argument("--slug", metavar="S", help="a short name for the experiment")
        parser.add_argument("--goal", metavar="TEXT", help="what this run is for (recorded on its wiki page)")
        return parser

    def _run_cell(self, args: argparse.Namespace, cell: str | None) -> Any:
        # lazy: cloudpickle, the run's widgets and its card; `%load_ext` never needs them
        from ..cluster.cell_job import stage, variable_names
        from ..experiments.workspace import Workspace
        from .backend import find_workspace
        from .cell_run import CellRun
        from .widgets.calls import CallView
        from .widgets.cell_run import CellRunView
        from .widgets.progress import waiting

        if cell is None or not cell.strip():
            raise UsageError("%%betty run takes the Python to run as the cell's body (use the cell magic %%betty)")
        inputs, outs = variable_names(args.inputs, "--in"), variable_names(args.outs, "--out")
        assert self.shell is not None
        namespace = self.shell.user_ns  # only the names given with --in are read from it
        run = stage(Workspace.at(find_workspace(Path.cwd())).state, cell, namespace, inputs)
        betty = self.connection
        call = betty.start("cell_run", {"run": run.token, "partition": args.partition, "gpus": args.gpus,
                                        "time": args.time, "env": args.env, "outs": list(outs), "name": args.slug,
                                        "goal": args.goal or "a notebook cell run on the cluster"})

        if call.settle(waiting(f"checking the cell run against {self._where()}")):  # tier 2: done at once is refused
            summary = call.future.result().summary.strip()
            raise ToolError(summary.splitlines()[0] if summary else "cell_run was refused")

        def poll(token: str, job: str) -> dict[str, Any]:
            data: dict[str, Any] = self._quiet("cell_run_status", {"run": token, "job_id": job}).data
            return data

        view = CallView(call, betty.respond, lambda outcome: [CellRunView(handle)], check=betty.repreview)
        handle = CellRun(call, run, outs, namespace, poll, self._cancel_view, view)
        return handle

    @staticmethod
    def _advise_parser() -> MagicParser:
        parser = _parser("advise", "when and where a batch script would start on each partition and GPU type "
                         "(sbatch --test-only; nothing is submitted): `%betty advise FILE`, or `%%betty advise` "
                         "with the script as the cell")
        parser.add_argument("file", nargs="?", metavar="FILE", help="the batch script (default: the cell)")
        parser.add_argument("--partition", action="append", metavar="P", help="only this partition (repeatable)")
        parser.add_argument("--nodes", type=int, nargs="+", metavar="N", help="also try these node counts")
        parser.add_argument("--pending", action="store_true", help="also your pending jobs' expected starts")
        return parser

    def _advise(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .widgets.advice import ShownAdvice  # lazy: ipywidgets; `%load_ext` never needs them

        script = cell if cell is not None and cell.strip() else None
        if script is None and args.file:
            try:
                script = Path(args.file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise UsageError(f"cannot read {args.file}: {getattr(error, 'strerror', None) or error}") from None
        if script is None:
            raise UsageError("%betty advise takes a script: `%betty advise FILE`, or `%%betty advise` over the script")
        query = {"script": script, "partitions": args.partition, "nodes": args.nodes, "pending": args.pending}
        outcome = self._run("cluster_advise", query, f"asking {self._where()} when it would start")
        if isinstance(outcome, Call):
            return outcome
        return ShownAdvice(outcome.data)

    @staticmethod
    def _ask_parser() -> MagicParser:
        parser = _parser("ask", "ask Betty's agent (`%%betty ask` takes the cell as the question)")
        parser.add_argument("prompt", nargs="*", metavar="PROMPT")
        return parser

    def _ask(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .widgets.chat import ChatStream  # lazy: ipywidgets; `%load_ext` never needs it

        prompt = " ".join(args.prompt) + (("\n" + cell) if cell else "")
        if not prompt.strip():
            raise UsageError("%betty ask: ask something, e.g. `%betty ask which partition has free GPUs?`")
        betty = self.connection
        session = betty.session_id()
        chat = ChatStream(prompt.strip(), betty.respond, lambda: betty.backend.stop(session), check=betty.repreview,
                          estimate=betty.start_estimate)
        stop = betty.follow(chat.on_event)

        def until_done(event: Any) -> None:
            if event.type == "done":
                stop()

        betty.follow(until_done)
        betty.backend.ask(session, prompt.strip())
        return chat

    @staticmethod
    def _wiki_parser() -> MagicParser:
        parser = _parser("wiki", "the project's wiki: the index, a search, or one page")
        parser.add_argument("action", nargs="?", choices=["search", "show"], default=None)
        parser.add_argument("words", nargs="*", metavar="Q|PAGE")
        return parser

    def _wiki(self, args: argparse.Namespace, cell: str | None) -> Any:
        if args.action == "search":
            if not args.words:
                raise UsageError("%betty wiki search: give words to look for")
            found = self._run("wiki_search", {"query": " ".join(args.words)}, "searching the wiki")
            if isinstance(found, Call):
                return found
            print(found.summary)
            return found.data
        page = " ".join(args.words) if args.action == "show" else "index.md"
        if args.action == "show" and not args.words:
            raise UsageError("%betty wiki show: name the page, e.g. `%betty wiki show clusters/dev-cluster.md`")
        data = self._read("wiki_read", {"page": page}, f"reading wiki/{page}")
        if isinstance(data, dict):
            # A page is anyone's text: rendered here so its raw HTML stays text and its remote images stay unloaded.
            body = str(data.get("body", ""))
            display({"text/html": markdown_html(body), "text/plain": body}, raw=True)
            return None
        return data

    @staticmethod
    def _mode_parser() -> MagicParser:
        parser = _parser("mode", "what Betty's agent may do without asking: off (no tools), propose (previews only), "
                         "confirm (asks for tier 1 once, tier 2 always), auto (asks only for tier 2)")
        parser.add_argument("mode", nargs="?", choices=MODES)
        return parser

    def _mode(self, args: argparse.Namespace, cell: str | None) -> str:
        betty = self.connection
        if args.mode:
            betty.set_mode(args.mode)
        return betty.mode

    def _approvals(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .widgets.plan import card_for  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        pending = betty.backend.pending()
        if not pending:
            print("Nothing waits for your approval.")
            return []
        cards = [card_for(request, betty.respond, answered_by=betty.backend.person, check=betty.repreview)
                 for request in pending]
        for card in cards:  # each in its own output, which keeps its record once answered
            display(card)
        return cards

    @staticmethod
    def _log_parser() -> MagicParser:
        parser = _parser("log", "the actions of this notebook's Betty (from the action log), newest last")
        parser.add_argument("--limit", type=int, default=50, metavar="N", help="how many (default 50)")
        parser.add_argument("--all", action="store_true", help="every session's actions, not only this notebook's")
        return parser

    def _log(self, args: argparse.Namespace, cell: str | None) -> "pd.DataFrame":
        import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it

        betty = self.connection
        session = None if args.all else betty.session_id()
        records = betty.backend.actions(session, max(1, args.limit))
        rows = [{"time": pd.Timestamp(r.ts, unit="s"), "tool": r.tool, "tier": r.tier, "decision": r.decision.value,
                 "approver": r.approver, "ok": r.ok, "summary": (r.summary.splitlines() or [""])[0][:120],
                 "session": r.session_id} for r in records]
        return pd.DataFrame(rows, columns=["time", "tool", "tier", "decision", "approver", "ok", "summary", "session"])

