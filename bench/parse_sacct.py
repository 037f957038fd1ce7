"""Parsing 100k rows of sacct output into Betty's typed DataFrame vs a plain pandas.read_csv.

Run by hand (not a test):  .venv/bin/python bench/parse_sacct.py [--rows 100000] [--repeat 5]

The text is generated in sacct's own shape (the fields of ``parsing.SACCT_FIELDS``, split by
``\\x1f``): jobs with their ``.batch`` and ``.0`` steps, every state, array tasks, GPU TRES,
unit-suffixed memory. The baseline reads the same bytes with ``pd.read_csv`` (strings only).
Target: Betty ≤ 2× the baseline and under 1 s.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402

from betty_jupyter.cluster import parsing  # noqa: E402
from timing import best_of  # noqa: E402

STATES = ["COMPLETED", "FAILED", "CANCELLED by 1000", "TIMEOUT", "OUT_OF_MEMORY", "RUNNING", "PENDING", "NODE_FAIL"]


def clock(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def sacct_text(rows: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = []
    job = 100000
    while len(lines) < rows:
        job += 1
        ident = f"{job}_{rng.randint(1, 50)}" if rng.random() < 0.2 else str(job)
        state = rng.choice(STATES)
        gpus = rng.choice([0, 0, 1, 2, 4])
        tres = f"billing=4,cpu=4,gres/gpu:a100={gpus},gres/gpu={gpus},mem=16G,node=1" if gpus else "billing=4,cpu=4,mem=16G,node=1"
        elapsed = clock(rng.randint(0, 200000))
        start = f"2026-11-{rng.randint(1, 21):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
        fields = [ident, str(job), f"train-{rng.randint(1, 999)} | lr=3e-4", "alice", "proj", "gpu", state, "0:0",
                  start, start, start, elapsed, clock(rng.choice([3600, 86400, 172800])), "1", "4", "16G", "",
                  tres, f"node{rng.randint(1, 64):03d}", f"betty:{rng.getrandbits(64):016x}", "/home/alice/run"]
        lines.append(parsing.SEPARATOR.join(fields))
        for step in ("batch", "0"):
            step_fields = list(fields)
            step_fields[0] = f"{ident}.{step}"
            step_fields[16] = f"{rng.randint(1000, 90000000)}K"
            lines.append(parsing.SEPARATOR.join(step_fields))
    return "\n".join(lines[:rows]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="sacct parsing speed")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = sacct_text(args.rows)
    names = [name for _, name in parsing.SACCT_FIELDS]

    def baseline() -> pd.DataFrame:
        return pd.read_csv(io.StringIO(text), sep=parsing.SEPARATOR, header=None, names=names, dtype=str,
                           keep_default_na=False, quoting=csv.QUOTE_NONE)

    base = best_of(baseline, args.repeat)
    betty = best_of(lambda: parsing.parse_history(text), args.repeat)
    jobs = len(parsing.parse_history(text))
    print(f"{args.rows} sacct rows ({len(text) / 1e6:.1f} MB, {jobs} jobs after folding steps), best of {args.repeat}")
    print(f"pandas.read_csv (baseline): {base * 1000:8.1f} ms")
    print(f"Betty parse_history:        {betty * 1000:8.1f} ms   = {betty / base:.2f}x the baseline")


if __name__ == "__main__":
    main()
