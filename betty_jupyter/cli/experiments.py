"""``betty experiments list|show|repair`` and ``betty watch``: the records every submission leaves."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..safe_text import terminal_line
from .parser import Parser

if TYPE_CHECKING:
    from ..experiments.workspace import Workspace
    from ..experiments.watcher import JobUpdate, JobWatcher

FIRST_CHECK = 2.0
"""Seconds to the first check after a submission or a change; the checks after it double up to ``--interval``."""


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty experiments`` and ``betty watch``."""
    where = Parser(add_help=False)
    where.add_argument("--dir", type=Path, default=Path("."), help="the project directory (default: here)")
    experiments = commands.add_parser("experiments", help="the experiments recorded in this project")
    actions = experiments.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    listing = actions.add_parser("list", parents=[where], help="every recorded experiment and its last known state")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    listing.set_defaults(run=_list)
    show = actions.add_parser("show", parents=[where], help="one experiment's record (by slug or job id)")
    show.add_argument("experiment", metavar="SLUG|JOBID")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    show.set_defaults(run=_show)
    repair = actions.add_parser(
        "repair", parents=[where], help="rebuild missing pages and notebooks, and bring stale notebook statuses "
                                        "up to the job's last state (exit 1 when one is open in JupyterLab)")
    repair.set_defaults(run=_repair)

    watch = commands.add_parser(
        "watch", parents=[where], help="keep experiment pages current as jobs run (foreground)",
        description="Keep experiment pages and notebooks current as their jobs run. A job's end is noticed within "
                    "--interval seconds; after a submission or a change the checks come faster "
                    f"({FIRST_CHECK:g} s, {FIRST_CHECK * 2:g} s, {FIRST_CHECK * 4:g} s … up to --interval).")
    watch.add_argument("--once", action="store_true", help="check once, print a line per job that changed, and exit")
    watch.add_argument("--interval", type=float, default=60.0, metavar="SECONDS",
                       help="the longest wait between checks: a job's end is noticed within it (default 60)")
    watch.add_argument("--json", action="store_true",
                       help="print each change as JSON (with --once: one array, [] when nothing changed)")
    watch.add_argument("--lease", type=float, default=60.0,
                       help="seconds a job stays this watcher's after its last heartbeat (default 60)")
    watch.set_defaults(run=_watch)


def _workspace(args: argparse.Namespace) -> "Workspace":
    # lazy: the workspace; only `betty experiments` and `betty watch` need it
    from ..experiments.workspace import Workspace

    workspace = Workspace.at(args.dir)
    if not workspace.ledger_path.exists():
        raise UsageError(f"no experiments are recorded in {workspace.root}; submit with `betty submit` there first")
    return workspace


def _list(args: argparse.Namespace) -> int:
    from ..experiments.ledger import Ledger  # lazy: the ledger (SQLite); only `betty experiments` needs it

    tracked = Ledger(_workspace(args).ledger_path).all()
    if args.json:
        print(json.dumps([{"slug": t.experiment.slug, "job_id": t.experiment.job_id, "cluster": t.experiment.cluster,
                           "state": t.state, "page": t.experiment.page, "notebook": t.experiment.notebook}
                          for t in tracked], indent=2))
        return 0
    for t in tracked:
        print(f"{t.experiment.slug:<40} job {t.experiment.job_id:<8} {t.experiment.cluster:<12} {t.state}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..experiments.ledger import Ledger  # lazy: the ledger (SQLite); only `betty experiments` needs it

    tracked = Ledger(_workspace(args).ledger_path).get(args.experiment)
    if tracked is None:
        raise UsageError(f"no experiment {args.experiment!r} here; see `betty experiments list`")
    record = {**asdict(tracked.experiment), "state": tracked.state, "page": tracked.experiment.page,
              "notebook": tracked.experiment.notebook}
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    for key in ("slug", "job_id", "cluster", "state", "submitted", "partition", "goal", "page", "notebook", "script_path"):
        value = "" if record[key] is None else str(record[key]).strip().replace("\n", "\n" + " " * 13)
        print(f"{key:<12} {value}")
    return 0


def _repair(args: argparse.Namespace) -> int:
    from ..experiments.record import repair  # lazy: nbformat is heavy; only `betty experiments repair` needs it
    from ..experiments.status_cell import Outcome, repair_status  # lazy: as above

    workspace = _workspace(args)
    repaired = repair(workspace)
    for job, files in repaired.items():
        print(f"job {job}: wrote {', '.join(files)}")
    checks = repair_status(workspace)
    for check in checks:
        print(terminal_line(check.line()))
    if not repaired and not checks:
        print("every recorded experiment has its page and notebook, and each notebook shows its job's last state")
    return 1 if any(check.outcome is Outcome.OPEN for check in checks) else 0


async def _watch_until_stopped(watcher: "JobWatcher") -> None:
    """Run ``watcher`` until Ctrl-C or SIGTERM, which end it between two checks, telling the person's notification
    targets of each job that ends (``docs/notifications.md``).

    The signals set the watcher's stop event rather than cancel its task: a cancellation that
    meets a finishing wait can be lost (``asyncio.wait_for`` before Python 3.12), and the
    watcher would go on.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # lazy: the configuration and the mail and HTTP clients; only a watch that runs on needs them
    from ..config import load_config
    from ..experiments.notify.outbox import notify_ends

    await asyncio.gather(watcher.run(stop), notify_ends(watcher, load_config().notify, stop))


def _watch(args: argparse.Namespace) -> int:
    from ..experiments.watcher import watcher_for_config  # lazy: nbformat and traitlets; only `betty watch` needs them

    if args.interval <= 0:
        raise UsageError(f"--interval must be more than 0 seconds, not {args.interval:g}")
    watcher, close = watcher_for_config(_workspace(args), min_interval=min(FIRST_CHECK, args.interval),
                                        max_interval=args.interval, lease_seconds=args.lease)
    if not args.once:
        watcher.subscribe(lambda update: _print_update(update, args.json))
        watcher.subscribe_written(lambda check: print(json.dumps(check.record()) if args.json
                                                      else terminal_line(check.line()), flush=True))
    try:
        if args.once:
            _watch_once(watcher, args.json)
        else:
            print(f"watching experiments in {watcher.workspace.root} (Ctrl-C to stop)", file=sys.stderr)
            asyncio.run(_watch_until_stopped(watcher))
    finally:
        watcher.ledger.release(watcher.owner)
        close()
    return 0


def _watch_once(watcher: "JobWatcher", as_json: bool) -> None:
    """One check: a line per job that changed and per notebook whose status was (or could not be) brought up to date."""
    updates = asyncio.run(watcher.tick())
    changed = {update.experiment.slug for update in updates}
    checks = [check for check in watcher.catch_up() if check.experiment.slug not in changed]
    if as_json:
        print(json.dumps([update.record() for update in updates] + [check.record() for check in checks], indent=2))
        return
    for update in updates:
        _print_update(update, as_json=False)
    for check in checks:
        print(terminal_line(check.line()), flush=True)
    if not updates and not checks:
        print("nothing changed")


def _print_update(update: "JobUpdate", as_json: bool) -> None:
    print(json.dumps(update.record()) if as_json else terminal_line(update.line()), flush=True)
