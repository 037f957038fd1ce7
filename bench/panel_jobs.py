"""The side panel's Jobs tab with many jobs: rendered in jsdom by jest, against the same tab as it was in git.

Run by hand (not a test), from the repository root, with labextension/node_modules installed:
    .venv/bin/python bench/panel_jobs.py [--sizes 200,2000,20000] [--repeat 3]

Puts the Jobs tab of two earlier commits beside today's (``--paged``: 100 rows a page with Previous and Next;
``--all``: every row in the page), renders the three in one jest run, paired (each run renders the three one
after the other), and removes them again. Prints, for each size, the median time of the first render (mounting
until the rows are in the page), the elements in the page, and going to the end of the list (scrolling to the
end; for the paged tab the next page), each with its ratio to today's tab, and each tab's growth exponent
(slope of log(time) against log(size) between the smallest and the largest size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "labextension"
COMPONENTS = LAB / "src" / "components"
PAGED = "92b3797"  # the tab that showed 100 rows a page
ALL = "92b3797^"  # the tab that put every row in the page
SPEC = "bench-panel-jobs.spec.tsx"


def old_tab(rev: str, prefix: str) -> list[Path]:
    """The Jobs tab's components at ``rev``, written beside today's as ``<prefix>JobsView.tsx`` (and its own
    pager and finished list); the files written."""
    written = []
    for name in ("JobsView", "FinishedJobs", "Pager"):
        shown = subprocess.run(["git", "show", f"{rev}:labextension/src/components/{name}.tsx"], cwd=REPO,
                               capture_output=True, text=True)
        if shown.returncode != 0:
            continue  # no pager before the tab paged
        text = shown.stdout.replace("from './FinishedJobs'", f"from './{prefix}FinishedJobs'").replace(
            "from './Pager'", f"from './{prefix}Pager'")
        path = COMPONENTS / f"{prefix}{name}.tsx"
        path.write_text(text)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="the Jobs tab with many jobs, against the tab as it was")
    parser.add_argument("--sizes", default="200,2000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--paged", default=PAGED, help="the commit of the paged tab")
    parser.add_argument("--all", default=ALL, help="the commit of the tab with every row")
    args = parser.parse_args()
    written = [*old_tab(args.paged, "BenchPaged"), *old_tab(args.all, "BenchAll")]
    spec = LAB / "test" / SPEC
    written.append(spec)
    spec.write_text((REPO / "bench" / "panel_jobs.bench.tsx").read_text())
    try:
        ran = subprocess.run(["npx", "jest", f"test/{SPEC}"], cwd=LAB, capture_output=True, text=True,
                             env={**os.environ, "BENCH_SIZES": args.sizes,
                                  "BENCH_REPEAT": str(args.repeat)})
    finally:
        for path in written:
            path.unlink(missing_ok=True)
    lines = [json.loads(line[6:]) for line in ran.stdout.splitlines() if line.startswith("BENCH ")]
    if ran.returncode != 0 or not lines:
        raise SystemExit(f"jest failed:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}")
    report(lines)


def report(lines: list[dict]) -> None:
    """The table: medians per tab and size, ratios to today's tab, growth exponents."""
    runs: dict[tuple[str, int], list[dict]] = {}
    for line in lines:
        runs.setdefault((line["name"], line["size"]), []).append(line)
    sizes = sorted({size for _, size in runs})
    names = ["virtualised", "paged", "all rows"]

    def median(name: str, size: int, key: str) -> float | None:
        values = [run[key] for run in runs[(name, size)] if run[key] is not None]
        return statistics.median(values) if values else None

    print(f"{'jobs':>6}  {'tab':<11} {'first render':>13} {'ratio':>7} {'elements':>9} "
          f"{'to the end':>11} {'elements':>9}  (median of {len(runs[(names[0], sizes[0])])}; min–max first render)")
    for size in sizes:
        base = median(names[0], size, "first")
        for name in names:
            first = median(name, size, "first")
            spread = [run["first"] for run in runs[(name, size)]]
            end = median(name, size, "end")
            end_elements = median(name, size, "endElements")
            to_end = "—" if end is None else f"{end:8.1f} ms"
            end_count = "—" if end_elements is None else f"{end_elements:.0f}"
            print(f"{size:>6}  {name:<11} {first:10.1f} ms {first / base:6.1f}x {median(name, size, 'elements'):9.0f} "
                  f"{to_end:>11} {end_count:>9}  ({min(spread):.1f}–{max(spread):.1f})")
    small, large = sizes[0], sizes[-1]
    for name in names:
        slope = math.log(median(name, large, "first") / median(name, small, "first")) / math.log(large / small)
        print(f"growth exponent of the first render, {name}: {slope:.2f}")


if __name__ == "__main__":
    sys.exit(main())
