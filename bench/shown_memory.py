"""What Betty keeps in memory after showing things, repeated: `%betty squeue` in a notebook, and a watcher catching up.

Run by hand (not a test); needs no cluster:
    python bench/shown_memory.py [--jobs 19000] [--shows 5] [--experiments 1000] [--catch-ups 3]

Kernel: an IPython shell in this process runs `%load_ext betty_jupyter`, then `%betty squeue` ``--shows``
times, each shown as a notebook shows it (the job table widget), with Betty in the shell (as in a kernel with
no Jupyter server). Its `squeue` is a program on PATH that prints ``--jobs`` pending jobs in Betty's format,
so the queue is as large as asked without a cluster. IPython's own output history is off (``cache_size = 0``),
so what is left is what Betty keeps, not the person's ``Out``.

Watcher: ``--catch-ups`` projects of ``--experiments`` recorded experiments each, whose jobs all ended; a
watcher catches each up in one tick (its `sacct` answered in-process: the files, ledger and events are real).

For each it prints the resident memory and Python's traced memory (``tracemalloc``) after each repetition,
what stayed after the last one above what stayed after the first (per repetition), and the peak.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import tracemalloc
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.cluster import parsing  # noqa: E402

MIB = 1024 * 1024


def rss_mib() -> float:
    """This process's resident memory, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measured(name: str, times: int, once: Callable[[int], None]) -> None:
    """Run ``once`` ``times`` times (after one untraced warm-up) and print what stayed after each."""
    once(-1)  # imports, compiled schemas, first connections: not what a repetition keeps
    gc.collect()
    tracemalloc.start()
    kept = []
    for number in range(times):
        once(number)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        kept.append(current)
        print(f"  {name} {number + 1}: RSS {rss_mib():7.1f} MiB, traced {current / MIB:7.2f} MiB (peak {peak / MIB:.1f})")
    tracemalloc.stop()
    growth = (kept[-1] - kept[0]) / max(1, times - 1)
    print(f"  {name}: kept after the first {kept[0] / MIB:.2f} MiB, then {growth / MIB:+.2f} MiB per repetition")


def fake_squeue(folder: Path, jobs: int) -> None:
    """A `squeue` on PATH printing ``jobs`` pending jobs in Betty's format (whatever it is asked)."""
    row = ["{i}", "{i}", "N/A", "train-{i}", os.environ.get("USER", "root"), "lab", "debug", "PENDING",
           "Priority", "0:00", "1:00:00", "1", "4", "8G", "gres/gpu:a100:1", "", "2026-11-25T01:00:00", "N/A",
           "(null)"]
    assert len(row) == len(parsing.SQUEUE_FIELDS)
    line = parsing.SEPARATOR.join(row)
    (folder / "rows").write_text("".join(line.format(i=1000 + i) + "\n" for i in range(jobs)))
    program = folder / "squeue"
    program.write_text(f"#!/bin/sh\nexec cat {folder / 'rows'}\n")
    program.chmod(0o755)


def kernel(jobs: int, shows: int) -> None:
    """`%betty squeue` shown ``shows`` times in one IPython shell with Betty in it."""
    from IPython.core.interactiveshell import InteractiveShell

    folder = Path(tempfile.mkdtemp(prefix="betty-shown-"))
    (folder / "bin").mkdir()
    fake_squeue(folder / "bin", jobs)
    os.environ["PATH"] = f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}"
    project = folder / "project"
    project.mkdir()
    config = {"clusters": [{"name": "here", "transport": "local"}],
              "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}}
    (project / "betty.json").write_text(json.dumps({"BettyConfig": config}))
    os.environ["BETTY_CONFIG"] = str(project / "betty.json")
    os.chdir(project)
    shell = InteractiveShell.instance(cache_size=0)
    shell.run_cell("%load_ext betty_jupyter", store_history=False).raise_error()
    print(f"kernel: `%betty squeue --me` of {jobs:,} jobs, shown {shows} times")

    def once(_: int) -> None:
        result = shell.run_cell("%betty squeue --me", store_history=False, silent=False)
        result.raise_error()

    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        once(-1)
    sink = io.StringIO()

    def quiet(number: int) -> None:
        with contextlib.redirect_stdout(sink):
            once(number)
        sink.seek(0)
        sink.truncate()

    measured("show", shows, quiet)


def watcher(experiments: int, catch_ups: int) -> None:
    """A watcher's tick catching up ``experiments`` ended jobs, in ``catch_ups`` fresh projects."""
    from betty_jupyter.cluster.jobs import Job, JobState
    from betty_jupyter.cluster.slurm import Snapshot
    from betty_jupyter.experiments.ledger import Experiment
    from betty_jupyter.experiments.record import record_submission
    from betty_jupyter.experiments.watcher import JobWatcher
    from betty_jupyter.experiments.workspace import Workspace

    class Accounting:
        """What the tick's one `sacct` says: every job ended, exit code 0."""

        async def snapshot(self, ids: list[str]) -> Snapshot:
            return Snapshot({ident: Job(ident, "train", "me", "debug", JobState.COMPLETED, exit_code="0:0",
                                        started=datetime(2026, 11, 25, 1), ended=datetime(2026, 11, 25, 2),
                                        elapsed=timedelta(hours=1), nodelist="node1") for ident in ids}, "", ())

    def project(size: int) -> Workspace:
        workspace = Workspace.at(tempfile.mkdtemp(prefix="betty-shown-watch-"))
        workspace.wiki.mkdir()
        for number in range(size):
            slug = f"2026-11-25-ended-{number}"
            record_submission(workspace, Experiment(
                slug=slug, job_id=str(5000 + number), cluster="here", submitted="2026-11-25T01:00:00",
                goal=f"point {number}", script="#!/bin/bash\ntrue\n", script_path=f"/s/{slug}.sbatch"))
        return workspace

    projects = [project(experiments) for _ in range(catch_ups)]
    warm = project(5)
    print(f"watcher: one tick catching up {experiments:,} ended jobs, {catch_ups} times")
    watchers: list[Any] = []

    def once(number: int) -> None:
        tick = JobWatcher(warm if number < 0 else projects[number], lambda _: Accounting())
        tick.settle_seconds = 0.0
        asyncio.run(tick.tick())
        watchers.append(tick)  # as a server keeps its one watcher

    measured("catch-up", catch_ups, once)


def main() -> None:
    parser = argparse.ArgumentParser(description="what Betty keeps after showing things, repeated")
    parser.add_argument("--jobs", type=int, default=19_000)
    parser.add_argument("--shows", type=int, default=5)
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--catch-ups", type=int, default=3)
    parser.add_argument("--only", choices=("kernel", "watcher"))
    args = parser.parse_args()
    if args.only != "kernel":
        watcher(args.experiments, args.catch_ups)
    if args.only != "watcher":
        kernel(args.jobs, args.shows)


if __name__ == "__main__":
    main()
