"""Efficiency of N finished jobs: how many sacct calls, and the parse time vs pandas.read_csv of the same bytes.

Run by hand (not a test):  .venv/bin/python bench/efficiency.py [--jobs 1000 10000 100000] [--repeat 5]

The text is generated in the exact shape of ``efficiency.EFFICIENCY_FIELDS`` as the dev cluster's Slurm 22.05
prints it (``--parsable2 --noheader`` split by ``\\x1f``): each job with its ``.batch`` and ``.extern`` steps,
the job row's TotalCPU, ReqTRES ``mem=``, the steps' MaxRSS and TRESUsageInMax/Ave, GPU TRES on some jobs, a few
finished states and a job name holding ``|``. ``SlurmClient.efficiency`` is called with the N job ids over a
ScriptedTransport that answers with that text and counts the commands it was given; the parse alone is then
timed against ``pd.read_csv`` of the same bytes (strings only, no folding of steps). The growth exponent is the
slope of log(time) over log(N) between the smallest and the largest size (1.0 is linear).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402

from betty_jupyter.cluster.job_efficiency import EFFICIENCY_FIELDS, parse_efficiency  # noqa: E402
from betty_jupyter.cluster.parsing import SEPARATOR  # noqa: E402
from betty_jupyter.cluster.slurm import SlurmClient  # noqa: E402
from betty_jupyter.cluster.scripted import ScriptedTransport  # noqa: E402
from timing import best_of  # noqa: E402

STATES = ["COMPLETED", "COMPLETED", "FAILED", "CANCELLED by 1000", "TIMEOUT", "OUT_OF_MEMORY"]


def sacct_text(jobs: int, seed: int = 7) -> str:
    """``jobs`` finished jobs with two steps each, as sacct prints EFFICIENCY_FIELDS."""
    rng = random.Random(seed)
    lines = []
    for job in range(100001, 100001 + jobs):
        gpus = rng.choice([0, 0, 0, 1, 2])
        tres = f"billing=4,cpu=4,gres/gpu:a100={gpus},gres/gpu={gpus},mem=16G,node=1" if gpus else \
            "billing=4,cpu=4,mem=16G,node=1"
        elapsed = rng.randint(1, 200000)
        cpu = rng.randint(0, elapsed * 4)
        total = f"{cpu // 3600:02d}:{cpu // 60 % 60:02d}:{cpu % 60:02d}"
        row = {"job_id": str(job), "name": f"train-{rng.randint(1, 999)} | lr=3e-4", "partition": "gpu",
               "state": rng.choice(STATES), "ended": "2026-11-21T08:00:00", "elapsed": str(elapsed),
               "time_limit": rng.choice(["60", "1440", "UNLIMITED"]), "cpus": "4", "nodes": "1", "total_cpu": total,
               "req_mem": "16G", "max_rss": "", "req_tres": tres.replace(f"gres/gpu:a100={gpus},", ""),
               "alloc_tres": tres, "usage_max": "", "usage_ave": ""}
        lines.append(SEPARATOR.join(row[name] for _, name in EFFICIENCY_FIELDS))
        for step in ("batch", "extern"):
            rss = f"{rng.randint(1000, 16_000_000)}K"
            usage = f"cpu={total},energy=0,fs/disk=1694242,mem={rss},pages=0,vmem={rss}"
            lines.append(SEPARATOR.join({**row, "job_id": f"{job}.{step}", "name": step, "partition": "",
                                         "time_limit": "", "total_cpu": total, "max_rss": rss, "req_tres": "",
                                         "usage_max": usage, "usage_ave": usage}[name]
                                        for _, name in EFFICIENCY_FIELDS))
    return "\n".join(lines) + "\n"


def one_call(text: str, jobs: int) -> tuple[int, int]:
    """How many commands ``SlurmClient.efficiency`` ran for ``jobs`` job ids, and how many jobs it gave back."""
    transport = ScriptedTransport().on("sacct", stdout=text)
    found = asyncio.run(SlurmClient(transport).efficiency([str(job) for job in range(100001, 100001 + jobs)]))
    return len(transport.ran("sacct")), len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description="efficiency of many finished jobs")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    names = [name for _, name in EFFICIENCY_FIELDS]
    print(f"{'jobs':>7} {'rows':>7} {'MB':>6} {'sacct calls':>11} {'read_csv':>10} {'Betty':>10} {'ratio':>6}")
    measured = []
    for jobs in args.jobs:
        text = sacct_text(jobs)
        calls, found = one_call(text, jobs)
        assert found == jobs, (found, jobs)

        def baseline() -> pd.DataFrame:
            return pd.read_csv(io.StringIO(text), sep=SEPARATOR, header=None, names=names, dtype=str,  # noqa: B023
                               keep_default_na=False, quoting=csv.QUOTE_NONE)

        base = best_of(baseline, args.repeat)
        betty = best_of(lambda: parse_efficiency(text), args.repeat)  # noqa: B023
        measured.append((jobs, base, betty))
        print(f"{jobs:>7} {3 * jobs:>7} {len(text) / 1e6:>6.1f} {calls:>11} {base * 1000:>8.1f}ms "
              f"{betty * 1000:>8.1f}ms {betty / base:>5.2f}x")
    if len(measured) > 1:
        (small, base_small, betty_small), (large, base_large, betty_large) = measured[0], measured[-1]
        span = math.log(large / small)
        print(f"growth exponent: Betty {math.log(betty_large / betty_small) / span:.2f}, "
              f"read_csv {math.log(base_large / base_small) / span:.2f}")


if __name__ == "__main__":
    main()
