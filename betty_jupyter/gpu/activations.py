"""Activation memory: what the forward pass keeps for the backward pass, per token.

The method is Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (arXiv:2205.05198, §4.1): walk one transformer layer and add up every
tensor autograd saves. For GPT with 16-bit activations, dropout and no flash attention
their count is ``s·b·h·(34 + 5·a·s/h)`` bytes per layer. Betty redoes the same count for
today's layers instead of assuming GPT's:

* grouped-query attention (K and V are ``kv_heads × head_dim`` wide, unless the stack
  repeats them to every query head before attention, as HF, torchtune and LitGPT do);
* SwiGLU MLPs (gate, up, their product: three ``intermediate``-wide tensors, not two);
* flash / memory-efficient attention, which saves the output and a log-sum-exp instead
  of the ``a·s²`` score matrices (Dao et al. 2022);
* RMSNorm that keeps a float32 copy of its input when the stack upcasts;
* frozen weights (LoRA): PyTorch only saves a linear layer's input when its weight needs
  a gradient, so a frozen projection without an adapter saves nothing; nor does a frozen
  4-bit one in bitsandbytes since 0.43.2 (before, ``MatMul4Bit`` kept every input, which
  made QLoRA need more activation memory than LoRA), while its 8-bit matmul still does;
* ``torch.compile``, whose fused kernels recompute the activation function instead of
  saving its output.

Sizes here are bytes per token unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import Architecture
from .request import EstimateRequest

LOSS_CHUNKS = 8  # torchtune's CEWithChunkedOutputLoss splits the tokens into 8 chunks


@dataclass(frozen=True)
class Layout:
    """The facts about a run that decide what autograd saves."""

    arch: Architecture
    request: EstimateRequest
    compute_bytes: int  # bytes of one activation element (4 in fp32, else 2)
    quantized: bool  # the base weights are int8 or nf4
    keeps_quantized_inputs: bool = False  # the stack's quantized matmul keeps its input for a frozen weight

    def saves_input(self, module: str) -> bool:
        """Whether the linear layer ``module`` keeps its input for the backward pass."""
        if self.request.method == "full":
            return True
        if module in self.request.lora_targets:
            return True  # the adapter's A matrix needs its input
        return self.keeps_quantized_inputs

    @property
    def profile_upcasts_norm(self) -> bool:
        """Whether normalisation keeps a float32 copy of its input."""
        return self.request.profile.norm_upcast and not self.request.compiled and not self.arch.layer_norm


def norm_bytes(layout: Layout) -> float:
    """One normalisation: its input (float32 when upcast) plus the normalised tensor the weight's gradient needs."""
    arch, dtype = layout.arch, layout.compute_bytes
    saved = arch.hidden * (4 if layout.profile_upcasts_norm else dtype)
    trains_norm = layout.request.method == "full" and not arch.layer_norm and not layout.request.compiled
    return saved + (dtype * arch.hidden if trains_norm else 0)


def attention_bytes(layout: Layout, seq_len: int, recompute_scores: bool = False) -> float:
    """One attention block: Korthikanti's ``11·h + 5·a·s`` generalised (see the module docstring)."""
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    total = 0.0
    if any(layout.saves_input(m) for m in ("q_proj", "k_proj", "v_proj")):
        total += dtype * arch.hidden  # the projections' shared input
    kv_width = arch.q_dim if request.profile.expands_kv_heads else arch.kv_dim
    total += dtype * (arch.q_dim + 2 * kv_width)  # Q, K, V as the attention kernel keeps them
    if request.attention == "flash":
        total += dtype * arch.q_dim + 4 * arch.heads  # output and log-sum-exp (float32)
    elif not recompute_scores:
        dropout_mask = 1 if arch.dropout else 0
        total += (2 * dtype + dropout_mask) * arch.heads * seq_len  # softmax output and its dropped copy
    if layout.saves_input("o_proj"):
        total += dtype * arch.q_dim  # the output projection's input (a contiguous copy)
    if arch.dropout:
        total += arch.hidden  # dropout mask after the output projection (1 byte)
    return total + _adapter_bytes(layout, ("q_proj", "k_proj", "v_proj", "o_proj"))


def mlp_bytes(layout: Layout) -> float:
    """One MLP (per routed expert): inputs of the trainable projections and the activation function."""
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    width = arch.intermediate
    total = 0.0
    if layout.saves_input("gate_proj") or layout.saves_input("up_proj"):
        total += dtype * arch.hidden
    if arch.mlp == "gated":
        total += 2 * dtype * width  # gate output (the activation's input) and up output
        if not request.compiled:
            total += dtype * width  # activation output, kept for the product's backward
    else:
        total += dtype * width  # activation's input
    if layout.saves_input("down_proj"):
        total += dtype * width  # the down projection's input
    if arch.dropout:
        total += arch.hidden
    total += _adapter_bytes(layout, ("gate_proj", "up_proj", "down_proj"))
    if arch.is_moe:
        total = arch.experts_per_token * (total + dtype * arch.hidden)  # each token visits top-k experts
    return total


