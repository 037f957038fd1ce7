"""The options that describe one job's GPU memory, as ``betty gpu estimate|advise`` and ``%betty gpu`` take them.

One parser for every face that reads options from a command line, and the one translation of
parsed options into an :class:`~betty_jupyter.gpu.request.EstimateRequest`.
"""

from __future__ import annotations

import argparse

from .frameworks import PROFILES
from .request import (ATTENTION, CHECKPOINTING, KV_DTYPES, METHODS, OFFLOAD, OPTIMIZERS, PRECISIONS, SHARDING,
                      EstimateRequest, lora_targets)

_EXTRA = "stack-specific switches"


def job_options() -> argparse.ArgumentParser:
    """The options that describe one job, shared by ``estimate`` and ``advise``."""
    job = argparse.ArgumentParser(add_help=False)
    job.add_argument("--model", required=True, help="catalog name (see `betty gpu models`) or path to a config.json")
    job.add_argument("--method", required=True, choices=METHODS)
    job.add_argument("--precision", choices=PRECISIONS, help="default: the framework's (hf: bf16-mixed)")
    job.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    job.add_argument("--batch-size", type=int, default=1, metavar="B", help="micro-batch per GPU (default 1)")
    job.add_argument("--seq-len", type=int, default=2048, metavar="S",
                     help="tokens per sequence; for inference the whole context (default 2048)")
    job.add_argument("--grad-ckpt", choices=CHECKPOINTING, default="none",
                     help="activation checkpointing; op and layer are torchtitan's selective modes")
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
    extra.add_argument("--ckpt-every", type=int, default=2, metavar="N",
                       help="with --grad-ckpt layer: checkpoint every Nth layer (default 2)")
    extra.add_argument("--fsdp-mixed-precision", action="store_true",
                       help="FSDP2 MixedPrecisionPolicy: float32 shards, bf16 compute, float32 gradient reduce")
    extra.add_argument("--attention", choices=ATTENTION, default="flash", help="attention kernel (default flash)")
    return job


def request_from(args: argparse.Namespace) -> EstimateRequest:
    """The :class:`EstimateRequest` that parsed options describe."""
    return EstimateRequest(
        method=args.method, precision=args.precision, optimizer=args.optimizer, batch_size=args.batch_size,
        seq_len=args.seq_len, grad_ckpt=args.grad_ckpt, gpus=args.gpus, sharding=args.sharding,
        offload=args.offload, lora_rank=args.lora_rank, lora_targets=lora_targets(args.lora_targets),
        framework=args.framework, kv_dtype=args.kv_dtype, grad_accum=args.grad_accum,
        double_quant=not args.no_double_quant, compiled=args.compile, chunked_loss=args.chunked_loss,
        activation_offload=args.offload_activations, optimizer_in_backward=args.optimizer_in_backward,
        attention=args.attention, ckpt_every=args.ckpt_every, fsdp_mixed_precision=args.fsdp_mixed_precision,
    ).checked()
