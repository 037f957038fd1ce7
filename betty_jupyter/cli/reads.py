"""``betty jobs|partitions|history|overview|why|efficiency|status|logs``: the reads of :mod:`..read_commands`.

Each read is its tool, called as the person at this terminal (:func:`..agent.person.call_as_person`): the
person's rules apply and the call is a line of the action log, with the person as its approver. The
action log is the project's that holds the current directory (the nearest folder with ``wiki/index.md``
or ``.betty/``, as a notebook finds its project).
Outside any project it is the person's own, in ``$XDG_STATE_HOME/betty`` (``~/.local/state/betty``); ``--dir``
names another, as for ``betty cancel``. This module only formats what the tool returns; the options come from
the table, derived from the tool.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from ..cluster import tables
from ..errors import UsageError
from ..read_commands import ME, READS, ReadCommand, add_tool_options, check, tool_args
from ..safe_text import terminal_line


def add_face_options(parser: argparse.ArgumentParser, command: ReadCommand) -> None:
    """The options only the terminal has: ``--cluster``, ``--json`` and ``--dir`` on every read, ``--plot`` on
    efficiency."""
    parser.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("--dir", type=Path, metavar="DIR", help="the project whose action log records the read "
                        "(default: the project holding this directory, else your own log in ~/.local/state/betty)")
    if command.name == "efficiency":
        parser.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the figures into this picture")
    if command.name == "why":
        parser.add_argument("--resubmit", action="store_true",
                            help="resubmit the job where sbatch --test-only says it starts sooner: its card (the "
                                 "recorded script with only that change) is asked y/N here; the job stays queued")


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add every read of the table, with its help only (its tool's options come when it is used)."""
    for command in READS:
        name, *others = command.cli
        parser = commands.add_parser(name, aliases=others, help=command.help,
                                     description=command.description or command.help)
        parser.options_later = lambda parser, command=command: add_tool_options(parser, command)
        add_face_options(parser, command)
        parser.set_defaults(run=run, read_name=command.name)


def run(args: argparse.Namespace) -> int:
    """Call the read's tool as the person, then print what it returned."""
    command = next(read for read in READS if read.name == args.read_name)
    plot = getattr(args, "plot", None)
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--plot: {plot.name!r} is not a .png, .svg or .pdf file name")
    values = tool_args(command, args)
    check(command, values)  # a bad job id is refused before anything runs on the cluster
    outcome = read_as_person(args, command, values)
    PRINTERS.get(command.name, _plain)(args, outcome)
    return 0


def read_as_person(args: argparse.Namespace, command: ReadCommand, values: dict[str, Any]) -> Any:
    """``command``'s tool run as the person here, in the action log of the project holding this directory."""
    # lazy: the agent and the workspace; only a read that runs needs them
    from ..experiments.workspace import Workspace
    from .cluster import call_as_person_here

    if values.get("user") == ME:
        values["user"] = _whoami(args.cluster)
    workspace = Workspace.at(args.dir if args.dir is not None else read_log_home())
    return call_as_person_here(args, workspace, command.tool, values, f"Run betty {args.command}?", assume_yes=False)


def open_cluster_early(words: Sequence[str]) -> None:
    """Start logging in to the cluster the read ``words`` name (``--cluster``, else the default one), in the
    background while Betty loads the rest of the read (the tool, the person's rules, the action log) and checks its
    arguments: the login overlaps the loading, and the read finds its link open.

    Nothing runs on the cluster before the person's rules allowed the read, and a login that would ask the person
    something waits for the read itself (:meth:`~betty_jupyter.transport.remote_shell.ShellPool.open_early`). Any
    trouble here (an unknown cluster, a profile that cannot be used) is left for the read to meet and report."""
    # Only these load before the login starts: the rest of Betty loads while the login waits on the cluster.
    # lazy: the configuration, the shared cluster and its transport; only a read that runs needs them
    from ..cluster.shared import shared_cluster
    from ..config import load_config

    named = [word.split("=", 1)[1] for word in words if word.startswith("--cluster=")]
    named += [after for word, after in zip(words, words[1:]) if word == "--cluster"]
    try:
        shared_cluster(load_config().profile(named[-1] if named else None)).open_early()
    except Exception:  # the read meets it again and reports it as it always has; starting early changes nothing
        pass


def read_log_home() -> Path:
    """Where a read is recorded without ``--dir``: the project holding this directory, else the person's own log."""
    from ..experiments.workspace import project_holding  # lazy: only a read that runs needs it

    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return project_holding(Path.cwd()) or state / "betty"


def _whoami(cluster: str | None) -> str:
    """The person's login name on the cluster (``betty jobs --me``), over the link the read then uses."""
    # lazy: the shared cluster and the configuration; only --me needs them
    from ..cluster.shared import shared_cluster
    from ..cluster.sync import run_sync
    from .cluster import _config

    user = run_sync(shared_cluster(_config().profile(cluster)).user())
    if user is None:
        raise UsageError("the cluster did not say your login name (`id -un`); give it with --user NAME")
    return user


