"""``%%betty submit|sweep|run`` and ``%betty advise``: a cell sent to the cluster, or asked about first."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ...errors import ToolError, UsageError
from ...experiments.search_options import add_search_options, search_fields
from ...experiments.submit_options import add_run_options, run_fields
from ..session import Call
from .jobs import JobCommands
from .parsing import MagicParser, parser

if TYPE_CHECKING:
    from datetime import datetime

    from ...agent.models import ToolOutcome


class SubmitCommands(JobCommands):
    """Cells that become jobs (after the person's approval), and advice on where a script would start."""

    def submit_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module."""
        return {"submit": (self._submit_parser, self._submit), "sweep": (self._sweep_parser, self._sweep),
                "run": (self._run_parser, self._run_cell), "advise": (self._advise_parser, self._advise),
                "kernel": (self._kernel_parser, self._kernel),
                "pipeline": (self._pipeline_parser, self._pipeline)}

    @staticmethod
    def _submit_parser() -> MagicParser:
        made = parser("submit", "%%betty submit: the cell is the batch script; Betty shows it for your "
                         "approval, submits it once and records it as an experiment (wiki page + notebook)")
        made.add_argument("--slug", metavar="S", help="a short name for the experiment (default: the job name)")
        made.add_argument("--goal", metavar="TEXT", help="what this run is for (recorded on its wiki page)")
        add_run_options(made)
        made.add_argument("--gpu-estimate", metavar="NAME",
                          help="the variable holding this job's estimate (`est = %%betty gpu …`): shown and recorded")
        return made

    def _submit(self, args: argparse.Namespace, cell: str | None) -> Any:
        goal = args.goal or "submitted from a notebook"
        asked: dict[str, Any] = {"goal": goal, "name": args.slug}
        asked.update(run_fields(args))
        if args.gpu_estimate is not None:
            asked["gpu_estimate"] = self._named_estimate(args.gpu_estimate)
        return self._submit_cell("submit", "cluster_submit", cell, asked)

    def _named_estimate(self, name: str) -> dict[str, Any]:
        """The estimate held by the notebook variable ``name`` (``%betty gpu``'s result), as a submission records it."""
        value = self.shell.user_ns.get(name) if name.isidentifier() else None  # only the one name given is read
        as_dict = getattr(value, "as_dict", None)
        if value is None or not callable(as_dict) or not hasattr(value, "peak_gib"):
            raise UsageError(f"--gpu-estimate {name}: no estimate in that variable; keep one with "
                             f"`{name if name.isidentifier() else 'est'} = %betty gpu --model … --method …`")
        data = as_dict()
        return data if isinstance(data, dict) else {}

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
    def _pipeline_parser() -> MagicParser:
        made = parser("pipeline", "%%betty pipeline: the cell holds every step's batch script, each under a line "
                         "'# ==== step NAME ====' or '# ==== step NAME (after A, B) ===='; each step runs once the "
                         "steps it needs (default: the one before) succeeded; more clauses, '; '-separated: "
                         "'aftercorr A' (an array after an array, task by task), 'singleton', 'outputs PATH, PATH' "
                         "(checked when the step ends); one approval, one experiment")
        made.add_argument("--slug", metavar="S", help="a short name for the experiment (default: the first job name)")
        made.add_argument("--goal", metavar="TEXT", help="what the pipeline is for (recorded on its wiki page)")
        return made

    def _pipeline(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ...cluster.pipeline import steps_from_text  # lazy: only `%%betty pipeline` reads steps

        if cell is None or not cell.strip():
            raise UsageError("%%betty pipeline takes the steps' scripts as the cell's body (use the cell magic "
                             "%%betty)")
        steps = steps_from_text(cell)
        goal = args.goal or " → ".join(step["name"] for step in steps) + ", from a notebook"

        def follow_job(outcome: "ToolOutcome") -> list[Any]:
            return [self._live_view(self._quiet("cluster_status", {"job_id": outcome.data.job_id}).data)]

        return self._run("cluster_pipeline", {"steps": steps, "goal": goal, "name": args.slug},
                         f"checking the steps against {self._where()}", follow_job)

    @staticmethod
    def _sweep_parser() -> MagicParser:
        made = parser("sweep", "%%betty sweep --grid lr=1e-4,3e-4 seed=0,1: the cell is the batch script, run at "
                         "every point of the grid as one job array; one approval, one experiment. "
                         "%betty sweep SLUG: the sweep's tasks compared, with plots")
        made.add_argument("experiment", nargs="?", metavar="SLUG|JOBID", help="a recorded sweep to compare")
        made.add_argument("--grid", nargs="+", metavar="NAME=V1,V2",
                            help="each parameter and its values; the script reads them as $NAME")
        made.add_argument("--at-once", type=int, metavar="N", help="at most N tasks running at a time")
        made.add_argument("--slug", metavar="S", help="a short name for the experiment (default: the job name)")
        made.add_argument("--goal", metavar="TEXT", help="what this sweep is for (recorded on its wiki page)")
        add_search_options(made)
        return made

    def _sweep(self, args: argparse.Namespace, cell: str | None) -> Any:
        if cell is None:
            return self._compare_sweep(args.experiment)
        if not args.grid:
            raise UsageError("%%betty sweep needs --grid NAME=V1,V2 … (e.g. --grid lr=1e-4,3e-4 seed=0,1)")
        goal = args.goal or f"a sweep over {' '.join(args.grid)}, from a notebook"
        return self._submit_cell("sweep", "cluster_sweep", cell,
                                 {"grid": args.grid, "at_once": args.at_once, "goal": goal, "name": args.slug,
                                  **search_fields(args)})

    def _compare_sweep(self, experiment: str | None) -> Any:
        """``%betty sweep SLUG``: every task of a recorded sweep side by side, with plots."""
        from ..sweep import SweepView  # lazy: the comparison's table and plots; only `%betty sweep SLUG` needs them

        if not experiment:
            raise UsageError("%betty sweep SLUG compares a recorded sweep's tasks; %%betty sweep --grid … runs one")
        data = self._read("sweep_compare", {"experiment": experiment}, f"reading sweep {experiment}'s tasks")
        return data if isinstance(data, Call) else SweepView(data)

    @staticmethod
    def _run_parser() -> MagicParser:
        made = parser("run", "%%betty run: the cell's Python runs on the cluster as a batch job (after your "
                         "approval), with the variables named by --in; its output, figures and the --out values "
                         "come back into this notebook (docs/compute.md)")
        made.add_argument("--partition", required=True, metavar="P")
        made.add_argument("--time", required=True, type=int, metavar="MIN", help="the time limit in minutes")
        made.add_argument("--gpus", type=int, default=0, metavar="N")
        made.add_argument("--env", metavar="NAME", help="a named environment of the cluster's profile "
                            "(default: the cluster's python3)")
        made.add_argument("--in", dest="inputs", metavar="x,y", help="variables sent with the cell (pickled)")
        made.add_argument("--out", dest="outs", metavar="a,b", help="variables that come back once it ends")
        made.add_argument("--slug", metavar="S", help="a short name for the experiment")
        made.add_argument("--goal", metavar="TEXT", help="what this run is for (recorded on its wiki page)")
        made.add_argument("--segments", type=int, metavar="N", help="run longer than --time: up to N jobs one "
                          "after another, the cell told to checkpoint (SIGUSR1) before each limit and run again from "
                          "the top in the next (docs/long-runs.md)")
        made.add_argument("--checkpoint-seconds", type=int, metavar="S", help="with --segments: how long before "
                          "each limit the cell is told to checkpoint (default 120)")
        return made

    def _run_cell(self, args: argparse.Namespace, cell: str | None) -> Any:
        # lazy: cloudpickle, the run's widgets and its card; `%load_ext` never needs them
        from ...compute.cell_job import stage, variable_names
        from ...experiments.workspace import Workspace
        from ..cell_run import CellRun
        from ..widgets.calls import CallView
        from ..widgets.cell_run import CellRunView
        from ..widgets.progress import waiting

        if cell is None or not cell.strip():
            raise UsageError("%%betty run takes the Python to run as the cell's body (use the cell magic %%betty)")
        inputs, outs = variable_names(args.inputs, "--in"), variable_names(args.outs, "--out")
        assert self.shell is not None
        namespace = self.shell.user_ns  # only the names given with --in are read from it
        betty = self.connection
        run = stage(Workspace.at(_staging_project(betty.backend.project())).state, cell, namespace, inputs)
        call = betty.start("cell_run", {"run": run.token, "partition": args.partition, "gpus": args.gpus,
                                        "time": args.time, "env": args.env, "outs": list(outs), "name": args.slug,
                                        "goal": args.goal or "a notebook cell run on the cluster",
                                        **_chain_args(args)})

        if call.settle(waiting(f"checking the cell run against {self._where()}")):  # tier 2: done at once is refused
            summary = call.future.result().summary.strip()
            raise ToolError(summary.splitlines()[0] if summary else "the run of the cell was refused")

        def poll(token: str, job: str) -> dict[str, Any]:
            data: dict[str, Any] = self._quiet("cell_run_status", {"run": token, "job_id": job}).data
            return data

        view = CallView(call, betty.respond, lambda outcome: [CellRunView(handle)], check=betty.repreview)
        handle = CellRun(call, run, outs, namespace, poll, self._cancel_view, view)
        return handle

    @staticmethod
    def _kernel_parser() -> MagicParser:
        from ...compute.node_kernel import DEFAULT_WARN_MINUTES  # lazy: with the node kernel; `%load_ext` never needs it

        made = parser("kernel", "%betty kernel: the next cells run in a kernel inside an allocation on a compute "
                         "node (after your approval); --back runs them here again, --stop ends the allocation "
                         "(docs/node-kernel.md)")
        made.add_argument("--partition", metavar="P")
        made.add_argument("--time", type=int, metavar="MIN", help="the time limit in minutes")
        made.add_argument("--gpus", type=int, default=0, metavar="N")
        made.add_argument("--env", metavar="NAME", help="a named environment of the cluster's profile "
                            "(default: the cluster's python3; it needs ipykernel)")
        made.add_argument("--grace", type=int, default=10, metavar="MIN",
                          help="minutes the kernel waits for this notebook after a dropped link (default 10)")
        made.add_argument("--warn", type=int, default=DEFAULT_WARN_MINUTES, metavar="MIN",
                          help=f"warn this many minutes before the allocation ends (default {DEFAULT_WARN_MINUTES})")
        made.add_argument("--slug", metavar="S", help="a short name for the experiment")
        for flag, what in (("--back", "run the next cells here again (the node's kernel keeps its state)"),
                           ("--here", "run the next cells on the node again"),
                           ("--reattach", "connect again after a dropped link"),
                           ("--stop", "cells run here again and the allocation is cancelled")):
            made.add_argument(flag, action="store_true", help=what)
        return made

    def _kernel(self, args: argparse.Namespace, cell: str | None) -> Any:
        # lazy: jupyter_client, the card and its view; `%load_ext` never needs them
        from ...compute.node_kernel import stage
        from ...config import load_config
        from ...experiments.ledger import Ledger
        from ...experiments.node_cells import note_cell
        from ...experiments.workspace import Workspace
        from ..node_kernel import NodeKernelHandle, latest
        from ..widgets.calls import CallView
        from ..widgets.progress import waiting

        handle = latest()
        for flag, act in (("stop", "stop"), ("back", "back"), ("here", "here"), ("reattach", "reattach")):
            if getattr(args, flag):
                if handle is None:
                    raise UsageError("this notebook started no node kernel; `%betty kernel --partition P --time MIN`")
                getattr(handle, act)()
                return handle
        if args.partition is None or args.time is None:
            if handle is not None:
                return handle
            raise UsageError("%betty kernel needs --partition P and --time MIN to start a kernel on a node")
        assert self.shell is not None
        betty = self.connection
        workspace = Workspace.at(_staging_project(betty.backend.project()))
        state = workspace.state
        token = stage(state)
        _note_notebook_kernel(state, token)
        cluster = betty.cluster
        call = betty.start("node_kernel", {"kernel": token, "partition": args.partition, "gpus": args.gpus,
                                           "time": args.time, "env": args.env, "grace": args.grace,
                                           "name": args.slug})
        if call.settle(waiting(f"checking the allocation against {self._where()}")):  # tier 2: done at once is refused
            summary = call.future.result().summary.strip()
            raise ToolError(summary.splitlines()[0] if summary else "the node kernel was refused")

        def poll(kernel: str, job: str) -> dict[str, Any]:
            data: dict[str, Any] = self._quiet("node_kernel_status", {"kernel": kernel, "job_id": job}).data
            return data

        def stop(kernel: str, job: str) -> Any:
            return self._quiet("node_kernel_stop", {"kernel": kernel, "job_id": job})

        def transport() -> Any:
            """The connection to the cluster Betty already holds: the Jupyter server's (it forwards the kernel's
            ports), else this process's link (Betty's own, when Betty runs in this kernel). So there is no second
            login, and a dropped link is made again."""
            # lazy: the Slurm client and the backend; only a node kernel's forwards need them
            from ...cluster.shared import shared_cluster
            from ...compute.node_kernel import ForwardedBy
            from ..backend import ServerBackend

            backend = betty.backend
            if isinstance(backend, ServerBackend):
                return ForwardedBy(lambda: backend.node_kernel_forwards(token),
                                   lambda: backend.release_node_kernel_forwards(token))
            held = getattr(backend, "assistant", None)
            config = held.config if held is not None else load_config()
            return shared_cluster(config.profile(cluster)).link

        ledger = Ledger(workspace.ledger_path)

        def note(slug: str, code: str, started: datetime, seconds: float, ok: bool) -> None:
            note_cell(ledger, slug, code, started, seconds, ok)

        view = CallView(call, betty.respond, None, check=betty.repreview)
        return NodeKernelHandle(call, token, state, poll, stop, transport, self.shell, view, note=note,
                                warn=args.warn)

    @staticmethod
    def _advise_parser() -> MagicParser:
        made = parser("advise", "when and where a batch script would start on each partition and GPU type "
                         "(sbatch --test-only; nothing is submitted): `%betty advise FILE`, or `%%betty advise` "
                         "with the script as the cell")
        made.add_argument("file", nargs="?", metavar="FILE", help="the batch script (default: the cell)")
        made.add_argument("--partition", action="append", metavar="P", help="only this partition (repeatable)")
        made.add_argument("--nodes", type=int, nargs="+", metavar="N", help="also try these node counts")
        made.add_argument("--pending", action="store_true", help="also your pending jobs' expected starts")
        return made

    def _advise(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..widgets.advice import ShownAdvice  # lazy: ipywidgets; `%load_ext` never needs them

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


def _chain_args(args: argparse.Namespace) -> dict[str, Any]:
    """``segments`` and ``checkpoint_seconds`` of a ``%%betty run`` that asked for a chain; none otherwise."""
    chain: dict[str, Any] = {"segments": args.segments} if args.segments is not None else {}
    if args.checkpoint_seconds is not None:
        chain["checkpoint_seconds"] = args.checkpoint_seconds
    return chain


def _note_notebook_kernel(state: Path, token: str) -> None:
    """Note this notebook's Jupyter kernel beside the node kernel ``token`` (the status bar finds it by that id)."""
    # lazy: ipykernel and the node kernel's files; only `%betty kernel` needs them
    from ipykernel.connect import get_connection_file
    from ...compute.node_kernel import note_notebook_kernel

    try:
        note_notebook_kernel(state, token, get_connection_file())
    except (RuntimeError, OSError, UsageError):
        pass  # not a kernel Jupyter started: the status bar does not show this one


def _staging_project(served: Path | None) -> Path:
    """Where a cell run is staged: the project Betty works in (a Jupyter server's, whatever folder the notebook is
    in), else the project holding the notebook's folder; a one-line UsageError when that folder is out of reach."""
    from ...experiments.workspace import find_workspace  # lazy: with the cell run

    if served is None:
        return find_workspace(Path.cwd())
    if not served.is_dir():
        raise UsageError(f"Betty works in project {served}, which this kernel cannot reach (a server on another "
                         "machine?); %%betty run stages the cell in that project, so run the notebook where it can")
    return served
