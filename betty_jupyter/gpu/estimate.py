"""Peak GPU memory per GPU for one job, as a breakdown a researcher can act on.

Training memory is the sum of what coexists at the peak, not the largest of its parts
(the mistake ``accelerate estimate-memory`` makes). Two moments compete for the peak:

* the start of the backward pass: weights, optimizer states, every saved activation and
  the loss's logits (gradients appear only as activations are freed, so with
  ``set_to_none`` zeroing, PyTorch's default since 2.0, they do not add here unless
  gradient accumulation keeps them from the previous micro-batch);
* the optimizer step: weights, optimizer states, all gradients and the step's temporaries.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models", §3 and Fig. 1): mixed-precision Adam needs
``2 + 2 + 12 = 16`` bytes per parameter (half-precision weights and gradients; float32
master weights, momentum and variance), which stage 1 divides the 12 across N GPUs,
stage 2 the gradients too, and stage 3 everything: ``16·Ψ/N``. Without ZeRO, torch AMP
keeps float32 weights and gradients plus a half-precision copy of the weights used in
the forward pass: ``4 + 2 + 4 + 8 = 18`` bytes (Hugging Face, "Model training anatomy").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .activations import Layout, inference_activations, training_activations
from .architecture import Architecture
from .model_catalog import resolve_model
from .hardware import GpuType
from .request import KV_BYTES, WEIGHT_BYTES, EstimateRequest, attention_that_runs

GIB = 1024**3
ITEMS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "quantization", "runtime")
# NF4 (Dettmers et al. 2023, "QLoRA", §3): one float32 absmax per 64 weights (0.5 bit per weight);
# double quantization stores it in 8 bits plus one float32 per 256 blocks (0.127 bit).
NF4_SCALE_BYTES = {True: 1 / 64 + 4 / (64 * 256), False: 4 / 64}
# PyTorch's caching allocator reserves more than the live tensors: freed blocks it cannot reuse for a
# later, differently sized request. That slack is a share of what the step makes and frees (activations,
# gradients, KV cache), not of the weights and optimizer states, which are made once: small while
# activations only accumulate until backward, larger when one layer's tensors are made and freed layer
# after layer (checkpointed recomputation beside the gradients, inference). The three shares are fitted
# on the traced grid's allocator replay (tests/data/gpu_trace_grid.csv; docs/gpu.md, "Calibration").
ALLOCATOR_SLACK = {"accumulating": 0.04, "recomputed": 0.40, "inference": 0.30}
CUBLAS_WORKSPACE_GIB = 8.125 / 1024  # PyTorch's default cuBLAS workspace, 4096 KiB × 2 + 16 KiB × 8


@dataclass(frozen=True)
class Estimate:
    """Peak memory of one GPU for one job, split into what takes it (GiB)."""

    model: str
    request: EstimateRequest
    params: int
    trainable_params: int
    breakdown: dict[str, float]
    peak_moment: str
    cpu_gib: float = 0.0
    slack_gib: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    terms: dict[str, str] = field(default_factory=dict)
    """What each non-zero item of ``breakdown`` holds, in words (the same keys)."""

    @property
    def peak_gib(self) -> float:
        """Everything the GPU must hold at the peak, CUDA context and allocator slack included."""
        return sum(self.breakdown.values())

    @property
    def allocated_gib(self) -> float:
        """What ``torch.cuda.max_memory_allocated()`` would report: the peak without runtime overhead."""
        return self.peak_gib - self.breakdown["runtime"]

    @property
    def reserved_gib(self) -> float:
        """What ``torch.cuda.max_memory_reserved()`` would report: allocated plus the allocator's slack."""
        return self.allocated_gib + self.slack_gib

    @property
    def usable_share(self) -> float:
        """Share of a card the stack lets itself use (vLLM: 0.9 by default)."""
        return self.request.profile.memory_utilization

    def fits(self, gpu: GpuType) -> bool:
        """Whether the peak fits on one ``gpu`` (within the stack's usable share of it)."""
        return self.headroom_gib(gpu) >= 0

    def headroom_gib(self, gpu: GpuType) -> float:
        """GiB left on one ``gpu`` at the peak (negative: how much is missing)."""
        return gpu.memory_gib * self.usable_share - self.peak_gib

    def as_dict(self, gpu: GpuType | None = None) -> dict[str, Any]:
        """A JSON-ready summary; ``fits`` and ``headroom_gib`` only when ``gpu`` is given."""
        result: dict[str, Any] = {
            "model": self.model,
            "method": self.request.method,
            "precision": self.request.resolved_precision,
            "framework": self.request.framework,
            "gpus": self.request.gpus,
            "params": self.params,
            "trainable_params": self.trainable_params,
            "peak_gib": round(self.peak_gib, 3),
            "allocated_gib": round(self.allocated_gib, 3),
            "breakdown": {name: round(value, 3) for name, value in self.breakdown.items()},
            "peak_moment": self.peak_moment,
            "cpu_gib": round(self.cpu_gib, 3),
            "notes": list(self.notes),
            "terms": dict(self.terms),
        }
        if gpu is not None:
            result.update(gpu=gpu.name, gpu_gib=round(gpu.memory_gib, 2), fits=self.fits(gpu),
                          headroom_gib=round(self.headroom_gib(gpu), 3))
        return result


