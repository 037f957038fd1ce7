"""The first `%betty gpu` in a new kernel: an estimate shown with its chart, and the calculator.

Run by hand (not a test); no cluster is needed (an estimate is computed in the kernel):
    .venv/bin/python bench/notebook_gpu.py [--fresh 5]

In --fresh new kernels each, interleaved, it times the cell that only computes the estimate
(`from betty_jupyter.gpu import estimate`, the baseline: what any display of it must pay),
the first `%betty gpu … --gpu a100-80gb` (the breakdown and its chart) and the first
`%betty gpu calculator`, and prints the medians, their ratio to the baseline and which heavy
modules the shown estimate imported. The cost is a fixed start-up cost (one chart per cell),
so there is no size to grow.

For a whole-process comparison (farm-bench), `--one-cell CODE` starts a new kernel in a
temporary folder and runs one cell:
    farm-bench -n 5 --vs "python bench/notebook_gpu.py --one-cell 'from betty_jupyter.gpu import estimate
    estimate(\"Llama-3.1-8B\", method=\"lora\")'" -- python bench/notebook_gpu.py --one-cell '%load_ext betty_jupyter
    %betty gpu --model Llama-3.1-8B --method lora --gpu a100-80gb'
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from kernel_driver import Kernel  # noqa: E402
from timing import timed_cell  # noqa: E402

CASES = {
    "estimate only": "from betty_jupyter.gpu import estimate\nestimate('Llama-3.1-8B', method='lora').peak_gib",
    "%betty gpu --gpu": "%load_ext betty_jupyter\n%betty gpu --model Llama-3.1-8B --method lora --gpu a100-80gb",
    "%betty gpu calculator": "%load_ext betty_jupyter\n%betty gpu calculator",
}
HEAVY = ("matplotlib", "PIL", "numpy", "pandas", "openai")


def main() -> None:
    parser = argparse.ArgumentParser(description="the first %betty gpu in a new kernel")
    parser.add_argument("--fresh", type=int, default=5)
    parser.add_argument("--one-cell", metavar="CODE", help="run CODE in a new kernel, then stop")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="betty-bench-gpu-"))
    env = dict(os.environ)
    if args.one_cell:
        kernel = Kernel(root, env)
        try:
            timed_cell(kernel, args.one_cell)
        finally:
            kernel.close()
        return
    times: dict[str, list[float]] = {name: [] for name in CASES}
    modules = ""
    for _ in range(args.fresh):
        for name, code in CASES.items():
            kernel = Kernel(root, env)
            try:
                kernel.run("import sys")  # the kernel is up and answering before the clock starts
                times[name].append(timed_cell(kernel, code))
                if name == "%betty gpu --gpu":
                    modules = kernel.run(f"sorted(m for m in {HEAVY!r} if m in sys.modules)").text
            finally:
                kernel.close()
    base = statistics.median(times["estimate only"])
    print(f"first cell in a new kernel (median of {args.fresh}):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median * 1000:8.0f} ms  {median / base:6.2f}x estimate only"
              f"   (min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})")
    print(f"  imported by %betty gpu --gpu: {modules}")


if __name__ == "__main__":
    main()
