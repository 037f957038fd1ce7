"""``betty advise SCRIPT``: when and where a drafted batch script would start, each candidate placement ranked.

Nothing is submitted: Slurm is asked with ``sbatch --test-only`` once per candidate (answers kept for a
minute). ``--json`` prints the advice as one object (fields as in ``docs/advisor.md``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UsageError


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty advise``."""
    advise = commands.add_parser(
        "advise", help="when and where a batch script would start, partitions and GPU types ranked",
        description="Ask Slurm (sbatch --test-only, nothing is submitted) when SCRIPT would start on each partition "
                    "and GPU type you may use, and rank them by start, fit and cost.",
    )
    advise.add_argument("script", type=Path, metavar="SCRIPT", help="the batch script, as you would submit it")
    advise.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    advise.add_argument("--partition", action="append", default=[], metavar="NAME",
                        help="only this partition (repeatable; default: every partition sinfo shows)")
    advise.add_argument("--nodes", type=int, nargs="+", default=[], metavar="N",
                        help="also try these node counts (default: the script's own)")
    advise.add_argument("--pending", action="store_true", help="also list your pending jobs' expected starts")
    advise.add_argument("--json", action="store_true", help="one JSON object for scripts")
    advise.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the advice for ``args.script``."""
    # lazy: the Slurm client and the configuration; `betty --help` never loads them
    from ..advisor.placement import PlacementAdvisor, advise_script
    from ..cluster.sync import run_sync
    from ..cluster.text_tables import aligned
    from ..config import load_config
    from ..safe_text import terminal_line

    try:
        text = args.script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {args.script}: {getattr(error, 'strerror', None) or error}") from None
    transport = load_config().profile(args.cluster).open_transport()
    try:
        advisor = PlacementAdvisor(transport)
        advice = run_sync(advise_script(transport, text, partitions=args.partition, nodes=args.nodes, advisor=advisor))
        pending = run_sync(advisor.pending_starts()) if args.pending else None
    finally:
        run_sync(transport.close())
    if args.json:
        found = advice.as_dict()
        if pending is not None:
            found["pending"] = [{"job_id": job.job_id, "partition": job.partition, "reason": job.reason,
                                 "start": job.start.isoformat() if job.start else None} for job in pending]
        print(json.dumps(found, indent=2))
        return 0
    print(terminal_line(advice.summary()))
    print(advice.table())
    print(f"({advice.scheduler_calls} question(s) to the scheduler; answers are kept for a minute)")
    if pending is not None:
        print("your pending jobs:" if pending else "you have no pending jobs")
        body = [[terminal_line(cell) for cell in (job.job_id, job.partition, job.reason,
                                                  job.start.strftime("%Y-%m-%d %H:%M") if job.start else "unknown")]
                for job in pending]
        if body:
            print(aligned(["job", "partition", "reason", "expected start"], body))
    return 0