def _adapter_bytes(layout: Layout, modules: tuple[str, ...]) -> float:
    if not layout.request.adapters:
        return 0.0
    targeted = sum(1 for module in modules if module in layout.request.lora_targets)
    return targeted * layout.compute_bytes * layout.request.lora_rank  # A's output, kept for B


def layer_bytes(layout: Layout, seq_len: int, cross_attention: bool = False, recompute_scores: bool = False) -> float:
    """Everything one layer keeps for backward, per token."""
    arch = layout.arch
    attention = attention_bytes(layout, seq_len, recompute_scores)
    blocks = 2 if cross_attention else 1
    norms = arch.norms_per_layer + (1 if cross_attention else 0)
    return blocks * attention + mlp_bytes(layout) + norms * norm_bytes(layout)


def loss_bytes(layout: Layout) -> float:
    """Logits and cross-entropy at the start of the backward pass, per token.

    The loss keeps its log-probabilities (float32 when the stack upcasts the logits;
    with ``torch.compile`` the fused kernel keeps the logits and recomputes the softmax),
    and the backward pass allocates two more logit-sized gradients. A chunked loss only
    holds one chunk's gradients at a time.
    """
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    if arch.kind == "encoder":
        return 0.0  # classification heads have a handful of outputs
    profile = request.profile
    loss_dtype = 4 if profile.loss_fp32 else dtype
    saved = dtype if request.compiled else loss_dtype
    transient: float = 2 * loss_dtype
    if request.chunked_loss or profile.loss_chunked:
        transient /= LOSS_CHUNKS
    kept = dtype if profile.logits_kept else 0
    return arch.vocab * (saved + transient + kept) + norm_bytes(layout) + dtype * arch.hidden


@dataclass(frozen=True)
class TrainingActivations:
    """Activation memory of one training micro-batch, in bytes."""

    layers: float  # what all layers keep (or their checkpoints)
    recompute: float  # one layer's activations rebuilt during backward (checkpointing only)
    loss: float  # logits and loss

    @property
    def total(self) -> float:
        """The activation part of the peak.

        The loss's backward finishes (and frees the logits) before the last checkpointed
        layer is recomputed, so the two never coexist: only the larger one counts.
        """
        return self.layers + max(self.recompute, self.loss)


def training_activations(layout: Layout) -> TrainingActivations:
    """Activations at the start of the backward pass for ``batch_size × seq_len`` tokens."""
    arch, request = layout.arch, layout.request
    tokens = request.batch_size * request.seq_len
    per_token = _all_layers_bytes(layout, request.seq_len, recompute_scores=request.grad_ckpt == "selective")
    loss = tokens * loss_bytes(layout)
    if request.grad_ckpt != "full":
        return TrainingActivations(tokens * per_token, 0.0, loss)
    # Full checkpointing keeps each layer's input and rebuilds one layer at a time in backward.
    stacks = arch.layers + arch.encoder_layers
    kept_layers = 2 if request.activation_offload else stacks  # offloading keeps ~2 layers in flight
    checkpoints = tokens * kept_layers * layout.compute_bytes * arch.hidden
    one_layer = tokens * layer_bytes(layout, request.seq_len, cross_attention=arch.kind == "encoder-decoder")
    return TrainingActivations(checkpoints, one_layer, loss)


def _all_layers_bytes(layout: Layout, seq_len: int, recompute_scores: bool) -> float:
    arch = layout.arch
    decoder = arch.layers * layer_bytes(layout, seq_len, arch.kind == "encoder-decoder", recompute_scores)
    encoder = arch.encoder_layers * layer_bytes(layout, seq_len, False, recompute_scores)
    return decoder + encoder


def inference_activations(layout: Layout) -> float:
    """Transient memory of the prefill pass (bytes): one layer's working set plus the logits.

    Nothing is kept for a backward pass, so only the widest moment of one layer counts:
    the MLP holding its input, gate, up and product (Pope et al. 2022 make the same
    observation). A serving stack pushes at most ``batched_tokens`` through at once.
    """
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    profile = request.profile
    tokens = request.batch_size * request.seq_len
    if profile.batched_tokens:
        tokens = min(tokens, profile.batched_tokens)
    experts = arch.experts_per_token if arch.is_moe else 1
    working = dtype * (2 * arch.hidden + 3 * arch.intermediate * experts) * tokens / request.gpus
    if request.attention == "eager":
        scores = arch.heads * request.seq_len**2 * request.batch_size / request.gpus
        working += (dtype + 4) * scores  # float32 scores and their softmax, one layer at a time
    logit_rows = tokens if profile.prefill_logits_all_tokens else request.batch_size
    logits = logit_rows * arch.vocab * (dtype if profile.prefill_logits_all_tokens else 2 * 4)
    return working + logits
