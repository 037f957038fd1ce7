"""The watcher's catch-up: one tick after N watched jobs ended at once, against the one `sacct` it needs.

Run by hand (not a test), with the dev cluster up (`betty dev-cluster up`):
    python bench/watcher_catchup.py [--sizes 10 100 1000] [--repeat 3] [--dir /dev/shm]

Each project is made in a fresh folder under ``--dir`` (the system's temporary folder by default; a
memory file system such as ``/dev/shm`` leaves the disk out and shows Betty's own work) and removed after its run.

Submits the largest size of real jobs (`true`) in one remote loop and waits until accounting
has them all ended; then, for each size and repetition, records that many experiments
pointing at those jobs into a fresh project and times, paired in the same run: the plain
`sacct` of those jobs over the same link (the baseline), then one `JobWatcher.tick()`, which
asks that `sacct` and rewrites every page and notebook. Prints the best of the repetitions,
the ratio, the time per experiment and the growth exponent (slope of log(time) vs log(N)).

Also timed in each run, after the tick: the floor, the file work no writer can skip on this
disk. Each page and notebook the tick wrote is read and written again through a temporary
file with bare system calls, each made durable by itself (eight at a time, as Betty does) and renamed
into place (no parsing, rendering, locks or ledger); ``floor`` is that plus the `sacct`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from betty_jupyter.cluster import parsing  # noqa: E402
from betty_jupyter.cluster.sync import run_sync  # noqa: E402
from betty_jupyter.experiments.ledger import Experiment  # noqa: E402
from betty_jupyter.experiments.record import record_submission  # noqa: E402
from betty_jupyter.experiments.watcher import watcher_for_config  # noqa: E402
from betty_jupyter.experiments.workspace import Workspace  # noqa: E402
from betty_jupyter.wiki.files import make_durable, sync_directory  # noqa: E402

NAME = "betty-bench-ended"
CLUSTER = "betty-dev"


def dev_cluster_env() -> dict[str, str]:
    """The dev cluster's settings (`betty dev-cluster env --json`)."""
    return json.loads(subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "dev-cluster", "env", "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def submit_ended_jobs(transport, count: int) -> list[str]:
    """Submit ``count`` jobs that end at once and wait until accounting has every one ended; their ids."""
    loop = (f"for i in $(seq {count}); do sbatch --parsable --job-name={NAME} --output=/dev/null --time=1 "
            "--wrap true || exit 1; done")
    submitted = run_sync(transport.run(["sh", "-c", loop], timeout=1800))
    if not submitted.ok:
        raise SystemExit(f"submitting failed: {submitted.stderr.strip()}")
    ids = [line.split(";")[0] for line in submitted.stdout.split()]
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        states = run_sync(transport.run(["sacct", "--noheader", "--parsable2", "--allocations", "--format=State",
                                         "--jobs", ",".join(ids)], timeout=300)).stdout.split()
        if len(states) == count and all(state in ("COMPLETED", "FAILED") for state in states):
            return ids
        time.sleep(2)
    raise SystemExit("the jobs did not all end within 30 minutes")


def experiment(number: int, job: str) -> Experiment:
    """An experiment recorded for ``job``."""
    slug = f"2026-11-25-ended-{number}"
    return Experiment(slug=slug, job_id=job, cluster=CLUSTER, submitted="2026-11-25T01:00:00",
                      goal=f"point {number}", script="#!/bin/bash\ntrue\n", script_path=f"/s/{slug}.sbatch")


def bare_rewrite(files: list[Path]) -> float:
    """Seconds to replace each of ``files`` with its own bytes, durably, with bare system calls."""
    began = time.perf_counter()
    temporaries = []
    for path in files:
        temporary = path.with_name(f".{path.name}.floor.tmp")
        temporary.write_bytes(path.read_bytes())
        temporaries.append(temporary)
    make_durable(temporaries)
    for temporary, path in zip(temporaries, files):
        os.replace(temporary, path)
    for folder in {path.parent for path in files}:
        sync_directory(folder)
    return time.perf_counter() - began


def one_run(ids: list[str], transport, folder: str | None) -> tuple[float, float, int, float]:
    """Seconds of the plain `sacct` and of one tick, how many updates the tick made, in a fresh project under
    ``folder`` (removed afterwards), and seconds of the bare rewrite of the files it wrote."""
    root = tempfile.mkdtemp(prefix="betty-bench-watch-", dir=folder)
    try:
        return _timed(ids, transport, Workspace.at(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _timed(ids: list[str], transport, workspace: Workspace) -> tuple[float, float, int, float]:
    workspace.wiki.mkdir()
    for number, job in enumerate(ids):
        record_submission(workspace, experiment(number, job))
    argv = ["sacct", "--parsable2", "--noheader", f"--delimiter={parsing.SEPARATOR}",
            "--format", ",".join(field for field, _ in parsing.SACCT_FIELDS), "--jobs", ",".join(ids)]
    began = time.perf_counter()
    run_sync(transport.run(argv, timeout=300))
    sacct = time.perf_counter() - began
    watcher, close = watcher_for_config(workspace)
    watcher.settle_seconds = 0.0
    try:
        run_sync(watcher.client_for(CLUSTER).transport.run(["true"]))  # the link is open before the clock starts
        began = time.perf_counter()
        updates = run_sync(watcher.tick())
        tick = time.perf_counter() - began
    finally:
        close()
    written = [workspace.wiki / update.experiment.page for update in updates] + [
        workspace.root / update.experiment.notebook for update in updates if "notebook" in update.written]
    return sacct, tick, len(updates), bare_rewrite(written)


def main() -> None:
    parser = argparse.ArgumentParser(description="one watcher tick after many jobs ended")
    parser.add_argument("--sizes", type=int, nargs=3, default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ids", type=Path, help="reuse the ended jobs listed in this file (written when missing)")
    parser.add_argument("--dir", help="where the projects are made (default: the system's temporary folder)")
    args = parser.parse_args()
    env = dev_cluster_env()
    os.environ["BETTY_CONFIG"] = env["BETTY_CONFIG"]
    root = tempfile.mkdtemp(prefix="betty-bench-watch-", dir=args.dir)
    watcher, close = watcher_for_config(Workspace.at(root))
    transport = watcher.client_for(CLUSTER).transport
    try:
        if args.ids and args.ids.exists():
            ids = args.ids.read_text().split()
        else:
            began = time.perf_counter()
            ids = submit_ended_jobs(transport, max(args.sizes))
            print(f"{len(ids)} jobs submitted and ended in {time.perf_counter() - began:.1f} s")
            if args.ids:
                args.ids.write_text("\n".join(ids))
        print(f"{'N':>6} {'sacct':>9} {'tick':>9} {'ratio':>6} {'per experiment':>15} {'updates':>8} "
              f"{'floor':>9} {'ratio':>6}")
        ticks = []
        for size in args.sizes:
            runs = [one_run(ids[:size], transport, args.dir) for _ in range(args.repeat)]
            sacct, tick = min(run[0] for run in runs), min(run[1] for run in runs)
            floor = sacct + min(run[3] for run in runs)
            ticks.append(tick)
            print(f"{size:6d} {sacct * 1000:6.0f} ms {tick * 1000:6.0f} ms {tick / sacct:5.1f}x "
                  f"{(tick - sacct) / size * 1000:12.2f} ms {runs[0][2]:8d} {floor * 1000:6.0f} ms {floor / sacct:5.1f}x")
        slope = math.log(ticks[-1] / ticks[0]) / math.log(args.sizes[-1] / args.sizes[0])
        print(f"growth exponent (tick, N={args.sizes[0]}→{args.sizes[-1]}): {slope:.2f}")
    finally:
        close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
