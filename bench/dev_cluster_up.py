"""How long `betty dev-cluster up` takes from nothing to a cluster that has run a job.

Run by hand (not a test):  .venv/bin/python bench/dev_cluster_up.py [--rounds 3]

Each round uses a fresh state directory on its own ports (so a running dev cluster is left
alone): `up` from nothing, then one job submitted over the SSH alias until sacct shows it
COMPLETED; then a second `up` (the no-op) and `down --purge`. The no-op `up` is the
baseline printed beside it, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BETTY = [sys.executable, "-m", "betty_jupyter.cli", "dev-cluster"]


def betty(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*BETTY, *args], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"betty dev-cluster {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def first_job(env: dict[str, str]) -> None:
    submit = subprocess.run(
        ["ssh", "-F", env["BETTY_DEV_SSH_CONFIG"], env["BETTY_DEV_SSH_HOST"], "sbatch --parsable --wrap true"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    job = submit.stdout.strip().split(";")[0]
    while True:
        state = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"],
            capture_output=True, text=True, env={"SLURM_CONF": env["SLURM_CONF"], "PATH": "/usr/bin:/bin"},
        ).stdout.strip()
        if state == "COMPLETED":
            return
        if state and state not in ("PENDING", "RUNNING", "COMPLETING"):
            raise SystemExit(f"job {job} ended {state}")
        time.sleep(0.2)


def one_round(port_base: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="betty-bench-") as tmp:
        state = str(Path(tmp) / "cluster")
        began = time.perf_counter()
        betty("up", "--state-dir", state, "--port-base", str(port_base))
        up_s = time.perf_counter() - began
        env = json.loads(betty("env", "--state-dir", state, "--json").stdout)
        first_job(env)
        job_s = time.perf_counter() - began
        began = time.perf_counter()
        betty("up", "--state-dir", state)
        noop_s = time.perf_counter() - began
        betty("down", "--state-dir", state, "--purge")
    return up_s, job_s, noop_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port-base", type=int, default=36817)
    args = parser.parse_args()
    rounds = [one_round(args.port_base) for _ in range(args.rounds)]
    up, job, noop = (statistics.median(column) for column in zip(*rounds))
    print(f"rounds: {args.rounds} (medians)")
    print(f"up from nothing:                    {up:6.2f} s")
    print(f"up from nothing to a COMPLETED job: {job:6.2f} s")
    print(f"second up (no-op, baseline):        {noop:6.2f} s   -> fresh up = {up / noop:.0f}x the no-op")


if __name__ == "__main__":
    main()
