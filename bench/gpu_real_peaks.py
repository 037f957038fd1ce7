"""Run points of the traced grid for real on a GPU, and store what the GPU's allocator and ``nvidia-smi`` said.

Run it from the repository root on a machine with a CUDA GPU, PyTorch, transformers and peft
(nothing else of Betty's dependencies is needed)::

    python bench/gpu_real_peaks.py                      # every runnable point, smallest first
    python bench/gpu_real_peaks.py --deadline 300       # stop starting points after 300 s
    python bench/gpu_real_peaks.py --ids 1 2 7          # these rows of the grid file
    python bench/gpu_real_peaks.py --missing            # only the points the file does not hold yet

Each point is a row of ``tests/data/gpu_trace_grid.csv`` (model and ``betty gpu estimate``
options). The model is built exactly as the trace builds it (:func:`~betty_jupyter.gpu.trace.model.config_for`:
the same transformers class and shape; LoRA adapters through peft on the same modules), with
random weights, on the GPU, with the attention kernel the point names (``flash``: PyTorch's
scaled-dot-product attention, which takes its flash kernel for half precision on a recent
GPU; ``eager``: transformers' own). It then runs the step the trace runs
(:mod:`~betty_jupyter.gpu.trace.step`): training makes the optimizer's states with a step on
zero gradients, then the allocator's peak is reset and one micro-batch runs forward with
labels, backward and the optimizer step under CUDA autocast where the precision asks for it;
inference prefills the prompt (logits for its last token only) and decodes with the KV cache.

Stored per point (``tests/data/gpu_real_peaks.csv``): ``torch.cuda.max_memory_allocated()`` and
``max_memory_reserved()`` over the measured step, the device's used memory before the point
(the CUDA context and libraries), and the highest used memory that Betty's own job sampler
(:data:`betty_jupyter.gpu.measured.SAMPLER`, the real ``nvidia-smi``) saw during the point,
with the GPU's name and the versions that ran. Points the GPU stack here cannot run as the
trace describes them (quantized weights need bitsandbytes; several GPUs; selective
checkpointing, compile and the other stack-specific switches; mixture-of-experts routing) are
left out; a point that fails is kept with its one-line reason. (The 55 points stored were
measured while the sampler still ran one looping ``nvidia-smi -lms``, which delivered no reading
in ten seconds: their sampler columns are 0, and that finding is why it now runs one query per
reading.) ``tests/test_gpu_real_peaks.py``
compares the trace and the fast estimate with these numbers.
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.gpu import resolve_model  # noqa: E402
from betty_jupyter.gpu.estimate_options import job_options, request_from  # noqa: E402
from betty_jupyter.gpu.measured import SAMPLER, parse_peak_file, peak_file  # noqa: E402
from betty_jupyter.gpu.request import EstimateRequest  # noqa: E402

GRID = ROOT / "tests" / "data" / "gpu_trace_grid.csv"
DATA = ROOT / "tests" / "data" / "gpu_real_peaks.csv"
GIB = 1024**3
MIB = 1024**2
DEVICE = "cuda"  # the smoke check in this module's test runs it on "cpu"
FITS_GIB = 120.0  # points the trace puts above this are left out: an H100/H200 keeps a margin for the context
LEFT_OUT = ("--gpus", "--compile", "--chunked-loss", "--offload", "--optimizer-in-backward", "--grad-ckpt op",
            "--grad-ckpt layer", "--grad-ckpt selective", "--framework", "--kv-dtype", "--grad-accum")
FIELDS = ("grid_id", "model", "betty_args", "gpu", "allocated_gib", "reserved_gib", "context_gib",
          "sampler_peak_gib", "sampler_samples", "build_seconds", "step_seconds", "torch", "transformers", "peft",
          "produced_by", "skipped")


def runnable(row: dict[str, str]) -> str:
    """Why ``row`` is left out here ('' when it runs): see the module docstring."""
    args = row["betty_args"]
    if row["skipped"]:
        return "the trace skipped it"
    if "nf4" in args or "int8" in args or "qlora" in args:
        return "quantized weights need bitsandbytes"
    if row["model"].startswith("Mixtral"):
        return "mixture-of-experts routing depends on the tokens"
    if row["model"].startswith("Gemma-2") and "--attention eager" not in args:
        return "transformers has no SDPA attention for Gemma 2 (and flash-attn is a separate build)"
    if any(switch in args for switch in LEFT_OUT):
        return "a switch this bench does not reproduce"
    if float(row["peak_gib"]) > FITS_GIB:
        return f"the trace puts it above {FITS_GIB:.0f} GiB"
    return ""


def request_of(row: dict[str, str]) -> EstimateRequest:
    """The request ``row``'s options describe, parsed as ``betty gpu estimate`` parses them."""
    parser = argparse.ArgumentParser(parents=[job_options()], add_help=False)
    return request_from(parser.parse_args(["--model", row["model"], *shlex.split(row["betty_args"])]))


