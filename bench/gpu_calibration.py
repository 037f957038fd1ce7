"""The fast GPU estimate against the traced one, both against published measurements, and what a trace costs.

Run it from the repository root::

    python bench/gpu_calibration.py              # all three parts
    python bench/gpu_calibration.py --no-cost    # without timing traces (no torch needed then)
    python bench/gpu_calibration.py --json

1. Fast vs trace over the stored grid (``tests/data/gpu_trace_grid.csv``, made by
   ``bench/gpu_trace_grid.py``): the relative error of the fast estimate's ``peak_gib``
   (what a researcher sizes a job by: allocator slack and CUDA context included) and of
   its ``allocated_gib`` (``torch.cuda.max_memory_allocated``), median and worst.
2. Fast and traced estimates vs the published measurements of
   ``tests/data/gpu_measured_public.csv`` (the same rows as ``bench/gpu_accuracy.py``); a
   row is traced only when the trace runs its recipe, otherwise the reason is listed.
3. Trace cost: wall time and peak resident memory of one trace, each in a fresh process
   (imports included), for Llama-3.1-8B LoRA at 2 × 2048 and Llama-3.1-70B LoRA at 1 × 2048.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.errors import GpuEstimateError  # noqa: E402
from betty_jupyter.gpu import EstimateRequest, estimate, resolve_model  # noqa: E402
from betty_jupyter.gpu.estimate_options import job_options, request_from  # noqa: E402

GRID = ROOT / "tests" / "data" / "gpu_trace_grid.csv"
COST_JOBS = (("Llama-3.1-8B", "--method lora --batch-size 2 --seq-len 2048"),
             ("Llama-3.1-70B", "--method lora --batch-size 1 --seq-len 2048"))


@dataclass(frozen=True)
class GridPoint:
    """One traced job of the grid beside the fast estimate of the same job (GiB)."""

    row_id: str
    model: str
    betty_args: str
    traced_peak: float
    fast_peak: float
    traced_allocated: float
    fast_allocated: float

    @property
    def peak_error(self) -> float:
        """The fast peak's relative error against the traced peak."""
        return self.fast_peak / self.traced_peak - 1

    @property
    def allocated_error(self) -> float:
        """The fast allocated peak's relative error against the traced one."""
        return self.fast_allocated / self.traced_allocated - 1


def request_for(model: str, betty_args: str) -> EstimateRequest:
    """The request that ``betty gpu estimate --model MODEL BETTY_ARGS`` would make."""
    parser = argparse.ArgumentParser(parents=[job_options()], add_help=False)
    return request_from(parser.parse_args(["--model", model, *shlex.split(betty_args)]))


def load_grid(path: Path = GRID) -> list[dict[str, str]]:
    """The stored grid rows, traced and skipped."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def grid_points(rows: list[dict[str, str]]) -> list[GridPoint]:
    """Every traced row of the grid with the fast estimate beside it."""
    points = []
    for row in rows:
        if row["skipped"]:
            continue
        fast = estimate(resolve_model(row["model"]), request_for(row["model"], row["betty_args"]))
        points.append(GridPoint(row["id"], row["model"], row["betty_args"], float(row["peak_gib"]), fast.peak_gib,
                                float(row["allocated_gib"]), fast.allocated_gib))
    return points


def errors(values: list[float]) -> dict[str, float]:
    """Median and worst absolute relative error."""
    return {"median": statistics.median(abs(v) for v in values), "worst": max(abs(v) for v in values)}


def grid_summary(points: list[GridPoint]) -> dict[str, Any]:
    """Errors over the grid, overall and by method."""
    methods = sorted({request_for(p.model, p.betty_args).method for p in points})
    by_method = {method: [p for p in points if request_for(p.model, p.betty_args).method == method]
                 for method in methods}
    return {
        "points": len(points),
        "peak": errors([p.peak_error for p in points]),
        "allocated": errors([p.allocated_error for p in points]),
        "by_method": {method: {"points": len(chosen), "peak": errors([p.peak_error for p in chosen])}
                      for method, chosen in by_method.items()},
    }


def _accuracy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_accuracy", ROOT / "bench" / "gpu_accuracy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def published(trace: bool) -> dict[str, Any]:
    """Fast (and, where the trace runs the recipe, traced) estimates against the published rows."""
    accuracy = _accuracy()
    rows = [row for row in accuracy.load_rows() if row["betty_args"]]
    comparisons, _ = accuracy.compare(rows)
    result: dict[str, Any] = {"rows": len(comparisons), "fast": errors([c.betty_error for c in comparisons]),
                              "traced": [], "not_traced": {}}
    for row, comparison in zip(rows, comparisons):
        request = request_for(row["betty_model"], row["betty_args"])
        why = _refusal(row["betty_model"], request)
        if why or not trace:
            result["not_traced"][row["id"]] = why or "traces not run (--no-cost)"
            continue
        traced = _trace(row["betty_model"], request)
        value = {"allocated": traced.allocated_bytes / 2**30, "reserved": traced.reserved_bytes / 2**30,
                 "device": traced.peak_gib}[row["measure"]]
        result["traced"].append({"id": row["id"], "measured": comparison.measured_gib, "traced": value,
                                 "error": value / comparison.measured_gib - 1})
    if result["traced"]:
        result["traced_errors"] = errors([row["error"] for row in result["traced"]])
    return result


def _refusal(model: str, request: EstimateRequest) -> str:
    """Why the trace does not run this job ('' when it does, or when the trace is not installed)."""
    try:
        # lazy: the trace's torch imports are needed only to ask it
        from betty_jupyter.gpu.trace.model import check_traceable
    except ImportError:
        return "the trace extra is not installed"
    try:
        check_traceable(resolve_model(model), request.checked())
    except GpuEstimateError as error:
        return str(error)
    return ""


def _trace(model: str, request: EstimateRequest) -> Any:
    # lazy: the trace extra is needed only when rows are traced
    from betty_jupyter.gpu.trace import trace_estimate

    return trace_estimate(resolve_model(model), request)


def trace_cost(model: str, betty_args: str) -> dict[str, Any]:
    """Wall time and peak resident memory of one trace in a fresh process (imports included)."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[:1] + sys.argv[2:];"
              "import bench.gpu_calibration as c; from betty_jupyter.gpu.trace import trace_estimate;"
              "from betty_jupyter.gpu import resolve_model;"
              "t = trace_estimate(resolve_model(sys.argv[1]), c.request_for(sys.argv[1], sys.argv[2]));"
              "import resource; print(t.peak_gib, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script, str(ROOT), model, betty_args], capture_output=True,
                          text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - started
    peak, rss_kib = done.stdout.split()[-2:]  # ru_maxrss is in KiB on Linux
    return {"model": model, "betty_args": betty_args, "wall_s": round(wall, 2),
            "peak_rss_gib": round(int(rss_kib) / 2**20, 3), "traced_peak_gib": round(float(peak), 2)}