@dataclass
class _States:
    """Model states of one GPU in bytes, and what went to the CPU."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    step_temporary: float = 0.0
    autocast_copy: float = 0.0  # half-precision copies autocast makes of the weights: forward to backward only
    quantization: float = 0.0
    cpu: float = 0.0
    notes: list[str] = field(default_factory=list)


def estimate(model: str | Path | Mapping[str, Any] | Architecture, request: EstimateRequest | None = None,
             **options: Any) -> Estimate:
    """Peak memory per GPU for ``model`` run as ``request`` (or as the keyword ``options``).

    ``model`` is a catalog name, a ``config.json`` path or dict, or an :class:`Architecture`.
    """
    arch = resolve_model(model)
    asked = (request or EstimateRequest(**options)).checked()
    runs, note = attention_that_runs(arch, asked)
    layout = _layout(arch, runs)
    result = _training(layout) if runs.training else _inference(layout)
    if runs is asked:
        return result
    return replace(result, request=asked, notes=(*result.notes, note))


def _layout(arch: Architecture, request: EstimateRequest) -> Layout:
    precision = request.resolved_precision
    quantized = precision in ("int8", "nf4")
    return Layout(arch, request, compute_bytes=4 if precision == "fp32" else 2, quantized=quantized,
                  keeps_quantized_inputs=quantized and precision in request.profile.kept_quantized_inputs)


def quantized_params(layout: Layout) -> int:
    """Weights stored in int8/nf4: the layers' linear weights (and the output layer if the stack quantizes it)."""
    arch = layout.arch
    if not layout.quantized:
        return 0
    output = layout.request.profile.quantizes_output_layer and not arch.tied_embeddings and arch.kind != "encoder"
    return arch.linear_params() + (arch.vocab * arch.hidden if output else 0)


def dequantized_bytes(layout: Layout) -> float:
    """The one matrix dequantized to the compute dtype at a time, in bytes (0 without quantization)."""
    arch = layout.arch
    quantized = quantized_params(layout)
    if not quantized:
        return 0.0
    return layout.compute_bytes * max(arch.largest_matrix(), arch.vocab * arch.hidden
                                      if quantized > arch.linear_params() else 0)


def frozen_weight_bytes(layout: Layout) -> tuple[float, float]:
    """(weights, quantization overhead) in bytes for the whole model stored for inference or LoRA."""
    arch, request = layout.arch, layout.request
    precision = request.resolved_precision
    quantized = quantized_params(layout)
    rest = arch.params() - quantized
    weights = quantized * WEIGHT_BYTES[precision] + rest * layout.compute_bytes
    if not quantized:
        return weights, 0.0
    scales = quantized * (NF4_SCALE_BYTES[request.double_quant] if precision == "nf4" else 4 / arch.hidden)
    return weights, scales + dequantized_bytes(layout)


