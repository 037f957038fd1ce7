"""The options ``betty submit`` and ``%%betty submit`` share, and the ``cluster_submit`` fields they become."""

from __future__ import annotations

import argparse
from typing import Any


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """``--segments --checkpoint-seconds --requeue --measure-gpu-peak --end-mail``."""
    parser.add_argument("--segments", type=int, metavar="N",
                        help="run longer than the time limit: at most N jobs, each resuming from the last checkpoint "
                             "(docs/long-runs.md)")
    parser.add_argument("--checkpoint-seconds", type=int, metavar="S",
                        help="with --segments: tell the program to checkpoint S seconds before each limit")
    parser.add_argument("--requeue", action="store_true",
                        help="if Slurm preempts the job, it goes back in the queue and resumes from its last "
                             "checkpoint (docs/long-runs.md)")
    parser.add_argument("--measure-gpu-peak", action="store_true",
                        help="record the job's real GPU peak beside its estimate (docs/gpu.md#measured-peaks)")
    parser.add_argument("--end-mail", action="store_true",
                        help="Slurm mails you when the job ends (#SBATCH --mail-type=END; where your site offers it)")


def run_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cluster_submit`` fields the options give (only those the person set)."""
    fields: dict[str, Any] = {}
    if args.segments is not None:
        fields["segments"] = args.segments
    if args.checkpoint_seconds is not None:
        fields["checkpoint_seconds"] = args.checkpoint_seconds
    fields.update({name: True for name in ("requeue", "measure_gpu_peak", "end_mail") if getattr(args, name)})
    return fields
