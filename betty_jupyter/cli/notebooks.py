"""``betty submit-notebook``: a notebook run on a compute node with its parameters injected, or a sweep of them."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..safe_text import terminal_line

FIRST_LOOK_SECONDS = 0.5
MOST_SECONDS_BETWEEN_LOOKS = 5.0


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty submit-notebook``."""
    submit = commands.add_parser("submit-notebook", help="run a notebook on a compute node with parameters "
                                                         "injected (or a sweep of them); it comes back executed")
    submit.add_argument("notebook", type=Path, metavar="NB.ipynb", help="a notebook of the project")
    submit.add_argument("--cluster", help="cluster profile (default: the configured default)")
    submit.add_argument("--partition", required=True, help="the partition")
    submit.add_argument("--time", type=int, required=True, metavar="MIN", help="the time limit in minutes")
    submit.add_argument("--gpus", type=int, default=0, metavar="N", help="GPUs for the job (default none)")
    submit.add_argument("--env", metavar="NAME", help="one of the profile's environments (it needs nbclient and "
                                                      "ipykernel); default: the cluster's python3")
    submit.add_argument("--param", nargs="+", default=[], metavar="NAME=VALUE",
                        help="a parameter, set in a cell inserted after the cell tagged parameters")
    submit.add_argument("--grid", nargs="+", default=[], metavar="NAME=V1,V2",
                        help="a sweep: one job array running the notebook at every point")
    submit.add_argument("--goal", default="", help="what the run is for (goes into the experiment's page)")
    submit.add_argument("--slug", help="the experiment's name (default: the notebook's name)")
    submit.add_argument("--dir", type=Path, default=Path("."), help="the project that records it (default: here)")
    submit.add_argument("--no-wait", action="store_true", help="submit, then return without waiting for the "
                                                               "executed notebook")
    submit.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    submit.add_argument("--json", action="store_true", help="print JSON for scripts")
    submit.set_defaults(run=_submit_notebook)


def _submit_notebook(args: argparse.Namespace) -> int:
    """Ask (one card), submit, then wait for the job and write its executed notebook(s) into the project."""
    # lazy: the workspace, the notebook's digest and the terminal's card; only `betty submit-notebook` needs them
    from ..compute.notebook_job import file_digest
    from ..experiments.workspace import Workspace
    from .cluster import _as_person

    workspace = Workspace.at(args.dir)
    if not workspace.wiki.is_dir():
        raise UsageError(f"{args.dir.absolute()} has no wiki/ to record the run in; run `betty init` there first")
    path = args.notebook.absolute()
    if not path.is_relative_to(workspace.root.absolute()):
        raise UsageError(f"{args.notebook} is not in the project {workspace.root}; run it with --dir of its project")
    goal = args.goal.strip() or f"{args.notebook.name}" + (f" over {' '.join(args.grid)}" if args.grid else "") + \
        ", run with betty submit-notebook"
    # the digest of the notebook as read now: the card and the run refuse it if it changes in between
    tool_args = {"notebook": str(path.relative_to(workspace.root.absolute())), "sha256": file_digest(path),
                 "params": args.param,
                 "grid": args.grid, "partition": args.partition, "time": args.time, "gpus": args.gpus,
                 "env": args.env, "goal": goal, "name": args.slug}
    done = _as_person(args, workspace, "notebook_submit", tool_args, f"Run {args.notebook} on the cluster?")
    data = done.data
    if not args.json:
        print(terminal_line(f"submitted job {data['job_id']} to {data['cluster']}; recorded in {data['page']}"))
    state, written = ("", []) if args.no_wait else _wait_and_bring_back(args, workspace, data["slug"], data["job_id"])
    if args.json:
        print(json.dumps({**data, "state": state or None, "executed": written}))
    return 0


def _wait_and_bring_back(args: argparse.Namespace, workspace: Any, slug: str, job_id: str) -> tuple[str, list[str]]:
    """Wait for the job to end, then bring its executed notebook(s) back: its final state and the paths written."""
    # lazy: the ledger, the Slurm client and the tool's copying back; only a waited-for run needs them
    from ..agent.tools.notebook_job import bring_back
    from ..cluster.sync import run_sync
    from ..experiments.ledger import Ledger
    from .cluster import _with_client

    experiment = Ledger(workspace.ledger_path).get(slug).experiment  # type: ignore[union-attr]
    written: list[str] = []
    ended: list[str] = []

    def work(client: Any, profile: Any) -> int:
        wait, state = FIRST_LOOK_SECONDS, ""
        while not (job := client.job(job_id)).state.finished:
            if job.state.value != state and not args.json:
                state = job.state.value
                print(f"job {job_id}: {state}", flush=True)
            time.sleep(wait)  # a look at the queue each time, growing to every few seconds (Ctrl-C leaves it running)
            wait = min(wait * 2, MOST_SECONDS_BETWEEN_LOOKS)
        written.extend(run_sync(bring_back(client.target, workspace, experiment)))
        ended.append(job.state.value)
        if not args.json:
            print(terminal_line(f"job {job_id} ended {job.state.value}; executed notebook: "
                                f"{', '.join(written) or 'none came back (the job ended before it started)'}"))
        return 0

    _with_client(args, work)
    return ended[0], written
