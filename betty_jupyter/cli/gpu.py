"""``betty gpu estimate|models|advise``: GPU memory before a job is sized.

Other tools script these commands, so their options and the ``--json`` fields are kept
stable: ``peak_gib`` (per GPU), ``breakdown`` (name → GiB), ``params`` and, with
``--gpu``, ``fits``.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..gpu import Estimate, GpuType
    from ..gpu.request import EstimateRequest

_EXTRA = "stack-specific switches"


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty gpu`` and its actions."""
    from .parser import Parser

    gpu = commands.add_parser(
        "gpu", help="estimate GPU memory for a model and say where it fits",
        description="Estimate peak GPU memory per GPU for inference or fine-tuning, and advise on GPUs.",
    )
    gpu.set_defaults(run=run)
    actions = gpu.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    job = job_options()
    estimate = actions.add_parser("estimate", parents=[job], help="peak memory per GPU, as a breakdown")
    estimate.add_argument("--gpu", metavar="TYPE", help="say whether it fits on this GPU type (e.g. a100-80gb)")
    estimate.add_argument("--json", action="store_true", help="one JSON object for scripts")
    models = actions.add_parser("models", help="list the built-in model catalog")
    models.add_argument("--json", action="store_true", help="one JSON array for scripts")
    advise = actions.add_parser("advise", parents=[job], help="where it fits, and what to change when it does not")
    advise.add_argument("--partitions", nargs="+", metavar="NAME=GRES", default=[],
                        help="partitions as name=gres, e.g. gpu=gpu:a100:4,gpu:h100:2 (as sinfo prints GRES)")
    advise.add_argument("--cluster", metavar="NAME", nargs="?", const="", default=None,
                        help="read the partitions from a configured cluster (no NAME: the default cluster)")
    advise.add_argument("--gpu-types", nargs="+", metavar="TYPE[=GIB]", default=[],
                        help="GPU types to consider, e.g. a100-80gb h100 mygpu=48")
    advise.add_argument("--gpu", metavar="TYPE", help="report the largest batch and context on this GPU type")
    advise.add_argument("--json", action="store_true", help="one JSON object for scripts")


def job_options() -> argparse.ArgumentParser:
    """The options that describe one job, shared by ``estimate`` and ``advise``."""
    from ..gpu.profiles import PROFILES
    from ..gpu.request import (ATTENTION, CHECKPOINTING, KV_DTYPES, METHODS, OFFLOAD, OPTIMIZERS, PRECISIONS,
                               SHARDING)

    job = argparse.ArgumentParser(add_help=False)
    job.add_argument("--model", required=True, help="catalog name (see `betty gpu models`) or path to a config.json")
    job.add_argument("--method", required=True, choices=METHODS)
    job.add_argument("--precision", choices=PRECISIONS, help="default: the framework's (hf: bf16-mixed)")
    job.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    job.add_argument("--batch-size", type=int, default=1, metavar="B", help="micro-batch per GPU (default 1)")
    job.add_argument("--seq-len", type=int, default=2048, metavar="S",
                     help="tokens per sequence; for inference the whole context (default 2048)")
    job.add_argument("--grad-ckpt", choices=CHECKPOINTING, default="none", help="activation checkpointing")
    job.add_argument("--gpus", type=int, default=1, metavar="N")
    job.add_argument("--sharding", choices=SHARDING, default="none")
    job.add_argument("--offload", choices=OFFLOAD, default="none", help="CPU offload of optimizer or parameters")
    job.add_argument("--lora-rank", type=int, default=16, metavar="R")
    job.add_argument("--lora-targets", default="q_proj,v_proj", metavar="MODULES",
                     help="comma-separated modules or all-linear (default q_proj,v_proj)")
    job.add_argument("--framework", choices=list(PROFILES), default="hf", help="whose memory habits to assume")
    extra = job.add_argument_group(_EXTRA)
    extra.add_argument("--kv-dtype", choices=KV_DTYPES, default="auto", help="KV-cache precision for inference")
    extra.add_argument("--grad-accum", type=int, default=1, metavar="A", help="gradient accumulation steps")
    extra.add_argument("--no-double-quant", action="store_true", help="nf4 without double quantization")
    extra.add_argument("--compile", action="store_true", help="torch.compile (fused kernels)")
    extra.add_argument("--chunked-loss", action="store_true", help="cross-entropy computed in chunks")
    extra.add_argument("--offload-activations", action="store_true", help="checkpoints offloaded to CPU")
    extra.add_argument("--optimizer-in-backward", action="store_true", help="optimizer step fused into backward")
    extra.add_argument("--attention", choices=ATTENTION, default="flash", help="attention kernel (default flash)")
    return job