# ----- how each read prints ---------------------------------------------------------------------------------------
def _frame(columns: str, empty: str) -> Callable[[argparse.Namespace, Any], None]:
    def show(args: argparse.Namespace, outcome: Any) -> None:
        read = getattr(outcome, "table", None)
        if read is not None and not args.json:  # a text table from plain rows: no pandas loaded
            from ..cluster.text_tables import rows_table  # lazy: only a read that prints a table needs it

            print(rows_table(read.rows, getattr(tables, columns)) if read.rows else empty)
            return
        from .output import print_table  # lazy: pandas; only a read that prints a table needs it

        print_table(outcome.data, getattr(tables, columns), args.json, empty)

    return show


def _overview(args: argparse.Namespace, outcome: Any) -> None:
    # lazy: the overview's table and the configuration; only `betty overview` needs them
    from ..advisor.overview import overview_table, waits_line
    from .cluster import _config

    overview, name = outcome.data, _config().profile(args.cluster).name
    if args.json:
        print(json.dumps({"cluster": name, **overview}, indent=2))
        return
    print(f"{name} at {overview['read_at']} (the cluster's clock)")
    print(overview_table(overview))
    print(f"expected waits: {waits_line(overview)}")


def _why(args: argparse.Namespace, outcome: Any) -> None:
    sooner = outcome.data.get("sooner") or {}
    if args.json:
        print(json.dumps(outcome.data, indent=2))
    else:
        # Slurm's text fields (partition, QOS and account names, reasons) may carry escapes: written out, never obeyed.
        for line in outcome.data.get("lines") or outcome.summary.splitlines():
            print(terminal_line(str(line)))
    if not args.resubmit:
        if sooner.get("resubmit") and not args.json:
            change = terminal_line(sooner["change"])
            print(f"`betty why {outcome.data['job_id']} --resubmit` resubmits it with {change} (a card to approve).")
        return
    if not sooner:
        raise UsageError(f"--resubmit: sbatch --test-only names no placement where job {outcome.data['job_id']} "
                         "starts sooner; nothing to resubmit")
    if not sooner.get("resubmit"):
        raise UsageError(f"--resubmit: Betty did not submit job {outcome.data['job_id']}, so it has no script to "
                         f"resubmit; submit it again with {terminal_line(sooner['change'])}")
    # lazy: the workspace and the person's call; only --resubmit needs them
    from ..experiments.workspace import Workspace
    from .cluster import call_as_person_here

    workspace = Workspace.at(args.dir if args.dir is not None else read_log_home())
    submitted = call_as_person_here(args, workspace, "cluster_submit", sooner["resubmit"],
                                    f"Resubmit job {outcome.data['job_id']} with {sooner['change']}?", assume_yes=False)
    print(terminal_line(submitted.summary.splitlines()[0]))


def _efficiency(args: argparse.Namespace, outcome: Any) -> None:
    jobs = outcome.data["jobs"]
    if args.json:
        print(json.dumps(jobs, indent=2))
    else:
        print(outcome.summary)
    if args.plot is not None:
        # lazy: matplotlib, only for --plot
        from ..cluster.job_efficiency import JobEfficiency
        from ..advisor.efficiency_plot import efficiency_figure

        names = [item.name for item in fields(JobEfficiency)]
        efficiency_figure([JobEfficiency(**{name: job[name] for name in names}) for job in jobs]).savefig(args.plot)
        if not args.json:
            print(f"picture written to {args.plot}")


def _status(args: argparse.Namespace, outcome: Any) -> None:
    if args.json:
        print(json.dumps(asdict(outcome.data), indent=2, default=lambda value: getattr(value, "value", str(value))))
    else:
        print(terminal_line(outcome.summary))


def _logs(args: argparse.Namespace, outcome: Any) -> None:
    if args.json:
        print(json.dumps({"text": outcome.full}))
    else:
        sys.stdout.write(outcome.full)


def _plain(args: argparse.Namespace, outcome: Any) -> None:
    """A read without a printer of its own: its data as JSON, or its text line by line, written out."""
    if args.json:
        data = outcome.data
        if hasattr(data, "to_dict"):  # a DataFrame
            from .output import records  # lazy: pandas; only a table read as JSON needs it

            data = records(data)
        print(json.dumps(data, indent=2, default=str))
        return
    for line in (outcome.full or outcome.summary).splitlines():
        print(terminal_line(line))


PRINTERS: dict[str, Callable[[argparse.Namespace, Any], None]] = {
    "queue": _frame("QUEUE_COLUMNS", "no jobs in the queue"),
    "partitions": _frame("PARTITION_COLUMNS", "the cluster reports no partitions"),
    "history": _frame("HISTORY_COLUMNS", "no jobs in that window"),
    "overview": _overview, "why": _why, "efficiency": _efficiency, "status": _status, "logs": _logs,
}
"""How each read is printed (the faces format; the tools decide); a read not named here is printed plainly."""
