"""What the trace does not run yet, refused in one line before anything of PyTorch is loaded.

The formula estimate still covers each of these; the refusal names the option so that a trace never
silently runs something other than what was asked.
"""

from __future__ import annotations

from ...errors import GpuEstimateError
from ..architecture import MLP_MODULES, Architecture
from ..request import EstimateRequest

QUANTIZED = ("int8", "nf4")
"""Precisions whose weights the trace quantizes (bitsandbytes' int8 and nf4 layers)."""


def check_traceable(arch: Architecture, request: EstimateRequest) -> None:
    """Refuse, in one line, what the trace does not run yet (the formula estimate still covers it)."""
    refusals = (
        (arch.kind != "decoder", f"{arch.name} is an {arch.kind} model; the trace runs decoder-only language models"),
        (arch.is_moe and request.adapters and bool(set(request.lora_targets) & set(MLP_MODULES)),
         "LoRA on the experts of a mixture of experts is not traced yet (attention modules are)"),
        (arch.is_latent and request.adapters,
         f"LoRA on {arch.name}'s latent attention (q_a_proj, kv_b_proj…) is not traced yet"),
        (arch.is_moe and request.resolved_precision in QUANTIZED,
         "quantized experts of a mixture of experts are not traced yet"),
        (request.offload != "none", "--offload is not traced yet"),
        (request.sharding in ("zero1", "zero2", "zero3") and request.method == "full"
         and request.resolved_precision in ("bf16-mixed", "fp16"),
         "ZeRO's bf16 weights with a float32 master copy are not traced yet (--sharding fsdp is)"),
        (request.framework != "hf", "the trace runs the Hugging Face stack (--framework hf)"),
        (request.optimizer not in ("adamw", "sgd"), f"--optimizer {request.optimizer} is not traced yet (adamw, sgd)"),
        (request.grad_ckpt == "selective" and arch.norms_per_layer == 4 and request.attention == "eager",
         "--grad-ckpt selective with eager attention is not traced for Gemma 2 yet (its attention has its own code)"),
        (request.compiled or request.activation_offload or request.optimizer_in_backward,
         "--compile, --offload-activations and --optimizer-in-backward are not traced yet"),
        (request.kv_dtype == "fp8", "--kv-dtype fp8 is not traced yet"),
        (request.grad_ckpt in ("op", "layer"), f"--grad-ckpt {request.grad_ckpt} (torchtitan's selective "
         "checkpointing) is not traced yet"),
        (request.fsdp_mixed_precision, "--fsdp-mixed-precision is not traced yet"),
    )
    for refused, why in refusals:
        if refused:
            raise GpuEstimateError(f"{why}; drop --trace for the formula estimate")
