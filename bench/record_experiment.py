"""Recording an experiment (what `betty submit`, `betty ask`'s submit and `betty watch` do after `sbatch`).

Run by hand (not a test); needs no cluster:
    python bench/record_experiment.py [--sizes 10 100 1000] [--repeat 5]

Betty's own time: `record_submission` (the ledger entry, the wiki page, the log and index
lines, the notebook) into a fresh project, measured two ways:
- in a fresh process (what one `betty submit` pays): importing the recording code, then
  its first record (nbformat's schema compiled on the way), medians of ``--repeat`` processes;
- N records one after another into one project: the median per record, the median of the
  last 10%, and the growth exponent of the total (slope of log(time) vs log(N)).
The baseline, in the same run: writing the same page and notebook bytes atomically
(temporary file, fsync, rename), the least any record costs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from betty_jupyter.experiments.ledger import Experiment  # noqa: E402
from betty_jupyter.experiments.record import record_submission  # noqa: E402
from betty_jupyter.experiments.workspace import Workspace  # noqa: E402
from betty_jupyter.wiki.files import write_atomically  # noqa: E402

SCRIPT = "#!/bin/bash\n#SBATCH --job-name=sweep\n#SBATCH --time=00:05:00\npython train.py --lr 3e-4\n"

FIRST_RECORD = """
import sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {root!r})
imports = time.perf_counter()
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.experiments.record import record_submission
from betty_jupyter.experiments.workspace import Workspace
experiment = Experiment(slug="2026-11-25-first", job_id="1", cluster="dev", submitted="2026-11-25T01:00:00",
                        goal="first", script="#!/bin/bash\\ntrue\\n", script_path="/s/first.sbatch")
workspace = Workspace.at(tempfile.mkdtemp())
workspace.wiki.mkdir()

began = time.perf_counter()
record_submission(workspace, experiment)
print(began - imports, time.perf_counter() - began)
"""


def experiment(number: int) -> Experiment:
    """The ``number``-th experiment of a sweep."""
    slug = f"2026-11-25-sweep-{number}"
    return Experiment(slug=slug, job_id=str(1000 + number), cluster="dev", submitted="2026-11-25T01:00:00",
                      goal=f"Learning-rate sweep, point {number}", script=SCRIPT,
                      script_path=f"/home/u/.betty/scripts/{slug}.sbatch", partition="debug",
                      resources={"time_minutes": 5})


def record_many(size: int) -> tuple[list[float], Workspace]:
    """Record ``size`` experiments into a fresh project; the seconds each took."""
    workspace = Workspace.at(tempfile.mkdtemp(prefix="betty-bench-record-"))
    workspace.wiki.mkdir()
    times = []
    for number in range(size):
        began = time.perf_counter()
        record_submission(workspace, experiment(number))
        times.append(time.perf_counter() - began)
    return times, workspace


def write_same_bytes(workspace: Workspace, size: int) -> float:
    """Seconds to write the same page and notebook bytes atomically (the baseline)."""
    files = [(workspace.wiki / f"experiments/2026-11-25-sweep-{n}.md").read_text() for n in range(size)]
    files += [workspace.notebook_path(f"2026-11-25-sweep-{n}").read_text() for n in range(size)]
    scratch = Path(tempfile.mkdtemp(prefix="betty-bench-bytes-"))
    began = time.perf_counter()
    for number, text in enumerate(files):
        write_atomically(scratch / f"{number}.txt", text)
    return time.perf_counter() - began


def first_record(repeat: int) -> tuple[float, float]:
    """Median seconds of importing Betty's recording and of the first record in a fresh process."""
    code = FIRST_RECORD.format(root=str(Path(__file__).resolve().parents[1]))
    runs = [[float(part) for part in subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                   check=True).stdout.split()] for _ in range(repeat)]
    return statistics.median(run[0] for run in runs), statistics.median(run[1] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description="recording experiments")
    parser.add_argument("--sizes", type=int, nargs=3, default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    imports, first = first_record(args.repeat)
    print(f"a fresh process (median of {args.repeat}): importing {imports * 1000:.1f} ms, "
          f"then its first record {first * 1000:.1f} ms")
    record_many(1)  # what a process pays once (the imports, the schema's compilation) stays out of the table
    print(f"{'N':>6} {'total':>9} {'per record':>11} {'last 10%':>9} {'same bytes':>11} {'ratio':>6}")
    totals = []
    for size in args.sizes:
        times, workspace = record_many(size)
        tail = times[-max(1, size // 10):]
        baseline = write_same_bytes(workspace, size)
        totals.append(sum(times))
        print(f"{size:6d} {sum(times):8.2f}s {statistics.median(times) * 1000:8.1f} ms "
              f"{statistics.median(tail) * 1000:6.1f} ms "
              f"{baseline / size * 1000:8.1f} ms {sum(times) / baseline:5.1f}x")
    slope = math.log(totals[-1] / totals[0]) / math.log(args.sizes[-1] / args.sizes[0])
    print(f"growth exponent (total time, N={args.sizes[0]}→{args.sizes[-1]}): {slope:.2f}")


if __name__ == "__main__":
    main()
