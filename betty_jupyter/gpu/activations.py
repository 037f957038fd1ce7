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
* a fused QKV adapter that pads ``B``'s output to the fused width (LitGPT), which keeps
  that output;
* frozen weights (LoRA): PyTorch only saves a linear layer's input when its weight needs
  a gradient, so a frozen projection without an adapter saves nothing; nor does a frozen
  4-bit one in bitsandbytes since 0.43.2 (before, ``MatMul4Bit`` kept every input, which
  made QLoRA need more activation memory than LoRA), while its 8-bit matmul still does;
* ``torch.compile``, whose fused kernels recompute the activation function instead of
  saving its output;
* torchtitan's selective checkpointing: ``op`` saves the output of every other matmul
  (and of the attention kernel) and recomputes the rest; ``layer`` checkpoints every Nth
  layer and keeps everything of the others;
* what the traced step showed (``docs/gpu.md``, "Calibration"): peft's per-adapter copies of
  a layer's input, transformers' float32 eager softmax, and torch AMP's float32 residual
  stream, cast once per linear layer.

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
    def autocast(self) -> bool:
        """Whether the step runs under autocast (``bf16-mixed``, ``fp16``; for a quantized base, the compute dtype)."""
        return self.request.resolved_precision in ("bf16-mixed", "fp16", "int8", "nf4")

    @property
    def float32_stream(self) -> bool:
        """Whether the residual stream is float32 under autocast: full fine-tuning of float32 weights (torch AMP).

        The embeddings, residual additions and norms then run in float32, and autocast casts a
        norm's output to the half dtype separately for every linear layer that reads it (its cast
        cache keeps only the weights' casts).
        """
        request = self.request
        amp = request.method == "full" and request.resolved_precision in ("bf16-mixed", "fp16")
        return amp and not request.fsdp_mixed_precision  # FSDP2's policy computes in bf16 throughout

    @property
    def adapter_input_bytes(self) -> float:
        """Bytes per element of the copy of its input each adapted module keeps (0: adapters share the input).

        peft casts a layer's input to its adapters' dtype before them. With float32 adapters
        over half-precision activations that is a new tensor for every adapted module: a
        float32 one the adapter keeps, or under autocast a float32 one that autocast casts
        back to the half dtype, a copy the adapter keeps. Adapters in the activations' dtype
        share the input (and only then does one input serve several projections). So do
        peft's adapters over bitsandbytes layers (int8, nf4), which skip the cast under
        autocast, where a quantized base always runs.
        """
        request = self.request
        if not request.adapters or not request.profile.adapter_fp32 or self.compute_bytes == 4 or self.quantized:
            return 0.0
        return float(self.compute_bytes if self.autocast else 4)

    @property
    def adapter_output_bytes(self) -> float:
        """Bytes per element of the adapter's rank-wide ``A`` output, which ``B`` keeps."""
        return 4.0 if self.adapter_input_bytes == 4 else float(self.compute_bytes)

    def input_bytes(self, modules: tuple[str, ...], width: int, after_norm: bool = False) -> float:
        """What the linear layers ``modules`` (sharing one input ``width`` wide) keep of it, per token.

        ``after_norm``: the input is a norm's output, which a float32 stream casts per layer.
        """
        if after_norm and self.float32_stream:
            return width * self.compute_bytes * sum(1 for m in modules if self.saves_input(m))
        copy = self.adapter_input_bytes
        if self.request.adapters and self.request.profile.adapter_dropout:
            return width * self._dropout_input_bytes(modules)
        if not copy:
            return width * self.compute_bytes if any(self.saves_input(m) for m in modules) else 0.0
        copies = sum(1 for m in modules if m in self.request.lora_targets)
        # Besides the adapters' copies, the input itself is kept only by a quantized matmul that keeps it.
        return width * (copy * copies + (self.compute_bytes if self.keeps_quantized_inputs else 0))

    def _dropout_input_bytes(self, modules: tuple[str, ...]) -> float:
        """Per element of an input the ``modules`` share, when LoRA dropout is on.

        Each adapter's dropout makes a dropped copy, which its ``A`` keeps, and a 1-byte mask
        (one adapter for Q, K and V when the stack fuses them). The input itself is kept only by
        a quantized matmul that keeps it.
        """
        targeted = sum(1 for m in modules if m in self.request.lora_targets)
        if targeted and self.request.profile.fused_qkv and "q_proj" in modules:
            targeted = 1
        kept = self.compute_bytes if self.keeps_quantized_inputs and any(self.saves_input(m) for m in modules) else 0
        return kept + targeted * (self.compute_bytes + 1)

    @property
    def profile_upcasts_norm(self) -> bool:
        """Whether normalisation keeps a float32 copy of its input."""
        return self.request.profile.norm_upcast and not self.request.compiled and not self.arch.layer_norm