def render(report: dict[str, Any]) -> str:
    """The report as text."""
    grid = report["grid"]
    lines = [f"fast vs trace over {grid['points']} grid points: peak median {grid['peak']['median']:.1%}, "
             f"worst {grid['peak']['worst']:.1%}; allocated median {grid['allocated']['median']:.1%}, "
             f"worst {grid['allocated']['worst']:.1%}"]
    lines += [f"  {method:<10} {item['points']:>3} points: peak median {item['peak']['median']:.1%}, "
              f"worst {item['peak']['worst']:.1%}" for method, item in grid["by_method"].items()]
    lines += [f"  worst: {p['id']} {p['model']} {p['betty_args']}: fast {p['fast']:.2f} GiB, traced "
              f"{p['traced']:.2f} GiB ({p['error']:+.1%})" for p in grid["worst"]]
    pub = report["published"]
    lines.append(f"fast vs {pub['rows']} published rows: median {pub['fast']['median']:.1%}, "
                 f"worst {pub['fast']['worst']:.1%}")
    if pub.get("traced_errors"):
        lines.append(f"traced vs {len(pub['traced'])} published rows it runs: median "
                     f"{pub['traced_errors']['median']:.1%}, worst {pub['traced_errors']['worst']:.1%}")
    else:
        lines.append("traced vs published: no published row is a recipe the trace runs yet")
    reasons: dict[str, list[str]] = {}
    for row_id, why in pub["not_traced"].items():
        reasons.setdefault(why, []).append(row_id)
    lines += [f"  not traced ({', '.join(ids)}): {why}" for why, ids in reasons.items()]
    for cost in report.get("cost", []):
        lines.append(f"trace cost {cost['model']} {cost['betty_args']}: {cost['wall_s']:.1f} s, "
                     f"peak RSS {cost['peak_rss_gib']:.2f} GiB (traced peak {cost['traced_peak_gib']:.2f} GiB)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the calibration report (JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--no-cost", action="store_true", help="run no trace (grid and fast figures only)")
    parser.add_argument("--grid", type=Path, default=GRID, help="the traced grid CSV")
    args = parser.parse_args(argv)
    points = grid_points(load_grid(args.grid))
    worst = sorted(points, key=lambda p: -abs(p.peak_error))[:3]
    report: dict[str, Any] = {
        "grid": {**grid_summary(points), "worst": [
            {"id": p.row_id, "model": p.model, "betty_args": p.betty_args, "fast": p.fast_peak,
             "traced": p.traced_peak, "error": p.peak_error} for p in worst]},
        "published": published(trace=not args.no_cost),
    }
    if not args.no_cost:
        report["cost"] = [trace_cost(model, betty_args) for model, betty_args in COST_JOBS]
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
