"""``betty why JOBID``: why one of your pending jobs waits, and what would start it sooner."""

from __future__ import annotations

import argparse
import json

from ..safe_text import terminal_line
from .parser import Parser


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty why``."""
    why = commands.add_parser(
        "why", help="why one of your pending jobs waits, and what would start it sooner",
        description="Explain why one of your pending jobs waits: Slurm's reason in plain words, its priority "
                    "factors (sprio) against the jobs ahead of it, your fair-share (sshare), the expected start "
                    "(squeue --start), and what would change it. Every figure names the command it came from; "
                    "other users' jobs are only counted.")
    why.add_argument("job_id", metavar="JOBID", help="one of your jobs in the queue")
    why.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    why.add_argument("--json", action="store_true", help="print JSON for scripts")
    why.set_defaults(run=_why)


def _why(args: argparse.Namespace) -> int:
    # lazy: the configuration and the Slurm reads; `betty --help` never loads them
    from ..cluster.advisor.pending import why_pending
    from ..cluster.jobs import job_id
    from ..cluster.sync import run_sync
    from ..config import load_config

    ident = job_id(args.job_id)  # a bad id is refused before anything connects
    profile = load_config().profile(args.cluster)
    transport = profile.open_transport()
    try:
        explanation = run_sync(why_pending(transport, profile.policy(), ident))
    finally:
        run_sync(transport.close())
    if args.json:
        print(json.dumps(explanation.as_dict(), indent=2))
        return 0
    # Slurm's text fields (partition, QOS and account names, reasons) may carry escapes: written out, never obeyed.
    for line in explanation.lines():
        print(terminal_line(line))
    return 0
