"""``betty efficiency``: how much of what they asked for the person's recent jobs used, as a table and a picture."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .parser import Parser

if TYPE_CHECKING:
    from ..cluster.profiles import ClusterProfile


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty efficiency``."""
    efficiency = commands.add_parser(
        "efficiency", help="CPU, memory, time and GPUs used vs requested, for your finished jobs",
        description="What your finished jobs used of what they asked for, as seff reports it: CPU efficiency "
                    "(TotalCPU / (Elapsed x AllocCPUS)), peak memory (MaxRSS) against the request, elapsed time "
                    "against the limit, and GPUs. One sacct call for all of them.")
    efficiency.add_argument("job_ids", nargs="*", metavar="JOBID", help="these jobs only (default: the window)")
    efficiency.add_argument("--since", default="7d",
                            help="jobs started since: a span (7d, 12h, 30m) or a date (2026-11-20); default 7d")
    efficiency.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    efficiency.add_argument("--json", action="store_true", help="print JSON for scripts")
    efficiency.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the figures into this picture")
    efficiency.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the jobs' accounting once and print the table (or JSON); draw the picture when asked."""
    # lazy: the Slurm client and the advisor; `betty --help` loads neither
    from ..cluster.advisor.efficiency import efficiency_table, since_start
    from .cluster import _with_client

    since = None if args.job_ids else since_start(args.since)
    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--plot: {args.plot.name!r} is not a .png, .svg or .pdf file name")

    def work(client: Any, profile: "ClusterProfile") -> int:
        jobs = client.efficiency(args.job_ids or None, since)
        if args.json:
            print(json.dumps([job.as_dict() for job in jobs], indent=2))
        else:
            print(efficiency_table(jobs) if jobs else "no finished jobs in that window")
        if args.plot is not None:
            from ..cluster.advisor.efficiency_plot import efficiency_figure  # lazy: matplotlib, only for --plot

            efficiency_figure(jobs).savefig(args.plot)
            if not args.json:
                print(f"picture written to {args.plot}")
        return 0

    return _with_client(args, work)
