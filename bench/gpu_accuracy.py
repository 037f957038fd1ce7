"""Betty's GPU memory estimates against published measurements, beside ``accelerate estimate-memory``.

Run it from the repository root::

    python bench/gpu_accuracy.py            # a table, then median and max absolute error, overall and per method
    python bench/gpu_accuracy.py --json     # the same as JSON

Each row of ``tests/data/gpu_measured_public.csv`` carries the measurement as published
(value, unit, source) and how Betty reads it: the ``betty gpu estimate`` options that
describe the run, what the number measures (``allocated``: PyTorch's or vLLM's own
accounting; ``device``: nvidia-smi, CUDA context included) and the value in GiB. Rows
whose settings were not published are listed as skipped, with the reason.

accelerate's method, as its ``estimate-memory`` command reports it: the weights alone for
inference; for training the largest of weights, gradients and optimizer step, which
comes to four times the model's size in the training dtype (int4 for QLoRA, int8, half
or float32), whatever the batch, sequence, adapters or sharding.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.gpu.estimate_options import job_options, request_from  # noqa: E402
from betty_jupyter.gpu import Estimate, estimate, resolve_model  # noqa: E402

DATA = ROOT / "tests" / "data" / "gpu_measured_public.csv"
GIB = 1024**3
ACCELERATE_BYTES = {"fp32": 4.0, "bf16-mixed": 2.0, "bf16": 2.0, "fp16": 2.0, "int8": 1.0, "nf4": 0.5}


@dataclass(frozen=True)
class Comparison:
    """One measured row next to Betty's prediction and accelerate's."""

    row_id: str
    model: str
    method: str
    setting: str
    measured_gib: float
    betty_gib: float
    accelerate_gib: float
    source: str

    @property
    def betty_error(self) -> float:
        """Betty's relative error (prediction / measurement − 1)."""
        return self.betty_gib / self.measured_gib - 1

    @property
    def accelerate_error(self) -> float:
        """accelerate's relative error."""
        return self.accelerate_gib / self.measured_gib - 1


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    """The measurement rows, as the CSV holds them."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def predicted_gib(result: Estimate, measure: str) -> float:
    """Betty's number for what the row measured: allocated memory, or the whole device."""
    return {"allocated": result.allocated_gib, "reserved": result.reserved_gib, "device": result.peak_gib}[measure]


def accelerate_gib(result: Estimate) -> float:
    """accelerate's estimate-memory for the same model and dtype (see the module docstring)."""
    size = result.params * ACCELERATE_BYTES[result.request.resolved_precision]
    return (4 * size if result.request.training else size) / GIB


def compare(rows: list[dict[str, str]]) -> tuple[list[Comparison], list[dict[str, str]]]:
    """(comparisons for rows with settings, skipped rows)."""
    parser = argparse.ArgumentParser(parents=[job_options()], add_help=False)
    done, skipped = [], []
    for row in rows:
        if not row["betty_args"]:
            skipped.append(row)
            continue
        args = parser.parse_args(["--model", row["betty_model"], *shlex.split(row["betty_args"])])
        result = estimate(resolve_model(args.model), request_from(args))
        setting = describe(result)
        done.append(Comparison(row["id"], row["betty_model"], method_of(result), setting, float(row["peak_gib"]),
                               predicted_gib(result, row["measure"]), accelerate_gib(result), row["source"]))
    return done, skipped


METHODS = ("inference", "full", "LoRA", "QLoRA", "multi-GPU")


def method_of(result: Estimate) -> str:
    """The method a row is summarised under: ``multi-GPU`` for any run on more than one GPU."""
    request = result.request
    if request.gpus > 1:
        return "multi-GPU"
    return {"lora": "LoRA", "qlora": "QLoRA"}.get(request.method, request.method)


