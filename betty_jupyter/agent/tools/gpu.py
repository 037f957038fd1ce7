"""GPU memory tools: the estimate for one job, and advice on where it fits (``betty gpu estimate|advise``)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ...gpu import (EstimateRequest, Partition, advise, estimate, find_model, gpu_type, load_config, parse_partition,
                    targets_from)
from ...gpu.advice import with_traced_peak
from ...gpu.estimate import GIB
from ...gpu.hardware import parse_gpu_type
from ...gpu.request import (Attention, Checkpointing, KvDtype, Method, Offload, Optimizer, Precision, Sharding,
                            lora_targets)
from ...safe_text import terminal_line
from ..models import ADVANCED_FIELD, Preview, Tier, ToolOutcome
from .base import Tool, ToolArgs, ToolContext, ToolError

if TYPE_CHECKING:
    from ...gpu import Architecture, Estimate, GpuType
    from ...gpu.trace import TracedEstimate

ONE_TRACE_AT_A_TIME = threading.Lock()
"""A trace keeps a CPU core busy for seconds: the process runs one at a time, the others wait their turn."""


class JobShape(ToolArgs):
    """The options of ``betty gpu estimate``, spelt as arguments."""

    model: str = Field(min_length=1, max_length=300, description=(
        "a catalog name such as 'Llama-3.1-8B' or 'Qwen2.5-7B', or the path of a config.json inside the project"))
    method: Method = Field(description="inference, or fine-tuning: full, lora, qlora")
    precision: Precision | None = Field(None, description="default: the framework's (hf: bf16-mixed)")
    optimizer: Optimizer = Field("adamw", description="the optimizer", json_schema_extra=ADVANCED_FIELD)
    batch_size: int = Field(1, ge=1, description="micro-batch per GPU")
    seq_len: int = Field(2048, ge=1, description="tokens per sequence; for inference the whole context")
    grad_ckpt: Checkpointing = Field("none", description=(
        "activation checkpointing; op and layer are torchtitan's selective modes (every other matmul kept; "
        "every Nth layer checkpointed)"))
    gpus: int = Field(1, ge=1, description="GPUs the job uses")
    sharding: Sharding = Field("none", description="how several GPUs share the model")
    offload: Offload = Field("none", description="CPU offload of the optimizer or of parameters",
                             json_schema_extra=ADVANCED_FIELD)
    lora_rank: int = Field(16, ge=1, description="LoRA and QLoRA rank")
    lora_targets: str = Field("q_proj,v_proj", description="comma-separated modules, or all-linear",
                              json_schema_extra=ADVANCED_FIELD)
    framework: str = Field("hf", description="hf, vllm, torchtune or litgpt", json_schema_extra=ADVANCED_FIELD)
    kv_dtype: KvDtype = Field("auto", description="the KV cache's dtype (auto: the model's)",
                                json_schema_extra=ADVANCED_FIELD)
    grad_accum: int = Field(1, ge=1, description="gradient accumulation steps", json_schema_extra=ADVANCED_FIELD)
    double_quant: bool = Field(True, description="QLoRA's double quantization", json_schema_extra=ADVANCED_FIELD)
    compiled: bool = Field(False, description="torch.compile", json_schema_extra=ADVANCED_FIELD)
    chunked_loss: bool = Field(False, description="the loss computed in chunks", json_schema_extra=ADVANCED_FIELD)
    activation_offload: bool = Field(False, description="activations offloaded to CPU memory",
                                     json_schema_extra=ADVANCED_FIELD)
    optimizer_in_backward: bool = Field(False, description="the optimizer step run during the backward pass",
                                        json_schema_extra=ADVANCED_FIELD)
    attention: Attention = Field("flash", description="the attention kernel", json_schema_extra=ADVANCED_FIELD)
    ckpt_every: int = Field(2, ge=1, description="with grad_ckpt layer: checkpoint every Nth layer",
                            json_schema_extra=ADVANCED_FIELD)
    fsdp_mixed_precision: bool = Field(False, description=(
        "FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): float32 shards, bf16 compute"),
        json_schema_extra=ADVANCED_FIELD)

    def request(self) -> "EstimateRequest":
        """The checked :class:`EstimateRequest` these options describe."""
        return EstimateRequest(
            method=self.method, precision=self.precision, optimizer=self.optimizer, batch_size=self.batch_size,
            seq_len=self.seq_len, grad_ckpt=self.grad_ckpt, gpus=self.gpus, sharding=self.sharding,
            offload=self.offload, lora_rank=self.lora_rank, lora_targets=lora_targets(self.lora_targets),
            framework=self.framework, kv_dtype=self.kv_dtype, grad_accum=self.grad_accum,
            double_quant=self.double_quant, compiled=self.compiled, chunked_loss=self.chunked_loss,
            activation_offload=self.activation_offload, optimizer_in_backward=self.optimizer_in_backward,
            attention=self.attention, ckpt_every=self.ckpt_every, fsdp_mixed_precision=self.fsdp_mixed_precision,
        ).checked()

    def described(self) -> str:
        """``Llama-3.1-8B, lora, batch 4 × 4096 tokens, 1 GPU``."""
        sharding = f", {self.sharding}" if self.sharding != "none" else ""
        return (f"{self.model}, {self.method}, batch {self.batch_size} × {self.seq_len} tokens, "
                f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}{sharding}")


def model_architecture(ctx: ToolContext, model: str) -> "Architecture":
    """A catalog model, or a ``config.json`` that lies inside the project (nothing else is read).

    A config's model is named after its folder, which anyone may have named: the name is written
    out on one line (``\\n``, ``\\x1b``), so nothing told of the model can forge a line.
    """
    if not model.endswith(".json"):
        return find_model(model).architecture
    root = ctx.workspace.root.resolve()
    path = (root / model).resolve()
    if not path.is_relative_to(root):
        raise ToolError(f"gpu: {model!r} is outside the project; give a config.json inside {root}")
    config = load_config(path)
    return dataclasses.replace(config, name=terminal_line(config.name))


def estimate_summary(result: "Estimate") -> str:
    """Peak per GPU and the largest parts, in one line."""
    parts = sorted(result.breakdown.items(), key=lambda item: -item[1])
    shown = ", ".join(f"{name.replace('_', ' ')} {value:.1f}" for name, value in parts if value >= 0.05)
    return f"{result.model}: {result.peak_gib:.1f} GiB per GPU at the {result.peak_moment} ({shown} GiB)"


class EstimateArgs(JobShape):
    """One job, and optionally a GPU type to check it against."""

    gpu: str | None = Field(None, description="say whether it fits on this GPU type, e.g. a100-80gb")
    trace: bool = Field(False, description=(
        "also run the real training or inference step on meta tensors (no GPU, no weights) and count its memory: "
        "more exact than the formula, and says where in the step the peak happens; takes seconds of CPU"),
        json_schema_extra=ADVANCED_FIELD)


class GpuEstimate(Tool[EstimateArgs]):
    """Peak GPU memory per GPU for one job."""

    name = "gpu_estimate"
    description = ("Estimate peak memory per GPU for inference or fine-tuning (full, LoRA, QLoRA) of a model, as a "
                   "breakdown in GiB (weights, gradients, optimizer, activations, KV cache, runtime).")
    Args = EstimateArgs
    tier = Tier.AUTO
    project_only = True
    title = "GPU memory estimate"

    async def preview(self, ctx: ToolContext, args: EstimateArgs) -> Preview:
        """What is estimated (a computation on this machine; nothing is run anywhere)."""
        traced = ", traced on meta tensors" if args.trace else ""
        return Preview(kind="text", title="estimate GPU memory", text=f"estimate {args.described()}{traced}")

    async def run(self, ctx: ToolContext, args: EstimateArgs) -> ToolOutcome:
        """The estimate; ``data`` is its JSON form (what ``cluster_submit`` takes as ``gpu_estimate``).

        With ``trace``, the traced estimate too: run in a worker thread, one at a time, so the
        server's event loop stays free while it counts.
        """
        arch = model_architecture(ctx, args.model)
        result = estimate(arch, args.request())
        gpu = gpu_type(args.gpu) if args.gpu else None
        if args.trace:
            traced = await asyncio.to_thread(_trace, arch, result.request, gpu)
            return with_measurements(ctx, traced_outcome(traced, result, gpu), result, gpu)
        data = result.as_dict(gpu)
        lines = [estimate_summary(result)]
        if gpu is not None:
            room = result.headroom_gib(gpu)
            lines.append(f"on {gpu.name}: " + (f"fits, {room:.1f} GiB to spare" if room >= 0
                                               else f"does not fit, {-room:.1f} GiB short"))
        lines += [f"note: {note}" for note in result.notes]
        outcome = ToolOutcome(summary="\n".join(lines), full="\n".join(lines), data=data)
        return with_measurements(ctx, outcome, result, gpu)


def with_measurements(ctx: ToolContext, outcome: ToolOutcome, result: "Estimate",
                      gpu: "GpuType | None") -> ToolOutcome:
    """``outcome`` with what the person's measured jobs say beside ``result`` (:func:`your_measurements`) in its
    ``data["measured"]`` and text; unchanged when none of their jobs measured it."""
    measured = your_measurements(ctx, result.model, result.request.method, gpu, result.peak_gib)
    if measured is None or not isinstance(outcome.data, dict):
        return outcome
    text = "\n".join([outcome.summary, *(terminal_line(line) for line in measured["lines"])])
    return ToolOutcome(summary=text, full=text, data={**outcome.data, "measured": measured},
                       artifacts=outcome.artifacts)


def your_measurements(ctx: ToolContext, model: str, method: str, gpu: "GpuType | None",
                      peak_gib: float) -> dict[str, Any] | None:
    """What the person's measured jobs of ``model`` with ``method`` say beside an estimate (``measured_beside``), or
    None when none of their jobs measured it."""
    # lazy: the ledger's reader; only an estimate of a project with measured jobs uses more than a file check
    from ...experiments.gpu_peak import measured_records
    from ...gpu.measured import measured_beside

    found = measured_beside(measured_records(ctx.workspace.root), model, method, gpu.name if gpu else None, peak_gib)
    return found if found["lines"] else None


def _trace(arch: "Architecture", request: "EstimateRequest", gpu: "GpuType | None") -> "TracedEstimate":
    """One trace, after any other running in this process has finished."""
    from ...gpu.trace import trace_estimate  # lazy: the trace's own module; only a traced estimate needs it

    with ONE_TRACE_AT_A_TIME:
        return trace_estimate(arch, request, gpu)


def traced_outcome(traced: "TracedEstimate", formula: "Estimate", gpu: "GpuType | None") -> ToolOutcome:
    """The traced numbers for the model, as text whose outside parts (names from a config.json, the model
    code's module and op names) cannot forge a line; ``data`` adds the charts a face shows."""
    from ...gpu.chart import breakdown_svg, timeline_svg  # lazy: the charts; only a traced estimate draws here

    parts = sorted(traced.breakdown_gib().items(), key=lambda item: -item[1])
    shown = ", ".join(f"{name.replace('_', ' ')} {value:.1f}" for name, value in parts if value >= 0.05)
    lines = [f"{terminal_line(traced.model)}: {traced.peak_gib:.1f} GiB per GPU traced ({shown} GiB); "
             f"the formula estimate says {formula.peak_gib:.1f}",
             f"the peak: {terminal_line(traced.where)}",
             f"allocated {traced.allocated_bytes / GIB:.2f} GiB, reserved {traced.reserved_bytes / GIB:.2f} GiB"]
    data = traced.as_dict(formula)
    if gpu is not None:
        room = with_traced_peak(formula, traced).headroom_gib(gpu)
        lines.append(f"on {gpu.name}: " + (f"fits, {room:.1f} GiB to spare" if room >= 0
                                           else f"does not fit, {-room:.1f} GiB short"))
        data.update(gpu=gpu.name, gpu_gib=round(gpu.memory_gib, 2), fits=room >= 0, headroom_gib=round(room, 3))
    lines += [f"note: {terminal_line(note)}" for note in traced.notes]
    data["charts"] = {"breakdown": breakdown_svg(traced, [gpu] if gpu else []), "timeline": timeline_svg(traced)}
    return ToolOutcome(summary="\n".join(lines), full="\n".join(lines), data=data)


class AdviseArgs(JobShape):
    """One job and the GPUs to place it on (default: the session cluster's partitions)."""

    partitions: list[str] | None = Field(None, description=(
        "partitions as name=gres, e.g. 'gpu=gpu:a100:4,gpu:h100:2'; default: read from the session's cluster"))
    gpu_types: list[str] | None = Field(None, description="GPU types to consider, e.g. ['a100-80gb', 'mygpu=48']")
    gpu: str | None = Field(None, description="report the largest batch and context on this GPU type")
    trace: bool = Field(False, description=(
        "place the job as asked by its traced peak (the real step run on meta tensors; seconds of CPU)"),
        json_schema_extra=ADVANCED_FIELD)


class GpuAdvise(Tool[AdviseArgs]):
    """Where a job fits, and what to change when it fits nowhere."""

    name = "gpu_advise"
    description = ("Say on which partitions and GPU types a job fits (default: the session cluster's partitions), "
                   "and the cheapest changes that make it fit when it does not.")
    Args = AdviseArgs
    tier = Tier.AUTO
    project_only = True
    title = "GPU advice"

    async def preview(self, ctx: ToolContext, args: AdviseArgs) -> Preview:
        """What is advised on, and where the partitions come from."""
        where = (", ".join(args.partitions) if args.partitions else
                 ", ".join(args.gpu_types) if args.gpu_types else f"the partitions of {ctx.profile.name} (sinfo)")
        return Preview(kind="text", title="advise on GPUs", text=f"advise on {args.described()} over {where}")

    async def run(self, ctx: ToolContext, args: AdviseArgs) -> ToolOutcome:
        """The advice; ``data`` is its JSON form."""
        partitions = [parse_partition(text) for text in args.partitions or []]
        types = [parse_gpu_type(text) for text in args.gpu_types or []]
        if not partitions and not types:
            partitions = await cluster_partitions(ctx)
            if not partitions:
                raise ToolError(f"{ctx.profile.name} has no GPU partitions; give partitions or gpu_types")
        limits_on = gpu_type(args.gpu) if args.gpu else None
        arch, request = model_architecture(ctx, args.model), args.request()
        traced = await asyncio.to_thread(_trace, arch, request, limits_on) if args.trace else None
        advice = advise(arch, request, targets_from(partitions, types), limits_on, traced)
        text = advice.summary()
        outcome = ToolOutcome(summary=text, full=text, data=advice.as_dict())
        return with_measurements(ctx, outcome, advice.formula or advice.estimate, limits_on)


async def cluster_partitions(ctx: ToolContext) -> list["Partition"]:
    """The session cluster's GPU partitions as plain data for the GPU layer."""
    frame = await ctx.slurm.partitions()
    return [Partition(str(row["partition"]), dict(row["gpu_types"])) for row in frame.to_dict("records")
            if row["gpu_types"]]