def norm_bytes(layout: Layout, width: int | None = None) -> float:
    """One normalisation of ``width`` (the hidden size): its input (float32 when upcast) plus the normalised
    tensor the weight's gradient needs."""
    arch, dtype = layout.arch, layout.compute_bytes
    width = arch.hidden if width is None else width
    saved = width * (4 if layout.profile_upcasts_norm or layout.float32_stream else dtype)
    trains_norm = layout.request.method == "full" and not arch.layer_norm and not layout.request.compiled
    normalised = 4 if layout.float32_stream else dtype
    return saved + (normalised * width if trains_norm else 0)


def attention_bytes(layout: Layout, seq_len: int, recompute_scores: bool = False) -> float:
    """One attention block: Korthikanti's ``11·h + 5·a·s`` generalised (see the module docstring)."""
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    total = layout.input_bytes(("q_proj", "k_proj", "v_proj"), arch.hidden, after_norm=True)  # the projections' input
    kv_width = arch.q_dim if request.attention in request.profile.expands_kv_heads else arch.kv_dim
    total += dtype * (arch.q_dim + 2 * kv_width)  # Q, K, V as the attention kernel keeps them
    if arch.qk_norm:  # query and key norms (Qwen 3, Gemma 3, OLMo 2) keep their inputs like any norm
        total += norm_bytes(layout, arch.q_dim + arch.kv_dim)
    if request.attention == "flash":
        total += dtype * arch.q_dim + 4 * arch.heads  # output and log-sum-exp (float32)
    elif not recompute_scores:
        total += scores_bytes(layout) * arch.heads * seq_len
    total += layout.input_bytes(("o_proj",), arch.q_dim)  # the output projection's input (a contiguous copy)
    if arch.dropout:
        total += arch.hidden  # dropout mask after the output projection (1 byte)
    total += padded_adapter_bytes(layout)
    return total + _adapter_bytes(layout, ("q_proj", "k_proj", "v_proj", "o_proj"))


def padded_adapter_bytes(layout: Layout) -> float:
    """The output of a fused QKV adapter's ``B`` that its padding keeps, per token (0 where nothing pads it).

    LitGPT's ``LoRAQKVLinear`` adapts some of Q, K and V with one ``B`` and pads its output to
    the fused width by ``index_copy`` into zeros (``zero_pad``); ``index_copy``'s backward keeps
    its source. Adapting all three needs no padding.
    """
    arch, request = layout.arch, layout.request
    if not request.adapters or not request.profile.pads_qkv_adapter:
        return 0.0
    widths = {"q_proj": arch.q_dim, "k_proj": arch.kv_dim, "v_proj": arch.kv_dim}
    adapted = [module for module in widths if module in request.lora_targets]
    if not adapted or len(adapted) == len(widths):
        return 0.0
    return layout.adapter_output_bytes * sum(widths[module] for module in adapted)


def scores_bytes(layout: Layout) -> float:
    """What eager attention keeps per score (one head, one pair of tokens).

    Korthikanti et al.'s GPT and BERT keep the softmax output and its dropped copy in the
    activations' dtype, and a 1-byte dropout mask. transformers' eager attention for decoder
    models (Llama, Mistral, Qwen2, Gemma 2) computes the softmax in float32 and keeps it, and
    its cast back to the activations' dtype when that is narrower; its dropout is off in
    training (``attention_dropout=0``). Soft-capped scores (Gemma 2) also keep ``tanh``'s output.
    """
    arch, dtype = layout.arch, layout.compute_bytes
    if arch.kind == "decoder":
        return 4 + (dtype if dtype < 4 else 0) + (dtype if arch.score_softcap else 0)
    return 2 * dtype + (1 if arch.dropout else 0)


def mlp_bytes(layout: Layout) -> float:
    """One MLP (per routed expert): inputs of the trainable projections and the activation function."""
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    width = arch.intermediate
    total = layout.input_bytes(("gate_proj", "up_proj"), arch.hidden, after_norm=True)
    if arch.mlp == "gated":
        total += 2 * dtype * width  # gate output (the activation's input) and up output
        if not request.compiled:
            total += dtype * width  # activation output, kept for the product's backward
    else:
        total += dtype * width  # activation's input
    total += layout.input_bytes(("down_proj",), width)  # the down projection's input
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
    return targeted * layout.adapter_output_bytes * layout.request.lora_rank  # A's output, kept for B


