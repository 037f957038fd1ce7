"""Trace a grid of jobs once and store what the trace measured: the data the fast estimate is calibrated on.

Run it from the repository root, with the ``trace`` extra installed (it takes a few
minutes; nothing else ever runs it — tests and benchmarks read the stored file)::

    nice python bench/gpu_trace_grid.py                 # trace every point, rewrite the file
    nice python bench/gpu_trace_grid.py --missing       # trace only points the file lacks or had to skip

The grid spans the catalog's dense decoder models (Llama 2/3, Mistral, Qwen2, Gemma 2,
Phi-3; 1B to 72B) × method (inference, full fine-tuning, LoRA, QLoRA) × precision (fp32,
bf16-mixed, bf16, fp16, nf4) × micro-batch × sequence × checkpointing × attention kernel ×
optimizer, as a fixed list of recipes per model whose batch × sequence rotate, so that
every recipe is seen at several sizes without tracing the whole product. A few jobs
beyond that follow (int8 weights, mixture-of-experts, several GPUs). A job the trace
refuses is stored with the trace's one-line reason, and ``--missing`` traces it once the
trace learns to.

Each row of ``tests/data/gpu_trace_grid.csv`` holds the job (``model`` and the exact
``betty gpu estimate`` options in ``betty_args``), the traced allocated, reserved and
whole-device peaks, the traced breakdown at the peak (GiB), where the peak happens, the
versions of torch, transformers and peft that ran it, how long it took, and the
command that made it.
"""

from __future__ import annotations

import argparse
import csv
import gc
import shlex
import sys
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.errors import GpuEstimateError  # noqa: E402
from betty_jupyter.gpu import resolve_model  # noqa: E402
from betty_jupyter.gpu.estimate_options import job_options, request_from  # noqa: E402
from betty_jupyter.gpu.trace import EXTRA  # noqa: E402

DATA = ROOT / "tests" / "data" / "gpu_trace_grid.csv"
GIB = 1024**3
BREAKDOWN = ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "quantization", "allocator",
             "runtime")
FIELDS = ("id", "model", "betty_args", "allocated_gib", "reserved_gib", "peak_gib",
          *(f"{name}_gib" for name in BREAKDOWN), "peak_phase", "peak_module", "peak_op",
          "torch", "transformers", "peft", "trace_seconds", "produced_by", "skipped")

MODELS = ("Llama-3.2-1B", "Llama-3.2-3B", "Phi-3-mini", "Llama-2-7B", "Mistral-7B", "Qwen2.5-7B", "Llama-3.1-8B",
          "Gemma-2-9B", "Llama-2-13B", "CodeLlama-34B", "Llama-3.1-70B", "Qwen2.5-72B")
# One recipe: method, precision and the switches that change memory; batch × sequence are added per point.
RECIPES = (
    "--method lora --precision bf16-mixed",
    "--method lora --precision bf16-mixed --grad-ckpt full --lora-rank 64 --lora-targets all-linear",
    "--method lora --precision bf16 --lora-rank 8 --lora-targets all-linear",
    "--method lora --precision fp16 --grad-ckpt full --lora-targets q_proj,k_proj,v_proj,o_proj",
    "--method lora --precision bf16-mixed --attention eager",
    "--method full --precision bf16-mixed",
    "--method full --precision bf16-mixed --grad-ckpt full",
    "--method full --precision bf16 --grad-ckpt full --optimizer sgd",
    "--method full --precision fp32 --attention eager",
    "--method full --precision bf16 --optimizer adamw",
    "--method inference --precision bf16",
    "--method inference --precision fp16 --attention eager",
    "--method inference --precision fp32",
    "--method qlora",
    "--method qlora --grad-ckpt full --lora-targets all-linear",
    "--method inference --precision nf4",
)
SIZES = ((1, 512), (2, 1024), (4, 2048), (1, 4096), (8, 512), (2, 4096), (1, 2048), (4, 1024), (1, 8192))
# Jobs beyond one GPU and a dense model: int8 weights, mixture of experts, several GPUs. A job the trace
# refuses is kept in the file with the reason, and traced by --missing once the trace runs it.
BEYOND = (
    ("Llama-3.1-8B", "--method qlora --batch-size 2 --seq-len 2048 --lora-targets all-linear"),
    ("Llama-2-13B", "--method qlora --batch-size 1 --seq-len 4096 --grad-ckpt full"),
    ("Llama-3.1-8B", "--method inference --precision nf4 --batch-size 1 --seq-len 4096"),
    ("Llama-2-7B", "--method lora --precision int8 --batch-size 2 --seq-len 1024"),
    ("Mixtral-8x7B", "--method lora --precision bf16 --batch-size 1 --seq-len 2048"),
    ("Mixtral-8x7B", "--method inference --precision bf16 --batch-size 1 --seq-len 4096"),
    ("Llama-3.1-8B", "--method full --precision bf16-mixed --batch-size 2 --seq-len 4096 --gpus 8 --sharding fsdp "
                     "--grad-ckpt full"),
    ("Llama-3.1-70B", "--method lora --batch-size 1 --seq-len 4096 --gpus 4 --sharding fsdp --grad-ckpt full"),
)


