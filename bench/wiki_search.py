"""`betty wiki list` and `betty wiki search WORD` on wikis of 100, 1,000 and 10,000 pages, against `grep`.

Run by hand (not a test), no cluster needed:
    python bench/wiki_search.py [--sizes 100 1000 10000] [--repeat 5] [--dir /tmp/betty-wiki-bench]

Writes each workspace once with Betty's own page writer (frontmatter as Betty renders it,
bodies with auto regions, like recorded experiments), then times each command as a whole
process, cold (no frontmatter cache in .betty/) and warm (the cache a previous run left),
paired with `grep -rli WORD wiki/` on the same tree; the median of ``--repeat`` runs each.
"search in-proc" is WikiStore.search in this process (as the agent's tool and the server call it).
Prints the times, the ratios to grep and the growth exponent of each column (the slope of
log(time) against log(pages) between the smallest and the largest size).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.wiki import WikiStore  # noqa: E402
from betty_jupyter.wiki.page import render_frontmatter  # noqa: E402

WORD = "diverged"
CACHE = "wiki-frontmatter.json"
_WORDS = ("loss", "learning rate", "warmup", "checkpoint", "epoch", "batch", "gradient", "tokens", "eval",
          "sweep", "lora", "llama", "shard", "node", "partition", "memory", "throughput", "seed")


def main() -> None:
    parser = argparse.ArgumentParser(description="betty wiki list/search against grep")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/betty-wiki-bench"))
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        workspace = args.dir / f"w{size}"
        if not (workspace / "wiki" / f"experiments/run-{size - 1:05d}.md").is_file():
            write_workspace(workspace, size)
        rows.append((size, measure(workspace, args.repeat)))
    columns = list(rows[0][1])
    print(f"{'pages':>6} " + " ".join(f"{name:>13}" for name in columns) + "   ratios to grep")
    for size, times in rows:
        ratios = "  ".join(f"{name} {times[name] / times['grep']:5.1f}x" for name in columns if name != "grep")
        print(f"{size:>6} " + " ".join(f"{times[name] * 1000:10.0f} ms" for name in columns) + f"   {ratios}")
    if len(rows) > 1:
        (small, first), (large, last) = rows[0], rows[-1]
        slopes = "  ".join(f"{name} {math.log(last[name] / first[name]) / math.log(large / small):.2f}"
                           for name in columns)
        print(f"growth exponent ({small} → {large} pages): {slopes}")


def write_workspace(workspace: Path, size: int) -> None:
    """A workspace whose wiki holds ``size`` pages: mostly experiments, some how-tos and notes."""
    shutil.rmtree(workspace, ignore_errors=True)
    (workspace / ".betty").mkdir(parents=True)
    wiki = workspace / "wiki"
    chance = random.Random(size)
    for number in range(size):
        kind = "experiment" if number % 10 else chance.choice(["howto", "note"])
        folder = "experiments" if kind == "experiment" else f"{kind}s"
        name = f"{folder}/run-{number:05d}.md" if kind == "experiment" else f"{folder}/page-{number:05d}.md"
        if number == size - 1:
            name, kind = f"experiments/run-{number:05d}.md", "experiment"
        frontmatter = {"name": f"run {number}: {' '.join(chance.sample(_WORDS, 3))}",
                       "description": f"{chance.choice(_WORDS)} sweep on the dev cluster, seed {number}",
                       "type": kind, "tags": chance.sample(["lora", "llama", "sweep", "bf16", "ablation"], 2)}
        if kind == "experiment":
            frontmatter.update(job_id=str(100000 + number), cluster="dev-cluster",
                               submitted=f"2026-{1 + number % 12:02d}-{1 + number % 28:02d}T10:31",
                               script=f"scripts/train_{number % 7}.sh",
                               notebook=f"notebooks/experiments/run-{number:05d}.ipynb")
        lines = [f"# Run {number}", "", "## Why", ""]
        lines += [" ".join(chance.choice(_WORDS) for _ in range(12)) + "." for _ in range(chance.randint(5, 25))]
        if chance.random() < 0.05:
            lines.append(f"The loss {WORD.capitalize()} after the warmup; lower the learning rate.")
        lines += ["", "<!-- betty:auto-start -->", "## Status", "", f"COMPLETED in {chance.randint(1, 90)} min",
                  "<!-- betty:auto-end -->", "", "## Notes", ""]
        page = wiki / name
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render_frontmatter(frontmatter) + "\n".join(lines) + "\n", encoding="utf-8")


def measure(workspace: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each command, runs interleaved so the machine's drift hits all alike."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    betty = [sys.executable, "-m", "betty_jupyter.cli", "wiki"]
    commands = {
        "grep": (["grep", "-rli", WORD, str(workspace / "wiki")], False),
        "list cold": ([*betty, "list", "--dir", str(workspace)], True),
        "list warm": ([*betty, "list", "--dir", str(workspace)], False),
        "search cold": ([*betty, "search", WORD, "--dir", str(workspace)], True),
        "search warm": ([*betty, "search", WORD, "--dir", str(workspace)], False),
    }
    store = WikiStore(workspace / "wiki")
    times: dict[str, list[float]] = {name: [] for name in [*commands, "search in-proc"]}
    for _ in range(repeat):
        for name, (command, cold) in commands.items():
            if cold:
                (workspace / ".betty" / CACHE).unlink(missing_ok=True)
            began = time.perf_counter()
            subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=name != "grep")
            times[name].append(time.perf_counter() - began)
        began = time.perf_counter()
        store.search(WORD)  # as the agent's wiki_search and the server run it: in a process already started
        times["search in-proc"].append(time.perf_counter() - began)
    return {name: statistics.median(values) for name, values in times.items()}


if __name__ == "__main__":
    main()