def build(row: dict[str, str], request: EstimateRequest) -> Any:
    """The point's model on the GPU, as the trace builds it but with the GPU's real attention kernel."""
    import torch
    from transformers import AutoModelForCausalLM

    from peft import LoraConfig, get_peft_model

    from betty_jupyter.gpu.trace.model import Precision, config_for

    arch = resolve_model(row["model"])
    config = config_for(arch, "sdpa" if request.attention == "flash" else "eager")
    with torch.device(DEVICE):
        model: Any = AutoModelForCausalLM.from_config(config, dtype=Precision.of(request).weights)
        if request.grad_ckpt == "full" and request.training:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if request.adapters:
            model = get_peft_model(model, LoraConfig(
                r=request.lora_rank, lora_alpha=2 * request.lora_rank, lora_dropout=0.0,
                target_modules=list(arch.lora_modules(request.lora_targets)), task_type="CAUSAL_LM"))
    if request.training and not request.adapters:
        model.requires_grad_(True)
    model.train(request.training)
    return model


def step(model: Any, request: EstimateRequest) -> None:
    """The measured step (see the module docstring); the allocator's peak is reset where the trace's peak starts."""
    import torch

    from betty_jupyter.gpu.trace.model import Precision
    from betty_jupyter.gpu.trace.step import DECODE_STEPS, cache_argument, cache_of

    autocast = Precision.of(request).autocast
    cast = torch.autocast(DEVICE, dtype=autocast) if autocast is not None else nullcontext()
    if not request.training:
        prompt = max(1, request.seq_len - DECODE_STEPS)
        _settle(reset=True)
        with torch.no_grad():
            output = model(input_ids=torch.zeros((request.batch_size, prompt), dtype=torch.long, device=DEVICE),
                           use_cache=True, logits_to_keep=1)
            cache = cache_of(output)
            del output
            for _ in range(request.seq_len - prompt):
                tokens = torch.zeros((request.batch_size, 1), dtype=torch.long, device=DEVICE)
                output = model(input_ids=tokens, use_cache=True, **{cache_argument(model): cache})
                del output
        _settle()
        return
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer: torch.optim.Optimizer = (
        torch.optim.SGD(trainable, lr=1e-4, momentum=0.9, foreach=True) if request.optimizer == "sgd"
        else torch.optim.AdamW(trainable, lr=1e-4, foreach=True))
    for parameter in trainable:
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _settle(reset=True)
    tokens = torch.zeros((request.batch_size, request.seq_len), dtype=torch.long, device=DEVICE)
    with cast:
        loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _settle()


def _settle(reset: bool = False) -> None:
    """Wait for the GPU's queued work; with ``reset``, start the allocator's peak from what is live now."""
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()
        if reset:
            torch.cuda.reset_peak_memory_stats()


class Sampler:
    """Betty's job sampler (the real ``nvidia-smi``) running in the background for one point."""

    def __init__(self, name: str, folder: Path) -> None:
        self.file = folder / peak_file(name)
        env = {**os.environ, "SLURM_JOB_ID": name}
        self.process = subprocess.Popen(["bash", "-c", SAMPLER + "wait\n"], cwd=folder, env=env,
                                        start_new_session=True)

    def stop(self) -> tuple[float, int]:
        """The highest used memory it saw (GiB) and how many samples it took, once it has at least two."""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            seen = parse_peak_file(self.file.read_text()) if self.file.exists() else None
            if seen is not None and seen.samples >= 2:
                break
            time.sleep(0.1)
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait()
        seen = parse_peak_file(self.file.read_text()) if self.file.exists() else None
        return (seen.peak_mib * MIB / GIB, seen.samples) if seen else (0.0, 0)


