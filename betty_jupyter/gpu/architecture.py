"""A model's shape: the few numbers that decide how much memory it needs.

Parameter counts are derived from the shape, never typed in, so a Hugging Face
``config.json`` and a catalog entry go through exactly the same arithmetic. The catalog's
tests check the arithmetic against each model's published size.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Mapping

from ..errors import GpuEstimateError
from ..json_text import parse_json

LARGEST_FIELD = 2**31 - 1
"""The largest size a config.json field may give (layers, heads, widths, vocabulary): no model comes near it."""

Kind = Literal["decoder", "encoder", "encoder-decoder"]
MlpKind = Literal["gated", "plain"]

# LoRA can target these modules; the names are the Hugging Face ones researchers type.
ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Architecture:
    """The exact shape of a transformer, as its ``config.json`` describes it.

    ``layers`` counts decoder layers (or encoder layers for an encoder-only model);
    ``encoder_layers`` is only non-zero for encoder-decoder models such as T5.
    ``sliding_window_layers`` layers attend to at most ``sliding_window`` past tokens,
    which caps their KV cache (Mistral 7B v0.1: all 32; Gemma 2: every other layer).

    A mixture of experts has ``experts`` experts of width ``intermediate`` in ``moe_layers``
    of its layers (all of them when ``moe_layers`` is ``None``); its other layers have a
    dense MLP of width ``dense_intermediate``, and every MoE layer may add shared experts
    (``shared_intermediate`` wide in all). Multi-head latent attention (DeepSeek) is
    described by ``kv_lora_rank``, ``q_lora_rank``, ``rope_head_dim`` and ``v_head_dim``;
    ``head_dim`` is then the query/key head width (no-position part plus rotary part).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    qkv_bias: bool = False
    kind: Kind = "decoder"
    mlp: MlpKind = "gated"
    layer_norm: bool = False  # LayerNorm (weight and bias) instead of RMSNorm (weight only)
    linear_bias: bool = False  # every linear layer has a bias (BERT)
    norms_per_layer: int = 2
    experts: int = 1
    experts_per_token: int = 1
    sliding_window: int | None = None
    sliding_window_layers: int = 0
    encoder_layers: int = 0
    position_embeddings: int = 0  # learned absolute positions (BERT)
    token_types: int = 0
    relative_attention_buckets: int = 0  # T5's relative position bias
    dropout: bool = False  # dropout active during training (BERT, T5)
    score_softcap: bool = False  # attention scores soft-capped with tanh (Gemma 2's attn_logit_softcapping)
    max_context: int = 4096
    output_bias: bool = False  # the attention's output projection has a bias (attention_bias in Llama)
    mlp_bias: bool = False  # the MLP's projections have biases (mlp_bias in Llama)
    qk_norm: int = 0  # weights of the per-layer query and key norms (Qwen 3, Gemma 3, OLMo 2)
    fused: bool = False  # query/key/value and gate/up are single modules (Phi-3's qkv_proj, gate_up_proj)
    moe_layers: int | None = None  # layers with the mixture of experts (None: all, when there are experts)
    dense_intermediate: int = 0  # the MLP width of a MoE model's dense layers (0: ``intermediate``)
    shared_intermediate: int = 0  # total width of the shared experts of every MoE layer
    shared_expert_gate: bool = False  # a one-output gate on the shared experts (Qwen 2 MoE)
    q_lora_rank: int = 0  # multi-head latent attention: the query's low-rank width (0: a plain q_proj)
    kv_lora_rank: int = 0  # multi-head latent attention: the compressed key/value width (0: plain attention)
    rope_head_dim: int = 0  # multi-head latent attention: the rotary part of each query/key head
    v_head_dim: int = 0  # multi-head latent attention: the width of each value head
    model_type: str = ""  # the transformers family (``llama``, ``qwen3_moe``…) the shape came from
    config: str = field(default="", repr=False, compare=False)  # the config.json it was read from (JSON)

    @property
    def q_dim(self) -> int:
        """Width of the query projection (heads × head_dim; not always the hidden size)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projections (KV heads × head_dim)."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        """Whether the MLP is a mixture of experts."""
        return self.experts > 1

    @property
    def is_latent(self) -> bool:
        """Whether attention is multi-head latent attention (DeepSeek V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def moe_layer_count(self) -> int:
        """How many layers have the mixture of experts (0 for a dense model)."""
        if not self.is_moe:
            return 0
        return self.layers if self.moe_layers is None else self.moe_layers

    @property
    def value_dim(self) -> int:
        """Width of the attention's values (all heads), what the output projection reads."""
        return self.heads * self.v_head_dim if self.is_latent else self.q_dim

    def attention_params(self) -> int:
        """Parameters of one self-attention block (projections, their biases, query/key norms)."""
        if self.is_latent:
            q = (self.hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.q_dim
                 if self.q_lora_rank else self.hidden * self.q_dim)
            kv = (self.hidden * (self.kv_lora_rank + self.rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.heads * (self.head_dim - self.rope_head_dim + self.v_head_dim))
            biases = 0
            if self.output_bias:  # attention_bias: on q_a (or q), kv_a and o
                biases = (self.q_lora_rank or self.q_dim) + self.kv_lora_rank + self.rope_head_dim + self.hidden
            return q + kv + self.value_dim * self.hidden + biases + self.qk_norm
        weights = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        biases = 0
        if self.qkv_bias or self.linear_bias:
            biases += self.q_dim + 2 * self.kv_dim
        if self.linear_bias or self.output_bias:
            biases += self.hidden
        return weights + biases + self.qk_norm

    def mlp_params(self, width: int) -> int:
        """Parameters of one MLP of ``width`` (gated: gate, up, down)."""
        matrices = 3 if self.mlp == "gated" else 2
        biases = 0
        if self.linear_bias or self.mlp_bias:
            biases = (matrices - 1) * width + self.hidden
        return matrices * self.hidden * width + biases

    def expert_params(self) -> int:
        """Parameters of one MLP (one expert, for a mixture of experts)."""
        return self.mlp_params(self.intermediate)

    def moe_params(self) -> int:
        """Parameters of one mixture-of-experts block: experts, router, shared experts and their gate."""
        shared = self.mlp_params(self.shared_intermediate) if self.shared_intermediate else 0
        gate = self.hidden if self.shared_expert_gate else 0
        return self.experts * self.expert_params() + self.hidden * self.experts + shared + gate

    def dense_mlp_params(self) -> int:
        """Parameters of the MLP of a layer without experts."""
        return self.mlp_params(self.dense_intermediate or self.intermediate)

    def norm_params(self) -> int:
        """Parameters of one normalisation layer."""
        return self.hidden * (2 if self.layer_norm else 1)

    def layer_params(self, cross_attention: bool = False) -> int:
        """Parameters of one transformer layer (a MoE layer for a mixture of experts; with a cross-attention
        block for T5's decoder)."""
        mlp = self.moe_params() if self.is_moe else self.dense_mlp_params()
        attention = self.attention_params() * (2 if cross_attention else 1)
        norms = self.norms_per_layer + (1 if cross_attention else 0)
        return attention + mlp + norms * self.norm_params()

    def embedding_params(self) -> int:
        """Input embeddings: tokens, learned positions, token types, their LayerNorm."""
        extra = (self.position_embeddings + self.token_types) * self.hidden
        norm = self.norm_params() if self.kind == "encoder" else 0
        return self.vocab * self.hidden + extra + norm

    def head_params(self) -> int:
        """The output layer (language-model head, or BERT's pooler); zero when tied."""
        if self.kind == "encoder":
            return self.hidden * self.hidden + self.hidden  # pooler: dense + bias
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def final_norm_params(self) -> int:
        """The normalisation after the last layer (one per stack)."""
        if self.kind == "encoder":
            return 0  # BERT is post-norm: every layer ends with its own LayerNorm
        stacks = 2 if self.kind == "encoder-decoder" else 1
        return stacks * self.norm_params()

    def block_params(self) -> int:
        """Parameters of all transformer layers together."""
        decoder_cross = self.kind == "encoder-decoder"
        total = self.layers * self.layer_params(cross_attention=decoder_cross)
        if self.is_moe:  # the layers without experts have a dense MLP instead
            total -= (self.layers - self.moe_layer_count) * (self.moe_params() - self.dense_mlp_params())
        total += self.encoder_layers * self.layer_params()
        stacks = 2 if self.kind == "encoder-decoder" else 1
        total += stacks * self.relative_attention_buckets * self.heads
        return total

    def params(self) -> int:
        """Total parameter count, as ``sum(p.numel() for p in model.parameters())`` gives it."""
        return self.embedding_params() + self.block_params() + self.final_norm_params() + self.head_params()

    def active_params(self) -> int:
        """Parameters one token passes through (all but the unused experts of a MoE)."""
        unused = (self.experts - self.experts_per_token) * self.expert_params()
        return self.params() - self.moe_layer_count * unused

    def attention_linear_params(self) -> int:
        """Weights of one layer's attention projections (no biases or norms)."""
        if self.is_latent:
            return self.attention_params() - self.qk_norm - (self.q_lora_rank + self.kv_lora_rank) - (
                (self.q_lora_rank or self.q_dim) + self.kv_lora_rank + self.rope_head_dim + self.hidden
                if self.output_bias else 0)
        return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    def linear_params(self) -> int:
        """Weights of the linear layers inside the transformer layers (what 4/8-bit quantizes)."""
        attention = self.attention_linear_params()
        matrices = 3 if self.mlp == "gated" else 2
        if self.is_moe:
            moe = (self.experts * self.intermediate + self.shared_intermediate) * matrices * self.hidden
            dense = matrices * self.hidden * (self.dense_intermediate or self.intermediate)
            mlp_total = self.moe_layer_count * moe + (self.layers - self.moe_layer_count) * dense
        else:
            mlp_total = self.layers * matrices * self.hidden * self.intermediate
        decoder = self.layers * attention * (2 if self.kind == "encoder-decoder" else 1) + mlp_total
        return decoder + self.encoder_layers * (attention + matrices * self.hidden * self.intermediate)

    def largest_layer_params(self) -> int:
        """The largest single unit FSDP or ZeRO-3 gathers at once: a layer or the embedding."""
        layer = self.layer_params(cross_attention=self.kind == "encoder-decoder")
        if self.is_moe and self.moe_layer_count == 0:
            layer += self.dense_mlp_params() - self.moe_params()
        return max(layer, self.vocab * self.hidden)

    def largest_matrix(self) -> int:
        """Elements of the largest single weight matrix (a quantized layer is dequantized one at a time)."""
        widths = (self.intermediate, self.dense_intermediate, self.shared_intermediate)
        return max(self.hidden * max(widths), self.hidden * (self.q_dim + 2 * self.kv_dim))

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(input, output) width of each linear module LoRA can target, by the names researchers type."""
        return {
            "q_proj": (self.hidden, self.q_dim),
            "k_proj": (self.hidden, self.kv_dim),
            "v_proj": (self.hidden, self.kv_dim),
            "o_proj": (self.value_dim, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }

    def lora_modules(self, targets: tuple[str, ...]) -> tuple[str, ...]:
        """The modules the model really has for ``targets``: Phi-3's fused ``qkv_proj`` for any of q, k, v
        and ``gate_up_proj`` for gate or up; the names themselves otherwise."""
        if not self.fused:
            return targets
        fused = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
                 "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
        return tuple(dict.fromkeys(fused.get(name, name) for name in targets))

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Trainable LoRA parameters: rank × (in + out) per targeted module and layer (Hu et al. 2021).

        Modules are those the model has (:meth:`lora_modules`): on Phi-3, ``q_proj`` adapts the fused
        ``qkv_proj``, whose output is q, k and v together.
        """
        shapes = self.module_shapes()
        shapes["qkv_proj"] = (self.hidden, self.q_dim + 2 * self.kv_dim)
        shapes["gate_up_proj"] = (self.hidden, 2 * self.intermediate)
        per_layer = 0
        for module in self.lora_modules(targets):
            if module in ("gate_proj", "gate_up_proj") and self.mlp == "plain":
                continue
            width_in, width_out = shapes[module]
            copies = self.experts if module in (*MLP_MODULES, "gate_up_proj") else 1
            per_layer += copies * rank * (width_in + width_out)
        stacks = self.layers + self.encoder_layers
        return stacks * per_layer

    def matrix_shapes(self) -> list[tuple[int, int, int]]:
        """(rows, columns, how many) of every weight matrix, for Adafactor's factored statistics."""
        shapes = self.module_shapes()
        per_layer = [(*shapes[name], self.layers + self.encoder_layers) for name in ATTENTION_MODULES]
        mlp_names = MLP_MODULES if self.mlp == "gated" else ("up_proj", "down_proj")
        per_layer += [(*shapes[name], self.experts * (self.layers + self.encoder_layers)) for name in mlp_names]
        heads = 1 if self.tied_embeddings or self.kind == "encoder" else 2
        return [*per_layer, (self.vocab, self.hidden, heads)]

    def kv_per_layer(self) -> int:
        """Elements one layer caches per token: K and V of every KV head; with multi-head latent attention the
        compressed key/value and the rotary key part (``kv_lora_rank + rope_head_dim``, as transformers and vLLM
        cache it)."""
        if self.is_latent:
            return self.kv_lora_rank + self.rope_head_dim
        return 2 * self.kv_dim

    def kv_bytes_per_token(self, dtype_bytes: float, context: int | None = None) -> float:
        """KV-cache bytes for one token: 2 (K and V) × layers × KV heads × head_dim × bytes.

        This is vLLM's ``CacheEngine.get_cache_block_size`` per token. Layers with a sliding
        window only keep ``sliding_window`` tokens, so for a long ``context`` their share is
        averaged over the context.
        """
        per_layer = self.kv_per_layer() * dtype_bytes
        full_layers = self.layers - self.sliding_window_layers
        window_layers: float = self.sliding_window_layers
        if context and self.sliding_window and context > self.sliding_window:
            window_layers *= self.sliding_window / context
        cross = self.layers if self.kind == "encoder-decoder" else 0  # T5 caches encoder keys too
        return per_layer * (full_layers + window_layers + cross)

    def with_name(self, name: str) -> Architecture:
        """A copy under another name."""
        return replace(self, name=name)


def load_config(source: str | Path | Mapping[str, Any], name: str | None = None) -> Architecture:
    """Read a Hugging Face ``config.json`` (a path, a directory holding one, or the dict itself)."""
    if isinstance(source, Mapping):
        return _from_config(dict(source), name or str(source.get("_name_or_path") or "custom model"))
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    try:
        config = parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise GpuEstimateError(f"no config.json at {path}; pass a catalog name or the path to a config.json") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GpuEstimateError(f"{path} is not a readable JSON config ({exc}); download it again") from exc
    if not isinstance(config, dict):
        raise GpuEstimateError(f"{path} does not hold a JSON object; is it really a model's config.json?")
    return _from_config(config, name or path.parent.name or path.stem)


EXACT_FAMILIES = (
    "cwm", "deepseek_v3", "ernie4_5", "exaone", "exaone4", "flex_olmo", "gemma", "gemma2", "gemma3", "gemma3_text",
    "glm", "glm4", "glm4_moe", "got_ocr2", "granite", "granitemoe", "granitemoeshared", "helium", "hyperclovax",
    "internlm3", "iquestcoder", "llama", "llama4", "llama4_text", "mellum", "minicpm3", "ministral3", "mistral",
    "mixtral", "moss_transcribe_diarize", "olmo2", "olmo3", "olmoe", "phi3", "qwen2", "qwen2_moe", "qwen3",
    "qwen3_moe", "sarvam_mla", "seed_oss", "smollm3", "solar_open", "vaultgemma", "youtu",
)
"""The decoder families (transformers' ``model_type``) whose parameters and KV cache Betty reads exactly from a
config.json: a test builds each with transformers on ``meta`` and compares. T5 and BERT-style encoders have their
own readers; a config without a ``model_type`` is read as a Llama-shaped decoder."""
ENCODER_FAMILIES = ("t5", "mt5", "umt5", "bert", "roberta", "xlm-roberta")
STATE_SPACE_FAMILIES = (
    "bamba", "falcon_h1", "falcon_mamba", "granitemoehybrid", "jamba", "lfm2", "lfm2_moe", "lfm3", "mamba", "mamba2",
    "nemotron_h", "zamba", "zamba2",
)
"""State-space models and their hybrids with attention (Mamba, Jamba, Falcon-H1, Zamba, …): each layer of a Mamba
kind keeps a recurrent state and a convolution window instead of a KV cache, and its weights are not a Llama's, so
Betty refuses them by name rather than size them as a decoder of attention layers."""


def _from_config(config: dict[str, Any], name: str) -> Architecture:
    config = _text_model(config)
    model_type = str(config.get("model_type", "")).lower()
    if model_type in ("t5", "mt5", "umt5"):
        return _t5(config, name)
    if model_type in ("bert", "roberta", "xlm-roberta"):
        return _bert(config, name)
    if model_type in STATE_SPACE_FAMILIES:
        raise GpuEstimateError(
            f"Betty does not size {_shown(model_type)} models: they are state-space (Mamba) models or hybrids, whose "
            "layers keep a recurrent state rather than a KV cache; measure such a job's peak instead "
            "(docs/gpu.md#measured-peaks)")
    if model_type and model_type not in EXACT_FAMILIES:
        raise GpuEstimateError(
            f"Betty does not size {_shown(model_type)} models yet (it reads {len(EXACT_FAMILIES)} decoder families "
            "exactly, e.g. llama, mistral, mixtral, qwen3_moe, gemma3, phi3, deepseek_v3, llama4); pass a catalog "
            "name or the config.json of one of those")
    return _decoder(config, name, model_type)


def _text_model(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's own config: a multimodal config (Gemma 3, Llama 4, Mistral 3) holds it under
    ``text_config``; its family is the text config's ``model_type`` (or the outer one's with ``_text``)."""
    text = config.get("text_config")
    if not isinstance(text, dict) or any(key in config for key in ("hidden_size", "n_embd", "d_model")):
        return config
    outer = str(config.get("model_type", "")).lower()
    inner = {"tie_word_embeddings": config["tie_word_embeddings"]} if "tie_word_embeddings" in config else {}
    family = str(text.get("model_type") or (f"{outer}_text" if outer else "")).lower()
    return {**inner, **_TEXT_DEFAULTS.get(family, {}), "model_type": family, **text}


_TEXT_DEFAULTS: dict[str, dict[str, Any]] = {"gemma3_text": {"vocab_size": 262_208}}
"""Fields a published multimodal config leaves to transformers' defaults (Gemma 3's text_config has no vocabulary)."""


def _field(config: dict[str, Any], *keys: str, default: Any = None, least: int = 1) -> Any:
    """The first of ``keys`` present in ``config``, a whole number from ``least`` to :data:`LARGEST_FIELD`;
    an error naming the field when none is present or its value is not such a number (``NaN``, ``-4``, ``0``)."""
    for key in keys:
        if config.get(key) is not None:
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise GpuEstimateError(f"config.json field `{key}` should be a number, not {_shown(value)}")
            if not (isinstance(value, int) or (math.isfinite(value) and value.is_integer())) \
                    or not least <= value <= LARGEST_FIELD:
                raise GpuEstimateError(f"config.json field `{key}` is {_shown(value)}; a model's sizes are whole "
                                       f"numbers from {least} to {LARGEST_FIELD:,}")
            return int(value)
    if default is not None:
        return default
    raise GpuEstimateError(f"config.json has no `{keys[0]}` field; it is needed to size the model")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _decoder(config: dict[str, Any], name: str, model_type: str) -> Architecture:
    hidden = _field(config, "hidden_size", "n_embd", "d_model")
    heads = _field(config, "num_attention_heads", "n_head")
    layers = _field(config, "num_hidden_layers", "n_layer")
    head_dim = _field(config, "head_dim", default=max(1, hidden // heads))
    latent = _latent_attention(config) if config.get("kv_lora_rank") is not None else {}
    if latent:
        head_dim = latent.pop("head_dim")
    window = _field(config, "sliding_window", "attention_chunk_size", default=0, least=0) \
        if config.get("use_sliding_window", True) else 0
    window_layers = _window_layers(config, model_type, layers) if window else 0
    bias = bool(config.get("attention_bias", False))
    output_bias = bool(config.get("attention_out_bias", bias)) and model_type not in ("glm", "glm4")
    return Architecture(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=_field(config, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        intermediate=_field(config, "moe_intermediate_size", "intermediate_size", "n_inner", "ffn_dim")
        if _experts(config) > 1 else _field(config, "intermediate_size", "n_inner", "ffn_dim"),
        vocab=_field(config, "vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", model_type.startswith("gemma"))),
        qkv_bias=bias or model_type in ("qwen2", "qwen2_moe"),
        output_bias=output_bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
        norms_per_layer=4 if model_type in FOUR_NORM_FAMILIES else 2,
        qk_norm=_qk_norm(config, model_type, heads, head_dim),
        fused=model_type in FUSED_FAMILIES,
        sliding_window=(window or None) if window_layers else None,
        sliding_window_layers=window_layers,
        max_context=_field(config, "max_position_embeddings", default=4096),
        score_softcap=bool(config.get("attn_logit_softcapping")),
        model_type=model_type,
        config=_json_text(config),
        **_mixture(config, layers),
        **latent,
    )


QK_NORM_FAMILIES = ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "exaone4", "mellum")
"""Families whose attention normalises each query and key head (one head_dim-wide weight each)."""
WIDE_QK_NORM_FAMILIES = ("olmo2", "olmo3", "olmoe", "flex_olmo")
"""Families whose attention normalises all query heads together and all key heads together (OLMo 2)."""
FOUR_NORM_FAMILIES = ("gemma2", "gemma3", "gemma3_text", "glm4", "hyperclovax")
"""Families with a norm before and after both attention and MLP (four per layer)."""
FUSED_FAMILIES = ("phi3",)
"""Families whose query/key/value and gate/up projections are single modules (``qkv_proj``, ``gate_up_proj``)."""


def _qk_norm(config: dict[str, Any], model_type: str, heads: int, head_dim: int) -> int:
    """Weights of one layer's query and key norms."""
    if model_type in QK_NORM_FAMILIES:
        return 2 * head_dim
    if model_type in WIDE_QK_NORM_FAMILIES:
        return (heads + int(_field(config, "num_key_value_heads", default=heads))) * head_dim
    return 0


def _experts(config: dict[str, Any]) -> int:
    return int(_field(config, "num_local_experts", "num_experts", "n_routed_experts", default=1))


def _mixture(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """The mixture-of-experts fields of a config: experts, which layers have them, shared experts, dense width."""
    experts = _experts(config)
    if experts <= 1:
        return {}
    width = _field(config, "moe_intermediate_size", "intermediate_size", "n_inner", "ffn_dim")
    fields: dict[str, Any] = {
        "experts": experts,
        "experts_per_token": _field(config, "num_experts_per_tok", default=min(2, experts)),
        "moe_layers": _moe_layer_count(config, layers),
        "dense_intermediate": _field(config, "intermediate_size_mlp", "intermediate_size", default=width),
    }
    if config.get("n_shared_experts"):  # DeepSeek: n experts of the routed experts' width
        fields["shared_intermediate"] = _field(config, "n_shared_experts", least=0) * width
    elif config.get("shared_expert_intermediate_size"):  # Qwen 2 MoE: one wide shared expert and its gate
        fields["shared_intermediate"] = _field(config, "shared_expert_intermediate_size", least=0)
        fields["shared_expert_gate"] = True
    elif str(config.get("model_type", "")).startswith("llama4"):  # one shared expert of the experts' width
        fields["shared_intermediate"] = width
    return fields


def _moe_layer_count(config: dict[str, Any], layers: int) -> int:
    """How many of ``layers`` have experts: DeepSeek's first ``first_k_dense_replace`` are dense, Qwen's
    ``mlp_only_layers`` and those off its ``decoder_sparse_step`` are, and Llama 4 lists its ``moe_layers``."""
    if config.get("first_k_dense_replace") is not None:
        return max(0, layers - int(_field(config, "first_k_dense_replace", least=0)))
    listed = config.get("moe_layers")
    if isinstance(listed, list):
        return sum(1 for layer in set(listed) if isinstance(layer, int) and 0 <= layer < layers)
    step = config.get("interleave_moe_layer_step")
    if step is not None:
        return layers // int(_field(config, "interleave_moe_layer_step"))
    only = config.get("mlp_only_layers")
    dense = {layer for layer in only if isinstance(layer, int)} if isinstance(only, list) else set()
    step = _field(config, "decoder_sparse_step", default=1)
    return sum(1 for layer in range(layers) if layer not in dense and (layer + 1) % step == 0)


def _latent_attention(config: dict[str, Any]) -> dict[str, Any]:
    """Multi-head latent attention's widths (DeepSeek V2/V3); ``head_dim`` is the query/key head width."""
    rope = _field(config, "qk_rope_head_dim")
    return {
        "kv_lora_rank": _field(config, "kv_lora_rank"),
        "q_lora_rank": _field(config, "q_lora_rank", default=0, least=0),
        "rope_head_dim": rope,
        "v_head_dim": _field(config, "v_head_dim"),
        "head_dim": _field(config, "qk_nope_head_dim") + rope,
    }


def _json_text(config: dict[str, Any]) -> str:
    """``config`` as JSON text, kept so that the trace builds the model's own transformers class."""
    return json.dumps(config, sort_keys=True, default=str)


def _window_layers(config: dict[str, Any], model_type: str, layers: int) -> int:
    types = config.get("layer_types")
    if isinstance(types, list):
        return sum(1 for kind in types[:layers] if kind in ("sliding_attention", "chunked_attention"))
    if model_type == "llama4_text":  # rotary layers attend in chunks; every n-th layer has no rotary, attends fully
        flags = config.get("no_rope_layers")
        if isinstance(flags, list) and flags:
            return sum(1 for flag in flags[:layers] if flag)
        return layers - layers // int(_field(config, "no_rope_layer_interval", default=4))
    if config.get("sliding_window_pattern") is not None:  # Gemma 3: every n-th layer is global
        pattern = int(_field(config, "sliding_window_pattern"))
        return layers - layers // pattern
    if model_type in ("gemma2",):
        return layers // 2  # Gemma 2 alternates local and global attention
    if model_type.startswith("gemma3"):
        return layers - layers // 6  # transformers' default pattern: five local layers, then a global one
    if model_type.startswith("qwen2"):
        return max(0, layers - int(_field(config, "max_window_layers", default=layers, least=0)))
    return layers


def _bert(config: dict[str, Any], name: str) -> Architecture:
    hidden = _field(config, "hidden_size")
    heads = _field(config, "num_attention_heads")
    return Architecture(
        name=name,
        kind="encoder",
        layers=_field(config, "num_hidden_layers"),
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=max(1, hidden // heads),
        intermediate=_field(config, "intermediate_size"),
        vocab=_field(config, "vocab_size"),
        mlp="plain",
        layer_norm=True,
        linear_bias=True,
        qkv_bias=True,
        position_embeddings=_field(config, "max_position_embeddings", default=512),
        token_types=_field(config, "type_vocab_size", default=2, least=0),
        dropout=True,
        max_context=_field(config, "max_position_embeddings", default=512),
    )


def _t5(config: dict[str, Any], name: str) -> Architecture:
    layers = _field(config, "num_layers")
    heads = _field(config, "num_heads")
    gated = str(config.get("feed_forward_proj", "relu")).startswith("gated")
    return Architecture(
        name=name,
        kind="encoder-decoder",
        layers=_field(config, "num_decoder_layers", default=layers),
        encoder_layers=layers,
        hidden=_field(config, "d_model"),
        heads=heads,
        kv_heads=heads,
        head_dim=_field(config, "d_kv"),
        intermediate=_field(config, "d_ff"),
        vocab=_field(config, "vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", True)),
        mlp="gated" if gated else "plain",
        relative_attention_buckets=_field(config, "relative_attention_num_buckets", default=32, least=0),
        dropout=True,
        max_context=512,
    )