def _inference(layout: Layout) -> Estimate:
    arch, request = layout.arch, layout.request
    weights, quantization = frozen_weight_bytes(layout)
    kv_bytes = KV_BYTES.get(request.kv_dtype, layout.compute_bytes)
    window_kept = request.profile.window_keeps_prompt  # the prompt's keys and values outlive the window
    kv = request.batch_size * request.seq_len * arch.kv_bytes_per_token(kv_bytes, None if window_kept else
                                                                         request.seq_len)
    parts = {
        "weights": weights / request.gpus,
        "gradients": 0.0,
        "optimizer": 0.0,
        "activations": inference_activations(layout),
        "kv_cache": kv / request.gpus,
        "quantization": quantization / request.gpus,
    }
    notes = _context_notes(arch, request)
    if request.profile.memory_utilization < 1:
        notes.append(
            f"{request.framework} takes {request.profile.memory_utilization:.0%} of the card and fills what is "
            "left after weights and activations with KV cache; this estimate is what the requested "
            "batch × context needs"
        )
    if request.gpus > 1:
        notes.append(f"weights and KV cache split across {request.gpus} GPUs (tensor parallel)")
    if window_kept and arch.sliding_window and request.seq_len > arch.sliding_window:
        notes.append(f"transformers' sliding-window cache keeps a view of the whole prompt's keys and values until "
                     f"the next token, so every layer holds all {request.seq_len} tokens at the peak (a serving stack "
                     f"such as --framework vllm keeps {arch.sliding_window} in its window layers)")
    return _finish(layout, parts, "generation", 0.0, notes)


def _training(layout: Layout) -> Estimate:
    arch, request = layout.arch, layout.request
    states = _model_states(layout)
    activations = training_activations(layout).total
    kept = activations - training_activations(replace(layout, keeps_quantized_inputs=False)).total
    head_grad = arch.vocab * arch.hidden * _grad_bytes(layout) if request.method == "full" else 0.0
    if request.grad_accum > 1:
        backward_grads = states.gradients  # kept from the previous micro-batch
    elif request.fsdp_mixed_precision:
        backward_grads = _reduced_unit_bytes(layout)
    else:
        backward_grads = min(head_grad, states.gradients) + _bucket(layout, states)
    backward = {"weights": states.weights, "gradients": backward_grads, "optimizer": states.optimizer,
                "activations": activations}
    step = {"weights": states.weights - states.autocast_copy, "gradients": states.gradients + _bucket(layout, states),
            "optimizer": states.optimizer + states.step_temporary, "activations": 0.0}
    at_step = not request.optimizer_in_backward and sum(step.values()) > sum(backward.values())
    parts = {**(step if at_step else backward), "kv_cache": 0.0, "quantization": states.quantization}
    notes = states.notes + _context_notes(arch, request) + _training_notes(layout, states, at_step)
    return _finish(layout, parts, "optimizer step" if at_step else "start of the backward pass", states.cpu, notes,
                   kept if not at_step else 0.0)


def _reduced_unit_bytes(layout: Layout) -> float:
    """FSDP2 mixed precision: one unit's gradient in bf16, and its float32 copy for the reduce-scatter."""
    return layout.arch.largest_layer_params() * (layout.compute_bytes + 4.0)


def _bucket(layout: Layout, states: _States) -> float:
    # DDP copies every gradient into its all-reduce buckets unless gradient_as_bucket_view=True.
    return states.gradients if layout.request.sharding == "ddp" else 0.0


def _grad_bytes(layout: Layout) -> float:
    return _per_param_bytes(layout)[1]


def _per_param_bytes(layout: Layout) -> tuple[float, float, float, float]:
    """(weight, gradient, optimizer-state, master-weight) bytes per trainable parameter."""
    request, precision = layout.request, layout.request.resolved_precision
    if request.adapters:
        adapter = 4 if request.profile.adapter_fp32 or precision in ("fp32", "bf16-mixed", "fp16") else 2
        return adapter, adapter, adapter, 0
    if precision == "fp32":
        return 4, 4, 4, 0
    if precision == "bf16":
        return 2, 2, 2, 0  # pure bf16: optimizer states take the parameters' dtype
    if request.sharding in ("zero1", "zero2", "zero3"):
        return 2, 2, 4, 4  # ZeRO: half weights and gradients, float32 master copy in the optimizer
    if request.sharding == "fsdp":
        return 4, 4, 4, 0  # FSDP mixed precision: float32 shards; the half copy is the gathered unit
    return 4, 4, 4, 0  # torch AMP: float32 weights and gradients (and the half copy: _autocast_copy_bytes)


