"""``betty overview``: what the cluster is doing now, as a text table (or JSON)."""

from __future__ import annotations

import argparse
import json


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty overview``."""
    overview = commands.add_parser(
        "overview", help="what the cluster is doing: partitions by state, the queue, expected waits, your share",
        description="What the cluster is doing now, from one sinfo and one squeue: per partition the nodes idle/"
                    "mixed/allocated/down, CPUs and GPUs (by type) in use, jobs running and pending (array tasks "
                    "counted), the expected start of the next pending job where Slurm has one, and your share.")
    overview.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    overview.add_argument("--json", action="store_true", help="print JSON for scripts")
    overview.set_defaults(run=_overview)


def _overview(args: argparse.Namespace) -> int:
    # lazy: the configuration and the Slurm client; `betty --help` never loads them
    from ..cluster.advisor.overview import OverviewReader, overview_table, waits_line
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import run_sync
    from ..config import load_config

    profile = load_config().profile(args.cluster)
    transport = profile.open_transport()
    try:
        reader = OverviewReader(SlurmClient(transport, work_dir=profile.work_dir))
        overview = run_sync(reader.read())
    finally:
        run_sync(transport.close())
    if args.json:
        print(json.dumps({"cluster": profile.name, **overview}, indent=2))
        return 0
    print(f"{profile.name} at {overview['read_at']} (the cluster's clock)")
    print(overview_table(overview))
    print(f"expected waits: {waits_line(overview)}")
    return 0
