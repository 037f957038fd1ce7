"""`betty log show` on action logs of 1k, 10k and 100k lines, against `jq` reading the same files.

Run by hand (not a test); needs `jq` on the PATH, no cluster:
    .venv/bin/python bench/log_show.py [--sizes 1000 10000 100000] [--repeat 3] [--keep DIR]

Each size is a workspace whose log is written by Betty's own writer (`ActionLog.record`: a
mix of tools, decisions, previews, sessions, and hostile text in some summaries), spread over
one day per 300 lines. Then, paired in the same run (median of `--repeat`):

- `betty log show` (the whole table, every day) against `jq -r '[…] | @tsv'` printing the same
  columns from every day file;
- `betty log show --session S` (one session's few rows) against `jq 'select(.session_id == S)'`;
- the first `betty log show` after the log grew (its index catching up), once.

It prints the times, the ratio to `jq`, and the growth exponent (the slope of log(time) against
log(lines) from the smallest size to the largest, and between the two largest, where the fixed
start-up of a Python program weighs less; 1 is linear, 2 quadratic).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from betty_jupyter.agent.actions import ActionLog, ActionRecord  # noqa: E402
from betty_jupyter.agent.models import Preview  # noqa: E402

LINES_PER_DAY = 300
FIRST_DAY = datetime(2024, 1, 1, 8, 0, 0)
JQ_ROW = '[(.ts | todate), .tool, .decision, (.ok | tostring), .summary] | @tsv'
BETTY = [sys.executable, "-m", "betty_jupyter.cli"]


def record(n: int, sessions: int) -> tuple[ActionRecord, str | None]:
    """The ``n``-th record of a made-up year of work, and the full output kept beside some."""
    day = FIRST_DAY + timedelta(days=n // LINES_PER_DAY, seconds=(n % LINES_PER_DAY) * 97)
    common = {"ts": day.timestamp(), "session_id": f"s-{n % sessions:04d}", "call_id": f"call_{n}"}
    kind = n % 5
    if kind == 0:
        script = f"#!/bin/bash\n#SBATCH --job-name=sweep-{n}\n#SBATCH --time=01:00:00\npython train.py --lr {n}e-5\n"
        return ActionRecord(**common, tool="submit_job", tier=2, args={"script": script, "partition": "gpu"},
                            preview=Preview(kind="script", title=f"Submit sweep-{n}", text=script,
                                            details={"partition": "gpu", "gpus": 1}),
                            decision="approved", approver="ada", ok=True, summary=f"job {40000 + n} submitted",
                            duration_ms=812.5, artifacts=[f"wiki/experiments/sweep-{n}.md"]), None
    if kind == 1:
        return ActionRecord(**common, tool="squeue", tier=0, args={"user": "ada"}, decision="auto", ok=True,
                            summary=f"{n % 37} jobs: {n % 11} running, {n % 26} pending",
                            duration_ms=95.0), "JOBID PARTITION NAME\n" * 20
    if kind == 2:
        hostile = "\x1b[31mred\x1b[0m <img src=x onerror=alert(1)>\u202e" if n % 10 == 2 else ""
        return ActionRecord(**common, tool="read_page", tier=0, args={"path": f"wiki/notes/{n}.md"},
                            decision="auto", ok=True, summary=f"read wiki/notes/{n}.md {hostile}" + " word" * (n % 30),
                            duration_ms=3.0), None
    if kind == 3:
        return ActionRecord(**common, tool="cancel_job", tier=2, args={"job_id": str(40000 + n)},
                            preview=Preview(kind="command", title=f"Cancel {40000 + n}", text=f"scancel {40000 + n}"),
                            decision="denied", approver="ada", ok=None, summary="", duration_ms=0.0), None
    return ActionRecord(**common, tool="write_page", tier=1, args={"path": "wiki/index.md", "text": "# Index\n"},
                        preview=Preview(kind="diff", title="Edit wiki/index.md", text="--- a\n+++ b\n+# Index\n"),
                        decision="auto", ok=False, summary="the page changed since it was read; read it again",
                        duration_ms=7.0), None


def write_log(workspace: Path, lines: int) -> None:
    """``lines`` records through ``ActionLog.record``, the writer every Betty process uses."""
    log = ActionLog(workspace)
    sessions = max(1, lines // 50)
    for n in range(lines):
        rec, output = record(n, sessions)
        log.record(rec, full_output=output)


def day_files(workspace: Path) -> list[str]:
    return sorted(str(p) for p in (workspace / ".betty/actions").glob("*.jsonl"))


def median_pair(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The medians of ``repeat`` paired runs of ``a`` and ``b`` (A B A B …), in seconds."""
    times_a, times_b = [], []
    for _ in range(repeat):
        for call, times in ((a, times_a), (b, times_b)):
            began = time.perf_counter()
            call()
            times.append(time.perf_counter() - began)
    return statistics.median(times_a), statistics.median(times_b)


def run(argv: list[str]) -> None:
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {result.stderr.decode()[-500:]}")


def exponent(sizes: list[int], times: list[float]) -> float:
    return math.log(times[-1] / times[0]) / math.log(sizes[-1] / sizes[0])


def main() -> None:
    parser = argparse.ArgumentParser(description="betty log show against jq")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path,
                        help="write the workspaces here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="betty-log-bench-"))
    rows = []
    for size in args.sizes:
        workspace = root / f"log-{size}"
        if not (workspace / ".betty/actions").is_dir():
            began = time.perf_counter()
            write_log(workspace, size)
            print(f"wrote {size} lines in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        files = day_files(workspace)
        session = f"s-{7:04d}"
        show = [*BETTY, "log", "show", "--dir", str(workspace)]
        # The first show after the log was written builds the index (where there is one): timed on its own.
        began = time.perf_counter()
        run(show)
        first = time.perf_counter() - began
        whole = median_pair(lambda: run(show), lambda: run(["jq", "-r", JQ_ROW, *files]), args.repeat)
        one = median_pair(lambda: run([*show, "--session", session]),
                          lambda: run(["jq", "-r", f'select(.session_id == "{session}") | {JQ_ROW}', *files]),
                          args.repeat)
        rows.append((size, first, whole, one))
    print(f"{'lines':>7} {'first show':>11} {'show':>9} {'jq':>9} {'ratio':>6} "
          f"{'--session':>10} {'jq select':>10} {'ratio':>6}")
    for size, first, (show_t, jq_t), (one_t, jq_one) in rows:
        print(f"{size:7d} {first:10.2f}s {show_t:8.2f}s {jq_t:8.2f}s {show_t / jq_t:5.2f}x "
              f"{one_t:9.2f}s {jq_one:9.2f}s {one_t / jq_one:5.2f}x")
    if len(rows) > 1:
        sizes = [r[0] for r in rows]
        columns = {"show": [r[2][0] for r in rows], "jq": [r[2][1] for r in rows],
                   "show --session": [r[3][0] for r in rows], "first show": [r[1] for r in rows]}
        print("growth exponent, smallest to largest: "
              + ", ".join(f"{name} {exponent(sizes, times):.2f}" for name, times in columns.items()))
        if len(rows) > 2:  # start-up weighs less between the two largest sizes
            print("growth exponent, the two largest: "
                  + ", ".join(f"{name} {exponent(sizes[-2:], times[-2:]):.2f}" for name, times in columns.items()))
    if args.keep is None:
        print(f"(workspaces in {root}; remove them when done)", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
