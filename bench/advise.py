"""Start-time advice for 1, 3 and 6 candidate placements against one plain `sbatch --test-only`.

Run by hand (not a test), with the dev cluster up:
    python bench/advise.py [--runs 7] [--transport ssh|local]

Through one transport to the dev cluster (SSH by default, as a laptop reaches a cluster), it times:
the baseline, one plain `sbatch --test-only --partition=gpu --gres=gpu:a100:1 --wrap=true`; then, for
each size, the advice for that many candidates with a fresh cache (every candidate asked) and again
within the minute (every answer cached). It counts the scheduler RPCs each advice made (the
`sbatch --test-only` commands that reached the transport) and prints medians, the ratio of each
advice to the baseline, and the growth exponent of the cold advice over the sizes
(slope of log time against log candidates: 0 is flat, 1 is linear).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from betty_jupyter.advisor.estimates import Candidate  # noqa: E402
from betty_jupyter.advisor.placement import PlacementAdvisor, StartCache  # noqa: E402
from betty_jupyter.cluster.profiles import ClusterProfile  # noqa: E402
from betty_jupyter.cluster.sbatch import SbatchScript  # noqa: E402
from betty_jupyter.transport.interface import CommandResult  # noqa: E402

SCRIPT = SbatchScript.parse("#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n#SBATCH --time=00:10:00\npython train.py\n")
CANDIDATES = [Candidate("gpu", "a100"), Candidate("gpu", "h100"), Candidate("cpu", "a100"), Candidate("cpu", "h100"),
              Candidate("gpu", "a100", nodes=1), Candidate("gpu", "h100", nodes=1)]
BASELINE = ["sbatch", "--test-only", "--partition=gpu", "--gres=gpu:a100:1", "--time=00:10:00", "--wrap=true"]


class Counting:
    """The transport, counting the `sbatch --test-only` commands that reach it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.rpcs = 0

    async def run(self, argv: Sequence[str], timeout: float = 60.0, *, idempotent: bool = True) -> CommandResult:
        self.rpcs += tuple(argv[:2]) == ("sbatch", "--test-only")
        return await self.inner.run(argv, timeout, idempotent=idempotent)

    async def put(self, data: bytes, remote_path: str) -> str:
        return await self.inner.put(data, remote_path)

    async def close(self) -> None:
        await self.inner.close()


def dev_cluster_env() -> dict[str, str]:
    found = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "dev-cluster", "env", "--json"],
                           capture_output=True, text=True, cwd=REPO)
    if found.returncode != 0:
        raise SystemExit(f"the dev cluster is not up: {found.stderr.strip()}")
    return json.loads(found.stdout)


def profile(kind: str, env: dict[str, str]) -> ClusterProfile:
    work = tempfile.mkdtemp(prefix="bench-advise-")
    if kind == "local":
        return ClusterProfile(name="bench", transport="local", env={"SLURM_CONF": env["SLURM_CONF"]}, work_dir=work)
    return ClusterProfile(name="bench", transport="ssh", host=env["BETTY_DEV_SSH_HOST"],
                          ssh_config=env["BETTY_DEV_SSH_CONFIG"], work_dir=work)


async def timed_baseline(transport: Counting) -> float:
    began = time.perf_counter()
    result = await transport.run(BASELINE)
    took = time.perf_counter() - began
    if "to start at" not in result.stderr:
        raise SystemExit(f"the baseline failed: {result.stderr.strip()}")
    return took


async def timed_advice(transport: Counting, candidates: list[Candidate], cache: StartCache) -> tuple[float, int]:
    before = transport.rpcs
    began = time.perf_counter()
    advice = await PlacementAdvisor(transport, parallel=6, cache=cache).estimates(SCRIPT, candidates)
    took = time.perf_counter() - began
    if not all(estimate.ok for estimate in advice):
        raise SystemExit(f"an estimate failed: {[e.reason for e in advice if not e.ok]}")
    return took, transport.rpcs - before


async def measure(kind: str, runs: int, sizes: list[int]) -> dict[str, object]:
    transport = Counting(profile(kind, dev_cluster_env()).open_transport())
    try:
        await timed_baseline(transport)  # warm: the connection is open before anything is timed
        baseline: list[float] = []
        rows: dict[int, dict[str, list[float]]] = {size: {"cold": [], "warm": [], "cold_rpcs": [], "warm_rpcs": []}
                                                   for size in sizes}
        for _ in range(runs):  # interleaved, so a busy moment of the machine falls on every series alike
            baseline.append(await timed_baseline(transport))
            for size in sizes:
                cache = StartCache()
                cold, cold_rpcs = await timed_advice(transport, CANDIDATES[:size], cache)
                warm, warm_rpcs = await timed_advice(transport, CANDIDATES[:size], cache)
                for name, value in (("cold", cold), ("warm", warm), ("cold_rpcs", cold_rpcs), ("warm_rpcs", warm_rpcs)):
                    rows[size][name].append(value)
    finally:
        await transport.close()
    base = statistics.median(baseline)
    report: dict[str, object] = {"transport": kind, "runs": runs, "baseline_s": round(base, 4), "sizes": {}}
    for size in sizes:
        cold, warm = statistics.median(rows[size]["cold"]), statistics.median(rows[size]["warm"])
        report["sizes"][size] = {  # type: ignore[index]
            "cold_s": round(cold, 4), "cold_ratio": round(cold / base, 2), "cold_rpcs": max(rows[size]["cold_rpcs"]),
            "warm_s": round(warm, 6), "warm_ratio": round(warm / base, 4), "warm_rpcs": max(rows[size]["warm_rpcs"]),
        }
    report["growth_exponent"] = round(growth([(size, statistics.median(rows[size]["cold"])) for size in sizes]), 2)
    return report


def growth(points: list[tuple[int, float]]) -> float:
    """The least-squares slope of log(time) against log(size)."""
    xs = [math.log(size) for size, _ in points]
    ys = [math.log(seconds) for _, seconds in points]
    mean_x, mean_y = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--transport", choices=("ssh", "local"), default="ssh")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 6])
    args = parser.parse_args()
    if max(args.sizes) > len(CANDIDATES) or min(args.sizes) < 1:
        raise SystemExit(f"sizes go from 1 to {len(CANDIDATES)}")
    print(json.dumps(asyncio.run(measure(args.transport, args.runs, args.sizes)), indent=2))


if __name__ == "__main__":
    main()
