"""``betty sweeps show|retry|cancel|next``: a recorded sweep's tasks side by side, its failed tasks run again, its end,
a search's next round."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..safe_text import terminal_line
from .parser import Parser

if TYPE_CHECKING:
    from ..cluster.profiles import ClusterProfile
    from ..experiments.ledger import Experiment
    from ..experiments.workspace import Workspace


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty sweeps``."""
    which = Parser(add_help=False)
    which.add_argument("sweep", metavar="SLUG|JOBID", help="the sweep's experiment, or its job array's id")
    which.add_argument("--dir", type=Path, default=Path("."), help="the project that recorded it (default: here)")
    sweeps = commands.add_parser("sweeps", help="recorded sweeps: compare their tasks, resubmit the failed ones, "
                                                "cancel them")
    actions = sweeps.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    show = actions.add_parser("show", parents=[which], help="every task's point, state, runtime, efficiency and "
                                                             "the metrics it printed (name=value lines)")
    show.add_argument("--json", action="store_true", help="print JSON for scripts (each metric's series too)")
    show.set_defaults(run=_show)
    retry = actions.add_parser("retry", parents=[which], help="resubmit only the failed tasks, by index (one card)")
    retry.add_argument("--tasks", metavar="N,M", help="which failed tasks (default: every failed one), e.g. 3,7")
    retry.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    retry.set_defaults(run=_retry)
    cancel = actions.add_parser("cancel", parents=[which], help="cancel every task still queued or running "
                                                                 "(one card)")
    cancel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cancel.set_defaults(run=_cancel)
    step = actions.add_parser("next", parents=[which], help="a search's next round: the points it proposes from the "
                                                            "results so far and the lagging tasks it stops (one card)")
    step.add_argument("--within-budget", action="store_true",
                      help="no card: run the round within the budget approved for later rounds (refused beyond it)")
    step.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    step.set_defaults(run=_next)


def _sweep(args: argparse.Namespace) -> tuple["Workspace", "Experiment"]:
    # lazy: the ledger (SQLite) and the workspace; only `betty sweeps` needs them
    from ..experiments.ledger import Ledger
    from ..experiments.workspace import Workspace

    workspace = Workspace.at(args.dir)
    tracked = Ledger(workspace.ledger_path).get(args.sweep) if workspace.ledger_path.exists() else None
    if tracked is None:
        raise UsageError(f"no experiment {args.sweep[:80]!r} is recorded in {workspace.root}; see "
                         "`betty experiments list`")
    if not tracked.experiment.sweep:
        raise UsageError(f"{tracked.experiment.slug} is a single job, not a sweep; see `betty experiments show`")
    args.cluster = tracked.experiment.cluster
    return workspace, tracked.experiment


def _show(args: argparse.Namespace) -> int:
    # lazy: the comparison and the Slurm client; only `betty sweeps show` needs them
    from ..cluster.sync import run_sync
    from ..cluster.text_tables import aligned
    from ..experiments.comparison import comparison_rows, read_comparison
    from .cluster import _with_client

    _, experiment = _sweep(args)

    def work(client: Any, profile: "ClusterProfile") -> int:
        comparison = run_sync(read_comparison(client.target, experiment))
        if args.json:
            print(json.dumps(comparison.to_json(), indent=2))
            return 0
        header, rows = comparison_rows(comparison)
        print(f"sweep {experiment.slug} (job array {experiment.job_id}) on {experiment.cluster}")
        print(aligned([terminal_line(cell) for cell in header], [[terminal_line(cell) for cell in row]
                                                                  for row in rows]))
        if comparison.failed():
            print(f"failed: tasks {', '.join(map(str, comparison.failed()))}; resubmit them with "
                  f"`betty sweeps retry {experiment.slug}`")
        return 0

    return _with_client(args, work)


def _retry(args: argparse.Namespace) -> int:
    # lazy: the terminal's card; only `betty sweeps retry` needs it
    from .cluster import _as_person

    workspace, experiment = _sweep(args)
    tasks = _task_list(args.tasks) if args.tasks else _failed(args, experiment)
    if not tasks:
        raise UsageError(f"no task of sweep {experiment.slug} has failed; nothing to resubmit")
    done = _as_person(args, workspace, "sweep_retry", {"experiment": experiment.slug, "tasks": tasks},
                      f"Resubmit tasks {', '.join(map(str, tasks))} of sweep {experiment.slug}?")
    print(terminal_line(done.summary))
    return 0


def _cancel(args: argparse.Namespace) -> int:
    # lazy: the terminal's card; only `betty sweeps cancel` needs it
    from .cluster import _as_person

    workspace, experiment = _sweep(args)
    done = _as_person(args, workspace, "sweep_cancel", {"experiment": experiment.slug},
                      f"Cancel sweep {experiment.slug}?")
    print(terminal_line(done.summary))
    return 0


def _next(args: argparse.Namespace) -> int:
    # lazy: the terminal's card; only `betty sweeps next` needs it
    from .cluster import _as_person

    workspace, experiment = _sweep(args)
    done = _as_person(args, workspace, "sweep_round",
                      {"experiment": experiment.slug, "within_budget": args.within_budget},
                      f"Run this round of sweep {experiment.slug}?")
    print(terminal_line(done.summary))
    return 0


def _task_list(text: str) -> list[int]:
    """``3,7`` → [3, 7]; a one-line UsageError for anything else."""
    words = [word.strip() for word in text.split(",")]
    if not all(word.isascii() and word.isdigit() for word in words):
        raise UsageError(f"--tasks {text[:40]!r}: give task indices separated by commas, e.g. --tasks 3,7")
    return [int(word) for word in words]


def _failed(args: argparse.Namespace, experiment: "Experiment") -> list[int]:
    """The tasks of ``experiment`` whose latest attempt failed, read now (one sacct, no log)."""
    # lazy: the comparison and the Slurm client; only `betty sweeps retry` needs them
    from ..cluster.sync import run_sync
    from ..experiments.comparison import FAILED_TASK_STATES, task_states
    from ..experiments.sweep_page import array_ids
    from .cluster import _with_client

    found: list[int] = []

    def work(client: Any, profile: "ClusterProfile") -> int:
        snapshot = run_sync(client.target.snapshot(array_ids(experiment)))
        found.extend(sorted(i for i, state in task_states(experiment, snapshot).items() if state in FAILED_TASK_STATES))
        return 0

    _with_client(args, work)
    return found