def _optimizer_bytes(layout: Layout, trainable: int, state: float) -> float:
    optimizer = layout.request.optimizer
    if optimizer in ("adamw", "paged-adamw"):
        return 2 * state * trainable  # momentum and variance (Loshchilov & Hutter 2019)
    if optimizer in ("adamw8bit", "paged-adamw8bit"):
        return 2 * trainable  # 8-bit blockwise states (Dettmers et al. 2022, "8-bit Optimizers")
    if optimizer == "sgd":
        return state * trainable  # momentum buffer
    return _adafactor_bytes(layout, trainable)


def _adafactor_bytes(layout: Layout, trainable: int) -> float:
    """Adafactor keeps float32 row and column statistics per matrix (Shazeer & Stern 2018), no momentum."""
    arch, request = layout.arch, layout.request
    if request.adapters:
        shapes = arch.module_shapes()
        per_layer = sum(2 * request.lora_rank + sum(shapes[m]) for m in request.lora_targets)
        return 4.0 * per_layer * (arch.layers + arch.encoder_layers)
    in_matrices = sum((rows + cols) * count for rows, cols, count in arch.matrix_shapes())
    in_vectors = trainable - sum(rows * cols * count for rows, cols, count in arch.matrix_shapes())
    return 4.0 * (in_matrices + max(in_vectors, 0))


def _model_states(layout: Layout) -> _States:
    """Weights, gradients and optimizer states of one GPU, after paging, sharding and offload."""
    request = layout.request
    weight, grad, state, master = _per_param_bytes(layout)
    states = _States()
    trainable = _trainable_params(layout)
    if request.adapters:
        frozen, states.quantization = frozen_weight_bytes(layout)
        states.weights = frozen + weight * trainable
    else:
        states.autocast_copy = _autocast_copy_bytes(layout)
        states.weights = weight * trainable + states.autocast_copy
    states.gradients = grad * trainable
    states.optimizer = _optimizer_bytes(layout, trainable, state) + master * trainable
    states.step_temporary = _step_temporary(layout, trainable, state)
    if request.optimizer.startswith("paged"):
        states.cpu += states.optimizer
        states.notes.append(
            f"paged optimizer states ({states.optimizer / GIB:.2f} GiB) live in unified memory and move to CPU "
            "RAM when the GPU fills up, so they are not counted in the peak"
        )
        states.optimizer = 0.0
    _shard(layout, states)
    _offload(layout, states)
    return states


def _autocast_copy_params(layout: Layout) -> int:
    """Weights autocast casts to the half dtype: every linear layer's, the output layer's included."""
    arch = layout.arch
    output = arch.head_params() if arch.kind == "encoder" else arch.vocab * arch.hidden
    return arch.linear_params() + output


def _autocast_copy_bytes(layout: Layout) -> float:
    """Full fine-tuning under torch AMP: the half copy of the float32 weights that autocast makes in forward.

    Each linear layer's backward keeps its half weight, so the copies live until backward
    has passed that layer; the optimizer step no longer sees them. Embeddings and norms are
    not cast. ZeRO keeps half weights itself, and FSDP gathers one unit at a time.
    """
    request = layout.request
    amp = request.resolved_precision in ("bf16-mixed", "fp16") and request.sharding in ("none", "ddp")
    return 2.0 * _autocast_copy_params(layout) if amp and not request.adapters else 0.0


def _trainable_params(layout: Layout) -> int:
    request = layout.request
    if request.adapters:
        return layout.arch.lora_params(request.lora_rank, request.lora_targets)
    return layout.arch.params()


def _shard(layout: Layout, states: _States) -> None:
    """ZeRO stage 1 splits optimizer states, stage 2 gradients too, stage 3 (and FSDP) the weights as well."""
    n = layout.request.gpus
    stage = {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}.get(layout.request.sharding, 0)
    if stage == 3:
        states.weights = states.weights / n + _gathered_bytes(layout)
        states.quantization /= n
    if stage >= 2:
        states.gradients /= n
    if stage >= 1:
        states.optimizer /= n
        states.step_temporary /= n


def _step_temporary(layout: Layout, trainable: int, state: float) -> float:
    # torch's foreach AdamW allocates sqrt(v) for all parameters at once; fused kernels do not.
    request = layout.request
    foreach = request.optimizer == "adamw" and not request.profile.fused_optimizer
    return state * trainable if foreach and request.sharding not in ("zero1", "zero2", "zero3") else 0.0