def request_from(args: argparse.Namespace) -> EstimateRequest:
    """The :class:`EstimateRequest` that parsed options describe."""
    from ..gpu.request import EstimateRequest, lora_targets

    return EstimateRequest(
        method=args.method, precision=args.precision, optimizer=args.optimizer, batch_size=args.batch_size,
        seq_len=args.seq_len, grad_ckpt=args.grad_ckpt, gpus=args.gpus, sharding=args.sharding,
        offload=args.offload, lora_rank=args.lora_rank, lora_targets=lora_targets(args.lora_targets),
        framework=args.framework, kv_dtype=args.kv_dtype, grad_accum=args.grad_accum,
        double_quant=not args.no_double_quant, compiled=args.compile, chunked_loss=args.chunked_loss,
        activation_offload=args.offload_activations, optimizer_in_backward=args.optimizer_in_backward,
        attention=args.attention,
    ).checked()


def run(args: argparse.Namespace) -> int:
    """Carry out one ``betty gpu`` action."""
    if args.action == "models":
        return _models(args.json)
    if args.action == "advise":
        return _advise(args)
    return _estimate(args)


def _estimate(args: argparse.Namespace) -> int:
    from ..gpu import estimate, gpu_type
    from ..gpu.report import render_estimate

    result = estimate(args.model, request_from(args))
    gpu = gpu_type(args.gpu) if args.gpu else None
    if args.json:
        print(json.dumps(result.as_dict(gpu), indent=2))
    else:
        print(render_estimate(result, gpu))
    return 0


def _models(as_json: bool) -> int:
    from ..gpu import catalog

    rows = [_model_row(entry.architecture, entry.published_params) for entry in catalog()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':<16}{'params':>9}  {'layers':>6} {'hidden':>6} {'heads':>5} {'kv':>3} {'vocab':>7}  context")
    for row in rows:
        print(f"{row['name']:<16}{row['params'] / 1e9:>8.2f}B  {row['layers']:>6} {row['hidden']:>6} "
              f"{row['heads']:>5} {row['kv_heads']:>3} {row['vocab']:>7}  {row['max_context']}")
    return 0


def _model_row(arch: Any, published: float) -> dict[str, Any]:
    return {
        "name": arch.name, "params": arch.params(), "published_params": published, "layers": arch.layers,
        "hidden": arch.hidden, "heads": arch.heads, "kv_heads": arch.kv_heads, "head_dim": arch.head_dim,
        "intermediate": arch.intermediate, "vocab": arch.vocab, "experts": arch.experts,
        "tied_embeddings": arch.tied_embeddings, "max_context": arch.max_context,
    }


def _advise(args: argparse.Namespace) -> int:
    from ..gpu import advise, gpu_type, parse_partition, resolve_model, targets_from
    from ..gpu.hardware import parse_gpu_type

    arch = resolve_model(args.model)
    partitions = [parse_partition(text) for text in args.partitions]
    if args.cluster is not None:
        partitions += _cluster_partitions(args.cluster or None)
    types = [parse_gpu_type(text) for text in args.gpu_types]
    limits_on = gpu_type(args.gpu) if args.gpu else None
    advice = advise(arch, request_from(args), targets_from(partitions, types), limits_on)
    print(json.dumps(advice.as_dict(), indent=2) if args.json else advice.summary())
    return 0


def _cluster_partitions(cluster: str | None) -> list[Any]:
    """The GPU partitions of a configured cluster, read with ``sinfo`` through its transport."""
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import run_sync
    from ..config import load_config
    from ..gpu.hardware import Partition

    transport = load_config().profile(cluster).open_transport()
    try:
        frame = run_sync(SlurmClient(transport).partitions())
    finally:
        run_sync(transport.close())
    return [Partition(str(row["partition"]), dict(row["gpu_types"])) for row in frame.to_dict("records") if row["gpu_types"]]
