"""`betty jobs` from the terminal against the same `squeue` over plain `ssh`, and `betty ask`'s exit.

Run by hand (not a test), with the dev cluster up:
    .venv/bin/python bench/cli_start.py [--sizes 10 1000 19000] [--runs 7] [--no-ask]
(from the checkout it times: `python -m` puts the working directory first on the path)

For each queue size it holds that many jobs in the queue (it submits held jobs up to that many, counting the
queue as it is: the dev cluster is shared), then times whole processes in pairs, one after
the other: `betty jobs` (a fresh Python, the SSH login, squeue, the table) and the baseline, the same
`squeue --format …` through `ssh -F <dev ssh config> betty-dev`. It prints the medians, the median of
the pairs' ratios and the growth exponent, then which heavy modules the read loaded and what its
imports cost (`python -X importtime`). Last, `betty ask` answers a scripted model: the time from its
`done` event to the process's end, with Betty's prompt exit and with the interpreter's ordinary
teardown (the same command through `sys.exit(main())`), paired. It cancels exactly the jobs it submitted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from betty_jupyter.cluster import parsing  # noqa: E402

BETTY = [sys.executable, "-m", "betty_jupyter.cli"]
HEAVY = ("pandas", "numpy", "openai", "matplotlib", "pydantic")


def timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {done.stderr.strip()[-300:]}")
    return time.perf_counter() - began


def paired(first: list[str], second: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    """Median seconds of each, and the median of the per-pair ratios, after one warm-up pair."""
    timed(first, env), timed(second, env)
    a, b = [], []
    for _ in range(runs):
        a.append(timed(first, env))
        b.append(timed(second, env))
    return statistics.median(a), statistics.median(b), statistics.median(x / y for x, y in zip(a, b))


def slope(sizes: list[int], times: list[float]) -> float:
    return math.log(times[-1] / times[0]) / math.log(sizes[-1] / sizes[0])


def imports(env: dict[str, str], runs: int) -> tuple[float, int, list[str]]:
    """What `betty jobs` imports: seconds (the top-level imports' cumulative time, median of ``runs``),
    modules, heavy ones."""
    seconds = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", *BETTY[1:], "jobs"], env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")][1:]
        seconds.append(sum(int(row[1]) for row in rows if row[2].startswith(" ") and not row[2].startswith("  ")))
    names = {row[2].strip().split(".")[0] for row in rows}
    return statistics.median(seconds) / 1e6, len(rows), sorted(names & set(HEAVY))


def ask_exit(env: dict[str, str], runs: int) -> None:
    from llm_server import ScriptedLLM, say  # the project's scripted OpenAI-compatible server

    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        subprocess.run([*BETTY, "init", str(project)], check=True, capture_output=True, env=env)
        with ScriptedLLM([say("hello")] * (2 * runs + 2)) as llm:
            config = json.loads(Path(env["BETTY_CONFIG"]).read_text())
            config["BettyConfig"]["llm"] = {"base_url": llm.base_url, "model": "scripted"}
            path = Path(scratch) / "betty.json"
            path.write_text(json.dumps(config))
            ask_env = {**env, "BETTY_CONFIG": str(path)}
            words = ["ask", "hi", "--json", "--approve", "never", "--dir", str(project)]
            prompt = [*BETTY, *words]
            ordinary = [sys.executable, "-c", "import sys; from betty_jupyter.cli import main; sys.exit(main())",
                        *words]
            after = {"prompt exit": [], "ordinary exit": []}
            for _ in range(runs + 1):
                for name, argv in (("prompt exit", prompt), ("ordinary exit", ordinary)):
                    after[name].append(_after_done(argv, ask_env))
            print(f"\n`betty ask` with a scripted model, from its `done` event to the process's end "
                  f"(median of {runs}, paired)")
            for name, times in after.items():
                print(f"  {name:<14} {statistics.median(times[1:]) * 1000:7.0f} ms")


def _after_done(argv: list[str], env: dict[str, str]) -> float:
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    done = None
    for line in process.stdout:
        if json.loads(line).get("type") == "done":
            done = time.perf_counter()
    process.wait()
    if done is None or process.returncode != 0:
        raise SystemExit(f"betty ask ended with {process.returncode} and no done event")
    return time.perf_counter() - done


def main() -> None:
    parser = argparse.ArgumentParser(description="betty jobs against ssh squeue; betty ask's exit")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 19000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-ask", action="store_true", help="leave out betty ask's exit")
    args = parser.parse_args()
    cluster = json.loads(subprocess.run([*BETTY, "dev-cluster", "env", "--json"], capture_output=True, text=True,
                                        check=True).stdout)
    env = {**os.environ, **cluster}
    ssh = ["ssh", "-F", cluster["BETTY_DEV_SSH_CONFIG"], cluster["BETTY_DEV_SSH_HOST"]]
    squeue = [*ssh, "squeue", "--noheader", "--format", f"'{parsing.format_string(parsing.SQUEUE_FIELDS)}'"]
    submitted: list[str] = []
    betty_times = []
    print(f"{'jobs':>6} {'betty jobs':>11} {'ssh squeue':>11} {'ratio':>6}   (medians of {args.runs} pairs)")
    try:
        for size in sorted(args.sizes):
            queued = len(subprocess.run([*ssh, "squeue", "--noheader", "--format=%i"], capture_output=True, text=True,
                                        env=env, check=True).stdout.split())
            loop = (f"for i in $(seq {max(0, size - queued)}); do sbatch --hold --parsable --job-name=betty-bench "
                    "--output=/dev/null --wrap true || exit 1; done")
            made = subprocess.run([*ssh, loop], capture_output=True, text=True, env=env)
            submitted += [line.split(";")[0] for line in made.stdout.split()]
            if made.returncode != 0:
                raise SystemExit(f"submitting failed: {made.stderr.strip()}")
            betty, plain, ratio = paired([*BETTY, "jobs"], squeue, env, args.runs)
            betty_times.append(betty)
            print(f"{max(size, queued):6d} {betty * 1000:8.0f} ms {plain * 1000:8.0f} ms {ratio:5.2f}x")
        sizes = sorted(args.sizes)
        if len(sizes) > 1:
            print(f"growth exponent of betty jobs ({sizes[0]} → {sizes[-1]} jobs): {slope(sizes, betty_times):.2f}")
        seconds, count, heavy = imports(env, args.runs)
        print(f"\nthe read's imports (python -X importtime, median): {seconds * 1000:.0f} ms, {count} modules; "
              f"heavy ones loaded: {', '.join(heavy) or 'none'}")
    finally:
        for start in range(0, len(submitted), 500):
            subprocess.run([*ssh, "scancel", *submitted[start:start + 500]], capture_output=True, env=env)
    if not args.no_ask:
        ask_exit(env, args.runs)


if __name__ == "__main__":
    main()