def _gathered_bytes(layout: Layout) -> float:
    """ZeRO-3 / FSDP gather one unit's full weights at a time (a layer, or the embedding) in compute precision."""
    precision = layout.request.resolved_precision
    unit_bytes = WEIGHT_BYTES[precision] if layout.quantized else layout.compute_bytes
    return layout.arch.largest_layer_params() * unit_bytes


def _offload(layout: Layout, states: _States) -> None:
    offload = layout.request.offload
    if offload == "none":
        return
    states.cpu += states.optimizer
    states.optimizer = states.step_temporary = 0.0
    if offload == "params":
        units = 2 if layout.request.sharding == "fsdp" else 1  # FSDP prefetches the next unit while one computes
        gathered = units * _gathered_bytes(layout)
        states.cpu += states.weights - _gathered_bytes(layout) + states.gradients
        states.weights, states.gradients = gathered, 0.0
        held = "the layer being computed and the next one, prefetched" if units == 2 else "one layer"
        states.notes.append(f"parameters, gradients and optimizer states live on the CPU; the GPU holds {held}")
    else:
        states.notes.append("optimizer states (and the step) live on the CPU (ZeRO-Offload)")


def _training_notes(layout: Layout, states: _States, at_step: bool) -> list[str]:
    request = layout.request
    notes = []
    if not at_step and request.grad_accum == 1 and states.gradients > 0 and not request.optimizer_in_backward:
        notes.append(
            f"gradients ({states.gradients / GIB:.2f} GiB) appear during backward as activations are freed, "
            "so they do not add to this peak"
        )
    if request.grad_ckpt == "selective" and request.attention == "flash":
        notes.append("with flash attention selective checkpointing saves nothing: score matrices are never stored")
    if request.activation_offload and request.grad_ckpt != "full":
        notes.append("activation offloading applies to checkpointed layers; use --grad-ckpt full with it")
    return notes


def _context_notes(arch: Architecture, request: EstimateRequest) -> list[str]:
    if request.seq_len > arch.max_context:
        return [f"--seq-len {request.seq_len} is longer than {arch.name}'s {arch.max_context}-token context"]
    return []


def _finish(layout: Layout, parts: dict[str, float], moment: str, cpu: float, notes: list[str],
            kept_inputs: float = 0.0) -> Estimate:
    arch, request = layout.arch, layout.request
    profile = request.profile
    slack = allocator_slack(layout, parts)
    breakdown = {name: parts.get(name, 0.0) / GIB for name in ITEMS}
    breakdown["runtime"] = profile.cuda_context_gib + CUBLAS_WORKSPACE_GIB + slack / GIB
    trainable = _trainable_params(layout) if request.training else 0
    return Estimate(model=arch.name, request=request, params=arch.params(), trainable_params=trainable,
                    breakdown=breakdown, peak_moment=moment, cpu_gib=cpu / GIB, slack_gib=slack / GIB,
                    notes=tuple(notes), terms=_terms(layout, breakdown, kept_inputs))


def slack_kind(request: EstimateRequest) -> str:
    """Which of :data:`ALLOCATOR_SLACK`'s shares applies: how the step makes and frees its tensors."""
    if not request.training:
        return "inference"
    # torchtitan's op-level policy keeps every other matmul's output from the forward pass, as an
    # unchecked layer does; backward rebuilds only the cheap rest (norms, RoPE, the activation function)
    return "recomputed" if request.grad_ckpt == "full" else "accumulating"


def allocator_slack(layout: Layout, parts: Mapping[str, float]) -> float:
    """Bytes the caching allocator reserves above the allocated peak (see :data:`ALLOCATOR_SLACK`)."""
    if not layout.request.profile.caching_allocator:
        return 0.0
    churn = parts.get("activations", 0.0) + parts.get("gradients", 0.0) + parts.get("kv_cache", 0.0)
    return ALLOCATOR_SLACK[slack_kind(layout.request)] * churn