def measure(row: dict[str, str], folder: Path) -> dict[str, str]:
    """One stored row: the point measured, or the one-line reason it failed."""
    import torch

    out = {"grid_id": row["id"], "model": row["model"], "betty_args": row["betty_args"],
           "gpu": torch.cuda.get_device_name(), **versions()}
    free, total = torch.cuda.mem_get_info()
    out["context_gib"] = f"{(total - free) / GIB:.4f}"
    sampler = Sampler(f"grid{row['id']}", folder)
    model = None
    try:
        request = request_of(row)
        started = time.perf_counter()
        model = build(row, request)
        _settle()
        out["build_seconds"] = f"{time.perf_counter() - started:.2f}"
        started = time.perf_counter()
        step(model, request)
        out["step_seconds"] = f"{time.perf_counter() - started:.2f}"
        out["allocated_gib"] = f"{torch.cuda.max_memory_allocated() / GIB:.4f}"
        out["reserved_gib"] = f"{torch.cuda.max_memory_reserved() / GIB:.4f}"
    except Exception as error:  # one point's failure (out of memory, a family this transformers lacks) is kept
        out["skipped"] = " ".join(f"{type(error).__name__}: {error}".split())[:200]
    finally:
        peak, samples = sampler.stop()
        out.update(sampler_peak_gib=f"{peak:.4f}", sampler_samples=str(samples))
        del model
        gc.collect()
        torch.cuda.empty_cache()
    return out


def versions() -> dict[str, str]:
    """The versions of the packages that ran the points."""
    import peft
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}


def points(grid: list[dict[str, str]], ids: list[str]) -> list[dict[str, str]]:
    """The rows to run: ``ids`` in order, or every runnable row, spread over sizes (:func:`spread`)."""
    if ids:
        by_id = {row["id"]: row for row in grid}
        return [by_id[i] for i in ids]
    return spread(sorted((row for row in grid if not runnable(row)), key=lambda row: float(row["peak_gib"])))


def spread(items: list[dict[str, str]]) -> list[dict[str, str]]:
    """``items`` reordered so that every prefix spans them evenly (the van der Corput sequence over their
    positions): a run stopped by its deadline has measured small and large points alike."""
    order: list[int] = []
    k = 0
    while len(order) < len(items):
        fraction, scale, rest = 0.0, 1.0, k
        while rest:
            scale /= 2
            fraction += (rest & 1) * scale
            rest >>= 1
        position = int(fraction * len(items))
        if position not in order:
            order.append(position)
        k += 1
    return [items[position] for position in order]


def load(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file (empty when there is none)."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write(rows: list[dict[str, str]], path: Path) -> None:
    """Store ``rows`` in grid order."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in sorted(rows, key=lambda r: int(r["grid_id"])):
            writer.writerow({name: row.get(name, "") for name in FIELDS})


def main(argv: list[str] | None = None) -> int:
    """Measure the points (until the deadline) and write the file after each, telling progress on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", default=[], help="grid rows to run (default: every runnable one)")
    parser.add_argument("--deadline", type=float, default=0, help="start no point after this many seconds")
    parser.add_argument("--out", type=Path, default=DATA, help="the file to write (rows already there are kept)")
    parser.add_argument("--missing", action="store_true", help="run only the points the file does not hold yet")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_real_peaks: no CUDA GPU here", file=sys.stderr)
        return 2
    started = time.monotonic()
    kept = {row["grid_id"]: row for row in load(args.out)}
    chosen = [row for row in points(load(GRID), args.ids) if not (args.missing and row["id"] in kept)]
    with tempfile.TemporaryDirectory() as folder:
        for number, row in enumerate(chosen, start=1):
            if args.deadline and time.monotonic() - started > args.deadline:
                print(f"deadline: {len(chosen) - number + 1} points not started", file=sys.stderr)
                break
            result = measure(row, Path(folder))
            kept[row["id"]] = result
            write(list(kept.values()), args.out)
            print(f"[{number}/{len(chosen)}] {row['model']} {row['betty_args']}: "
                  f"{result.get('skipped') or result['allocated_gib'] + ' GiB allocated (trace ' + row['allocated_gib'] + ')'}",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
