"""The search options ``betty sweep`` and ``%%betty sweep`` share, and the ``cluster_sweep`` fields they become."""

from __future__ import annotations

import argparse
from typing import Any

SEARCH_HELP = ("search the parameters instead of running every point: bayes (Optuna's TPE), random, or grid; "
               "ranges allowed: lr=1e-5..1e-2:log layers=2..8")


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """``--search --budget --objective --early-stop --batch --approve-tasks --approve-gpu-hours``."""
    parser.add_argument("--search", choices=("bayes", "random", "grid"), help=SEARCH_HELP)
    parser.add_argument("--budget", type=int, metavar="N", help="a search runs at most N tasks in all")
    parser.add_argument("--objective", metavar="METRIC:min|max",
                        help="what a search scores each task by: the last METRIC=NUMBER it printed (e.g. loss:min)")
    parser.add_argument("--early-stop", choices=("median", "halving"),
                        help="propose stopping running tasks whose step=N values lag the others' (median rule or "
                             "successive halving)")
    parser.add_argument("--batch", type=int, metavar="K", help="a search runs K tasks at a time (default 4)")
    parser.add_argument("--approve-tasks", type=int, metavar="N",
                        help="approve later rounds now: they run without a card while the sweep stays within N tasks")
    parser.add_argument("--approve-gpu-hours", type=float, metavar="H",
                        help="…and within H GPU-hours (each task counted at its time limit)")


def search_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cluster_sweep`` fields the options give (none without ``--search``)."""
    if not args.search:
        return {}
    return {"search": args.search, "budget": args.budget, "objective": args.objective, "early_stop": args.early_stop,
            "batch": args.batch, "approve_tasks": args.approve_tasks, "approve_gpu_hours": args.approve_gpu_hours}