def layer_bytes(layout: Layout, seq_len: int, cross_attention: bool = False, recompute_scores: bool = False) -> float:
    """Everything one layer keeps for backward, per token."""
    arch = layout.arch
    attention = attention_bytes(layout, seq_len, recompute_scores)
    blocks = 2 if cross_attention else 1
    norms = arch.norms_per_layer + (1 if cross_attention else 0)
    return blocks * attention + mlp_bytes(layout) + norms * norm_bytes(layout)


def loss_bytes(layout: Layout) -> float:
    """Logits and cross-entropy at the start of the backward pass, per token.

    Uncompiled, the loss keeps its log-probabilities (float32 when the stack upcasts the
    logits) and the backward pass allocates two more logit-sized gradients. Compiled
    (when the stack compiles its loss), one fused kernel keeps the logits it is given and
    writes their gradient once, in their dtype: a chunked loss is given each chunk's bf16
    logits (it upcasts inside), an unchunked one the logits the model already upcast, whose
    gradient the upcast's backward then casts back. A chunked loss only holds one chunk's
    gradients at a time. A recipe that keeps the logits referenced through the backward
    pass (``logits_kept``) adds them, in the loss's dtype.
    """
    arch, request, dtype = layout.arch, layout.request, layout.compute_bytes
    if arch.kind == "encoder":
        return 0.0  # classification heads have a handful of outputs
    profile = request.profile
    loss_dtype = 4 if profile.loss_fp32 else dtype
    chunked = request.chunked_loss or profile.loss_chunked
    if request.compiled and profile.compiles_loss:
        given = dtype if chunked else loss_dtype
        saved: float = given
        transient: float = given + (dtype if given != dtype else 0)
    else:
        saved, transient = loss_dtype, 2 * loss_dtype
    if chunked:
        transient /= LOSS_CHUNKS
    kept = loss_dtype if profile.logits_kept else 0
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
    stacks = arch.layers + arch.encoder_layers
    checkpoint = layout.compute_bytes * arch.hidden  # a checkpointed layer keeps its input
    one_layer = layer_bytes(layout, request.seq_len, cross_attention=arch.kind == "encoder-decoder")
    if request.grad_ckpt == "layer":
        checkpointed = checkpointed_layers(stacks, request.ckpt_every)
        kept = per_token * (stacks - checkpointed) / stacks + checkpointed * checkpoint
        return TrainingActivations(tokens * kept, tokens * one_layer if checkpointed else 0.0, loss)
    if request.grad_ckpt == "op":
        saved = checkpoint + op_saved_bytes(layout)
        return TrainingActivations(tokens * stacks * saved, tokens * max(one_layer - saved, 0.0), loss)
    if request.grad_ckpt != "full":
        return TrainingActivations(tokens * per_token, 0.0, loss)
    # Full checkpointing keeps each layer's input and rebuilds one layer at a time in backward.
    kept_layers = 2 if request.activation_offload else stacks  # offloading keeps ~2 layers in flight
    return TrainingActivations(tokens * kept_layers * checkpoint, tokens * one_layer, loss)


def checkpointed_layers(layers: int, every: int) -> int:
    """Layers torchtitan checkpoints with ``selective_ac_option = every``: the every-th, 2·every-th…"""
    return layers // every


def op_saved_bytes(layout: Layout) -> float:
    """What one layer keeps per token under torchtitan's op-level selective checkpointing.

    Its policy saves the attention kernel's output (flash or memory-efficient: output and
    log-sum-exp) and the output of every other ``aten.mm`` of the layer, counting from the
    first: the 1st, 3rd, 5th… (in a Llama layer q, v, gate and down). Everything else is
    recomputed in backward.
    """
    arch, dtype = layout.arch, layout.compute_bytes
    mlp = [arch.intermediate, arch.intermediate, arch.hidden] if arch.mlp == "gated" else [arch.intermediate,
                                                                                          arch.hidden]
    widths = [arch.q_dim, arch.kv_dim, arch.kv_dim, arch.hidden] + mlp * (arch.experts_per_token if arch.is_moe else 1)
    saved = sum(widths[::2]) * dtype
    if layout.request.attention == "flash":
        saved += dtype * arch.q_dim + 4 * arch.heads
    return float(saved)


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
        # One layer's scores at the softmax: the scores, a float32 copy the softmax reads (when they are
        # narrower) and its float32 output, beside the layer's input, Q, K and V.
        scores = arch.heads * request.seq_len**2 * request.batch_size / request.gpus
        around = dtype * (2 * arch.hidden + arch.q_dim + 2 * arch.kv_dim) * tokens / request.gpus
        working = max(working, (dtype + 4 + (4 if dtype < 4 else 0)) * scores + around)
    logit_rows = tokens if profile.prefill_logits_all_tokens else request.batch_size
    logits = logit_rows * arch.vocab * (dtype if profile.prefill_logits_all_tokens else 2 * 4)
    return working + logits