def per_method(comparisons: list[Comparison]) -> dict[str, dict[str, float]]:
    """Rows, median and max absolute relative error of Betty's estimate for each method that has rows."""
    result = {}
    for method in METHODS:
        errors = [abs(c.betty_error) for c in comparisons if c.method == method]
        if errors:
            result[method] = {"rows": len(errors), "median": statistics.median(errors), "max": max(errors)}
    return result


def describe(result: Estimate) -> str:
    """A short description of the run: method, precision, batch × length and the switches that matter."""
    request = result.request
    words = [request.method, request.resolved_precision]
    if request.training:
        words.append(request.optimizer)
    words.append(f"{request.batch_size}x{request.seq_len}")
    if request.gpus > 1:
        words.append(f"{request.sharding} on {request.gpus} GPUs")
    switches = {"ckpt": request.grad_ckpt == "full", "compile": request.compiled, "chunked": request.chunked_loss,
                "opt-in-bwd": request.optimizer_in_backward, "act-offload": request.activation_offload,
                "eager": request.attention == "eager", "no-dq": request.method != "full" and not request.double_quant
                and request.resolved_precision == "nf4"}
    words += [name for name, on in switches.items() if on]
    return f"{request.framework}: " + " ".join(words)


def summary(comparisons: list[Comparison]) -> dict[str, float]:
    """Median and max absolute relative error for Betty and for accelerate's method."""
    betty = [abs(c.betty_error) for c in comparisons]
    accelerate = [abs(c.accelerate_error) for c in comparisons]
    return {
        "rows": len(comparisons),
        "betty_median": statistics.median(betty),
        "betty_max": max(betty),
        "accelerate_median": statistics.median(accelerate),
        "accelerate_max": max(accelerate),
    }


def render(comparisons: list[Comparison], skipped: list[dict[str, str]]) -> str:
    """The comparison as a text table with the summary under it."""
    lines = [f"{'id':>4}  {'model':<14} {'setting':<62} {'measured':>8} {'Betty':>7} {'err':>6} "
             f"{'accel.':>7} {'err':>6}"]
    for c in comparisons:
        lines.append(f"{c.row_id:>4}  {c.model:<14} {c.setting:<62} {c.measured_gib:>8.2f} {c.betty_gib:>7.2f} "
                     f"{c.betty_error:>+6.0%} {c.accelerate_gib:>7.2f} {c.accelerate_error:>+6.0%}")
    stats = summary(comparisons)
    lines.append(f"GiB per GPU, {stats['rows']} rows. Absolute error: Betty median {stats['betty_median']:.1%}, "
                 f"max {stats['betty_max']:.1%}; accelerate median {stats['accelerate_median']:.1%}, "
                 f"max {stats['accelerate_max']:.1%}")
    lines += [f"  {method:<10} {stats['rows']:>2} rows: median {stats['median']:.1%}, max {stats['max']:.1%}"
              for method, stats in per_method(comparisons).items()]
    lines += [f"skipped {row['id']} ({row['model']}, {row['method']}): {row['note']}" for row in skipped]
    return "\n".join(lines)


def render_markdown(comparisons: list[Comparison]) -> str:
    """The comparison as the Markdown table ``docs/gpu.md`` shows."""
    lines = ["| id | model | setting | measured | Betty | error | accelerate | error |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c.row_id} | {c.model} | {c.setting} | {c.measured_gib:.2f} | {c.betty_gib:.2f} | "
              f"{c.betty_error:+.0%} | {c.accelerate_gib:.2f} | {c.accelerate_error:+.0%} |" for c in comparisons]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the accuracy table (or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown table of docs/gpu.md")
    parser.add_argument("--data", type=Path, default=DATA, help="the measurements CSV")
    args = parser.parse_args(argv)
    comparisons, skipped = compare(load_rows(args.data))
    if args.markdown:
        print(render_markdown(comparisons))
    elif args.json:
        print(json.dumps({"summary": summary(comparisons), "per_method": per_method(comparisons),
                          "rows": [vars(c) for c in comparisons],
                          "skipped": [row["id"] for row in skipped]}, indent=2))
    else:
        print(render(comparisons, skipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