def grid() -> Iterator[tuple[str, str]]:
    """Every point as (model, ``betty gpu estimate`` options), in a fixed order."""
    for m, model in enumerate(MODELS):
        large = model.endswith(("34B", "70B", "72B"))
        for r, recipe in enumerate(RECIPES):
            batch, seq = SIZES[(m + 2 * r) % len(SIZES)]
            if large and "--method full" in recipe and "--grad-ckpt" not in recipe:
                batch, seq = 1, min(seq, 2048)  # keeps each point a job someone would size
            yield model, f"{recipe} --batch-size {batch} --seq-len {seq}"
    yield from BEYOND


def versions() -> dict[str, str]:
    """The versions of the packages the trace runs."""
    # lazy: the trace extra is needed only when points are traced
    import peft
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}


def trace_point(model: str, betty_args: str, produced_by: str) -> dict[str, str]:
    """One row of the file: the traced job, or why the trace does not run it."""
    # lazy: the trace extra is needed only when points are traced
    from betty_jupyter.gpu.trace import trace_estimate

    parser = argparse.ArgumentParser(parents=[job_options()], add_help=False)
    request = request_from(parser.parse_args(["--model", model, *shlex.split(betty_args)]))
    row = {"model": model, "betty_args": betty_args, "produced_by": produced_by, **versions()}
    started = time.perf_counter()
    try:
        traced = trace_estimate(resolve_model(model), request)
    except GpuEstimateError as error:
        return {**row, "skipped": str(error)}
    row["trace_seconds"] = f"{time.perf_counter() - started:.2f}"
    breakdown = traced.breakdown_gib()
    row.update({f"{name}_gib": f"{breakdown[name]:.4f}" for name in BREAKDOWN})
    row.update(allocated_gib=f"{traced.allocated_bytes / GIB:.4f}", reserved_gib=f"{traced.reserved_bytes / GIB:.4f}",
               peak_gib=f"{traced.peak_gib:.4f}", peak_phase=traced.peak_phase, peak_module=traced.peak_module,
               peak_op=traced.peak_op)
    return row


def load(path: Path = DATA) -> list[dict[str, str]]:
    """The stored rows (empty when there is no file yet)."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write(rows: list[dict[str, str]], path: Path = DATA) -> None:
    """Store ``rows`` in grid order, numbered from 1."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for number, row in enumerate(rows, start=1):
            writer.writerow({name: row.get(name, "") for name in FIELDS} | {"id": str(number)})


def main(argv: list[str] | None = None) -> int:
    """Trace the grid (or its missing points) and rewrite the file, telling progress on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="trace only points the file lacks or had to skip")
    parser.add_argument("--data", type=Path, default=DATA, help="the grid file to write")
    args = parser.parse_args(argv)
    try:
        versions()
    except ImportError:
        print(f"gpu_trace_grid: {EXTRA}", file=sys.stderr)
        return 2
    produced_by = "python bench/gpu_trace_grid.py" + (" --missing" if args.missing else "")
    stored = {(row["model"], row["betty_args"]): row for row in load(args.data)} if args.missing else {}
    points = list(grid())
    rows = []
    for number, (model, betty_args) in enumerate(points, start=1):
        kept = stored.get((model, betty_args))
        if kept is not None and not kept["skipped"]:
            rows.append(kept)
            continue
        row = trace_point(model, betty_args, produced_by)
        gc.collect()
        outcome = f"skipped: {row['skipped']}" if row.get("skipped") else \
            f"{row['allocated_gib']} GiB allocated, {row['trace_seconds']} s"
        print(f"[{number}/{len(points)}] {model} {betty_args}: {outcome}", file=sys.stderr, flush=True)
        rows.append(row)
        write(rows + [stored[key] for key in points[number:] if key in stored], args.data)  # progress survives a stop
    write(rows, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
