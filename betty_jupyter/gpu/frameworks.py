"""Framework profiles: what each training or serving stack keeps in GPU memory.

The same model and settings need different memory under different stacks, because each
stack makes its own choices: whether RMSNorm keeps a float32 copy of its input, whether
the loss upcasts logits to float32, whether LoRA adapters are float32, which
quantized matmuls keep their input. A profile records those choices, each one a fact about
the stack's code (named in ``docs/gpu.md``), not a fudge factor fitted to measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import GpuEstimateError


@dataclass(frozen=True)
class FrameworkProfile:
    """The memory-relevant choices one stack makes. See ``docs/gpu.md`` for each default."""

    name: str
    summary: str
    default_precision: str
    adapter_fp32: bool  # LoRA adapters (and their optimizer) in float32 over a half-precision base
    norm_upcast: bool  # eager RMSNorm keeps a float32 copy of its input for backward
    expands_kv_heads: tuple[str, ...]  # attention kernels before which K and V are repeated to every query head
    kept_quantized_inputs: tuple[str, ...]  # precisions whose matmul keeps its input even for a frozen weight
    quantizes_output_layer: bool  # the output layer is quantized along with the transformer layers
    loss_fp32: bool  # cross-entropy upcasts the logits to float32
    logits_kept: bool  # the logits stay referenced through the backward pass
    loss_chunked: bool  # the loss is always computed in chunks of tokens
    fused_optimizer: bool  # the AdamW step needs no full-size temporary
    prefill_logits_all_tokens: bool  # generation computes logits for every prompt token
    cuda_context_gib: float  # CUDA context, kernels, cuBLAS workspace: memory no tensor owns
    caching_allocator: bool  # tensors come from PyTorch's caching allocator, whose slack the estimate adds
    memory_utilization: float = 1.0  # share of the card the stack lets itself use
    batched_tokens: int | None = None  # tokens the stack pushes through at once when serving
    window_keeps_prompt: bool = False  # a sliding-window cache layer still holds the whole prompt after prefill
    compiles_loss: bool = True  # with torch.compile the loss is compiled too, not only the model
    adapter_dropout: bool = False  # LoRA dropout is on: each adapter keeps its dropped input and a 1-byte mask
    fused_qkv: bool = False  # one linear layer (and so one adapter) computes Q, K and V together
    pads_qkv_adapter: bool = False  # a fused QKV adapter on some of Q, K, V scatters B's output (index_copy keeps it)
    training: bool = True
    inference: bool = True


PROFILES: dict[str, FrameworkProfile] = {
    profile.name: profile
    for profile in (
        FrameworkProfile(
            name="hf",
            summary="Hugging Face transformers + peft + bitsandbytes, Trainer with torch AMP and AdamW (foreach)",
            default_precision="bf16-mixed",
            adapter_fp32=True,
            norm_upcast=True,
            # transformers' eager attention repeats K and V (repeat_kv); flash attention and SDPA
            # (enable_gqa) take grouped-query heads as they are.
            expands_kv_heads=("eager",),
            # bitsandbytes' 8-bit matmul keeps its input; the 4-bit one has not since 0.43.2 (2024).
            kept_quantized_inputs=("int8",),
            quantizes_output_layer=False,
            loss_fp32=True,
            logits_kept=False,
            loss_chunked=False,
            fused_optimizer=False,
            prefill_logits_all_tokens=False,
            cuda_context_gib=0.5,
            caching_allocator=True,
            # transformers' DynamicSlidingWindowLayer keeps a slice (a view) of the prompt's keys and values,
            # whose storage lives until the next token replaces it: every layer holds the whole prompt
            window_keeps_prompt=True,
        ),
        FrameworkProfile(
            name="torchtune",
            summary="torchtune recipes: whole model in bf16, fused AdamW, torchao NF4 for QLoRA",
            default_precision="bf16",
            adapter_fp32=False,
            norm_upcast=True,
            expands_kv_heads=("flash", "eager"),
            kept_quantized_inputs=(),
            quantizes_output_layer=False,
            loss_fp32=True,
            logits_kept=False,
            loss_chunked=False,
            fused_optimizer=True,
            prefill_logits_all_tokens=True,
            cuda_context_gib=0.5,
            caching_allocator=True,
        ),
        FrameworkProfile(
            name="litgpt",
            summary="LitGPT with Lightning Fabric: bf16-true, chunked bf16 loss, bitsandbytes quantizes every Linear",
            default_precision="bf16",
            adapter_fp32=False,
            norm_upcast=True,
            expands_kv_heads=("flash", "eager"),
            # The bitsandbytes of LitGPT's measured tables (2023), before 0.43.2 freed the 4-bit input.
            kept_quantized_inputs=("int8", "nf4"),
            quantizes_output_layer=True,
            # Fabric's precision plugin returns the model's outputs in the default dtype (``convert_output``),
            # so the chunked loss runs on float32 logits, which the loop holds through backward
            loss_fp32=True,
            logits_kept=True,
            loss_chunked=True,
            fused_optimizer=False,
            prefill_logits_all_tokens=True,
            cuda_context_gib=0.5,
            caching_allocator=True,
            adapter_dropout=True,  # finetune/lora.py sets lora_dropout = 0.05
            fused_qkv=True,  # CausalSelfAttention's ``attn`` (LoRAQKVLinear: one dropout for query and value)
            # LoRAQKVLinear.zero_pad writes B's output into a zero Q|K|V-wide tensor with ``index_copy``,
            # whose backward keeps its source: the adapted projections' width, per token
            pads_qkv_adapter=True,
        ),
        FrameworkProfile(
            name="vllm",
            summary="vLLM serving: paged KV cache, native GQA kernels, 90% of the card by default",
            default_precision="bf16",
            adapter_fp32=False,
            norm_upcast=False,
            expands_kv_heads=(),
            kept_quantized_inputs=(),
            quantizes_output_layer=False,
            loss_fp32=False,
            logits_kept=False,
            loss_chunked=False,
            fused_optimizer=True,
            prefill_logits_all_tokens=False,
            cuda_context_gib=0.5,
            caching_allocator=False,  # preallocates its pool
            memory_utilization=0.9,
            batched_tokens=2048,
            training=False,
        ),
    )
}


# torchtune's recipes before 0.3 (2024): the training loop held the logits through backward
# (``del logits`` came in July 2024, torchtune commit 8a98fbaa3) and ``compile: True`` wrapped the model only.
PROFILES["torchtune-0.2"] = replace(
    PROFILES["torchtune"],
    name="torchtune-0.2",
    summary="torchtune 0.1-0.2 recipes: as torchtune, but logits held through backward and only the model compiled",
    logits_kept=True,
    compiles_loss=False,
)

# torchtitan (train.py and torchtitan/ at 9dec370, December 2024): FSDP2 with bf16 compute and float32
# shards, ``repeat_kv`` before SDPA, RMSNorm on ``x.float()``, the loss on ``pred.float()`` with
# ``del pred`` before backward, foreach AdamW, and ``compile`` applied to each TransformerBlock
# (the loss's compile is commented out).
PROFILES["torchtitan"] = replace(
    PROFILES["torchtune"],
    name="torchtitan",
    summary="torchtitan pre-training: FSDP2 bf16 compute over float32 shards, blocks compiled one by one",
    default_precision="bf16-mixed",
    fused_optimizer=False,
    compiles_loss=False,
    inference=False,
)


def framework_profile(name: str) -> FrameworkProfile:
    """The profile called ``name``; an error listing the known ones otherwise."""
    profile = PROFILES.get(name.strip().lower())
    if profile is None:
        raise GpuEstimateError(f"unknown --framework {name!r}; choose one of {', '.join(PROFILES)}")
    return profile