# ----- what each item holds, in words ---------------------------------------------------------------
def _terms(layout: Layout, breakdown: dict[str, float], kept_inputs: float) -> dict[str, str]:
    """One line per non-zero item of the breakdown: what it is made of, with the numbers that make it."""
    request, profile = layout.request, layout.request.profile
    trainable = _trainable_params(layout) if request.training else layout.arch.params()
    words = {
        "weights": _weights_term(layout),
        "gradients": _gradients_term(layout, breakdown, trainable),
        "optimizer": f"{request.optimizer} states of the {_count(trainable)} trained weights",
        "activations": _activations_term(layout, kept_inputs),
        "kv_cache": f"keys and values of {request.batch_size} × {request.seq_len} tokens",
        "quantization": _quantization_term(layout),
        "runtime": _runtime_term(layout),
    }
    return {name: words[name] for name, value in breakdown.items() if value > 0}


def _gradients_term(layout: Layout, breakdown: dict[str, float], trainable: float) -> str:
    request = layout.request
    if request.fsdp_mixed_precision and math.isclose(breakdown["gradients"] * GIB, _reduced_unit_bytes(layout)):
        return (f"one unit's gradient in bf16 ({_count(layout.arch.largest_layer_params())} weights) and its "
                "float32 copy for the reduce-scatter")
    return f"of the {_count(trainable)} trained weights"


def _runtime_term(layout: Layout) -> str:
    request, profile = layout.request, layout.request.profile
    line = f"CUDA context {profile.cuda_context_gib:.1f} GiB + cuBLAS workspace"
    if not profile.caching_allocator:
        return line
    share = ALLOCATOR_SLACK[slack_kind(request)]
    return line + f" + the caching allocator's slack ({share:.0%} of the activations, gradients and KV cache)"


def _count(params: float) -> str:
    return f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.1f}M"


def _dtype(layout: Layout, size: float) -> str:
    half = "fp16" if layout.request.resolved_precision == "fp16" else "bf16"
    return {4: "float32", 2: half, 1: "int8", 0.5: "4-bit NF4"}.get(size, f"{size}-byte numbers")


def _weights_term(layout: Layout) -> str:
    arch, request = layout.arch, layout.request
    precision = request.resolved_precision
    if not request.adapters and request.training:
        weight = _per_param_bytes(layout)[0]
        line = f"{_count(arch.params())} weights at {weight} bytes each"
        if _autocast_copy_bytes(layout):
            line += (f" + the {_dtype(layout, 2)} copy autocast makes of {_count(_autocast_copy_params(layout))} "
                     "linear weights (forward to backward)")
        return line
    quantized = quantized_params(layout)
    rest = arch.params() - quantized
    parts = []
    if quantized:
        parts.append(f"{_count(quantized)} layer weights in {_dtype(layout, WEIGHT_BYTES[precision])} "
                     f"({WEIGHT_BYTES[precision]} byte each)")
    kind = "other weights (embeddings, norms, output layer)" if quantized else "weights"
    parts.append(f"{_count(rest)} {kind} in {_dtype(layout, layout.compute_bytes)}")
    if request.adapters:
        adapter = _per_param_bytes(layout)[0]
        parts.append(f"{_count(_trainable_params(layout))} adapter weights in {_dtype(layout, adapter)}")
    return " + ".join(parts)


def _quantization_term(layout: Layout) -> str:
    arch, request = layout.arch, layout.request
    quantized = quantized_params(layout)
    if request.resolved_precision == "nf4":
        constants = "one absmax per 64 weights" + (", double-quantized" if request.double_quant else "")
    else:
        constants = "one float32 scale per row"
    buffer = dequantized_bytes(layout)
    return (f"constants for {_count(quantized)} weights ({constants}) + the one "
            f"{_count(buffer / layout.compute_bytes)}-weight matrix dequantized to "
            f"{_dtype(layout, layout.compute_bytes)} at a time ({buffer / GIB:.2f} GiB)")


def _activations_term(layout: Layout, kept_inputs: float) -> str:
    request = layout.request
    if not request.training:
        return "one layer's working set and the logits while the prompt is read"
    checkpointing = {"full": ", layers checkpointed", "selective": ", attention scores recomputed",
                     "op": ", every other matmul's output kept, the rest recomputed",
                     "layer": f", one layer in {request.ckpt_every} checkpointed"}
    line = (f"what {request.batch_size} × {request.seq_len} tokens keep for the backward pass"
            f"{checkpointing.get(request.grad_ckpt, '')}, and the loss's logits")
    if kept_inputs > 0:
        line += (f"; {kept_inputs / GIB:.2f} GiB of it are the inputs the {request.resolved_precision} matmul keeps "
                 "for every frozen layer")
    return line
