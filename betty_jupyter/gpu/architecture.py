"""A model's shape: the few numbers that decide how much memory it needs.

Parameter counts are derived from the shape, never typed in, so a Hugging Face
``config.json`` and a catalog entry go through exactly the same arithmetic. The catalog's
tests check the arithmetic against each model's published size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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

    def attention_params(self) -> int:
        """Parameters of one self-attention block (projections and their biases)."""
        weights = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        biases = 0
        if self.qkv_bias or self.linear_bias:
            biases += self.q_dim + 2 * self.kv_dim
        if self.linear_bias:
            biases += self.hidden
        return weights + biases

    def expert_params(self) -> int:
        """Parameters of one MLP (one expert, for a mixture of experts)."""
        matrices = 3 if self.mlp == "gated" else 2
        biases = self.intermediate + self.hidden if self.linear_bias else 0
        return matrices * self.hidden * self.intermediate + biases

    def norm_params(self) -> int:
        """Parameters of one normalisation layer."""
        return self.hidden * (2 if self.layer_norm else 1)

    def layer_params(self, cross_attention: bool = False) -> int:
        """Parameters of one transformer layer (with a cross-attention block for T5's decoder)."""
        router = self.hidden * self.experts if self.is_moe else 0
        attention = self.attention_params() * (2 if cross_attention else 1)
        norms = self.norms_per_layer + (1 if cross_attention else 0)
        return attention + self.experts * self.expert_params() + router + norms * self.norm_params()

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
        return self.params() - self.layers * unused

    def linear_params(self) -> int:
        """Weights of the linear layers inside the transformer layers (what 4/8-bit quantizes)."""
        attention = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        matrices = 3 if self.mlp == "gated" else 2
        mlp = self.experts * matrices * self.hidden * self.intermediate
        decoder = self.layers * (attention * (2 if self.kind == "encoder-decoder" else 1) + mlp)
        return decoder + self.encoder_layers * (attention + mlp)

    def largest_layer_params(self) -> int:
        """The largest single unit FSDP or ZeRO-3 gathers at once: a layer or the embedding."""
        layer = self.layer_params(cross_attention=self.kind == "encoder-decoder")
        return max(layer, self.vocab * self.hidden)

    def largest_matrix(self) -> int:
        """Elements of the largest single weight matrix (a quantized layer is dequantized one at a time)."""
        return max(self.hidden * self.intermediate, self.hidden * (self.q_dim + 2 * self.kv_dim))

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(input, output) width of each linear module LoRA can target."""
        return {
            "q_proj": (self.hidden, self.q_dim),
            "k_proj": (self.hidden, self.kv_dim),
            "v_proj": (self.hidden, self.kv_dim),
            "o_proj": (self.q_dim, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Trainable LoRA parameters: rank × (in + out) per targeted module and layer (Hu et al. 2021)."""
        shapes = self.module_shapes()
        per_layer = 0
        for module in targets:
            width_in, width_out = shapes[module]
            copies = self.experts if module in MLP_MODULES else 1
            if module == "gate_proj" and self.mlp == "plain":
                continue
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

    def kv_bytes_per_token(self, dtype_bytes: float, context: int | None = None) -> float:
        """KV-cache bytes for one token: 2 (K and V) × layers × KV heads × head_dim × bytes.

        This is vLLM's ``CacheEngine.get_cache_block_size`` per token. Layers with a sliding
        window only keep ``sliding_window`` tokens, so for a long ``context`` their share is
        averaged over the context.
        """
        per_layer = 2 * self.kv_dim * dtype_bytes
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


def _from_config(config: dict[str, Any], name: str) -> Architecture:
    model_type = str(config.get("model_type", "")).lower()
    if model_type in ("t5", "mt5", "umt5"):
        return _t5(config, name)
    if model_type in ("bert", "roberta", "xlm-roberta"):
        return _bert(config, name)
    return _decoder(config, name, model_type)


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
    experts = _field(config, "num_local_experts", "num_experts", default=1)
    window = _field(config, "sliding_window", default=0, least=0) if config.get("use_sliding_window", True) else 0
    return Architecture(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=_field(config, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        intermediate=_field(config, "intermediate_size", "n_inner", "ffn_dim"),
        vocab=_field(config, "vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", model_type.startswith("gemma"))),
        qkv_bias=bool(config.get("attention_bias", False)) or model_type.startswith("qwen2"),
        norms_per_layer=4 if model_type in ("gemma2", "gemma3") else 2,
        experts=experts,
        experts_per_token=_field(config, "num_experts_per_tok", default=min(2, experts)),
        sliding_window=window or None,
        sliding_window_layers=_window_layers(config, model_type, layers) if window else 0,
        max_context=_field(config, "max_position_embeddings", default=4096),
        score_softcap=bool(config.get("attn_logit_softcapping")),
    )


def _window_layers(config: dict[str, Any], model_type: str, layers: int) -> int:
    types = config.get("layer_types")
    if isinstance(types, list):
        return sum(1 for kind in types if kind == "sliding_attention")
    if model_type in ("gemma2",):
        return layers // 2  # Gemma 2 alternates local and global attention
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
