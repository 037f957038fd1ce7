"""A Hugging Face causal language model built from Betty's own description of its shape, on ``meta``.

There is no download. A model read from a ``config.json`` is built from that config by its own
transformers class (``AutoModelForCausalLM.from_config``: Qwen 3's query/key norms, Phi-3's fused
``qkv_proj``, Gemma 3's layer types, a mixture of experts' shared experts are all there); a catalog
model from its published shape in its family's config class. Either way the model is built under
``torch.device("meta")``, so its tensors have shapes and dtypes but no memory. LoRA adapters are
added with ``peft`` exactly as a training script adds them, on the modules the model really has.

Weights and adapters are placed the way the Hugging Face stack places them for each
precision (the ``hf`` framework profile): full fine-tuning in ``bf16-mixed`` or ``fp16``
keeps float32 weights and lets autocast cast them; LoRA loads the base model in the
compute dtype and peft keeps the adapters in float32; ``bf16`` and ``fp32`` are pure.
With ``int8`` or ``nf4`` (QLoRA) the layers' linear weights are quantized as bitsandbytes
stores them (:mod:`.quantized`), everything else is bf16, and training computes under
bf16 autocast.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ...errors import GpuEstimateError
from ...json_text import parse_json
from ..architecture import Architecture
from ..request import EstimateRequest
from .experts import EVEN_ROUTING, register_even_routing
from .kernels import FLASH, MetaAutocast, register_flash_attention, register_selective
from .quantized import LAYER_MODULES, QuantizedLinear, quantize_layers
from .refusals import QUANTIZED

_HALF = {"bf16-mixed": torch.bfloat16, "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
         "int8": torch.bfloat16, "nf4": torch.bfloat16}  # quantized: the weights bitsandbytes leaves alone


@dataclass(frozen=True)
class Precision:
    """The dtypes one request puts where: stored weights, and the dtype autocast computes in (or none)."""

    weights: torch.dtype
    autocast: torch.dtype | None

    @classmethod
    def of(cls, request: EstimateRequest) -> Precision:
        """The dtypes of ``request``'s resolved precision (see the module docstring)."""
        precision = request.resolved_precision
        compute = _HALF[precision]
        mixed = precision in ("bf16-mixed", "fp16", *QUANTIZED)
        if request.method == "full":
            return cls(torch.float32 if mixed else compute, compute if mixed else None)
        return cls(compute, compute if mixed and request.training else None)


@contextmanager
def quiet_deprecations() -> Iterator[None]:
    """Silence the deprecation warnings transformers and peft give about their own APIs (not the researcher's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def config_for(arch: Architecture, attention: str) -> Any:
    """The transformers config object of ``arch``: its own config.json's, for its own family's class, when it
    came from one; else the catalog shape in its family's config class (Llama, Mistral, Mixtral, Qwen2, Gemma 2)."""
    if arch.config and arch.model_type:
        config = _published_config(arch)
    else:
        config = _shape_config(arch)
    if arch.is_moe:
        config._experts_implementation = EVEN_ROUTING
    config._attn_implementation = attention
    return config


def _published_config(arch: Architecture) -> Any:
    """``arch``'s config.json as its transformers family reads it, at ``arch.layers`` layers (per-layer lists cut)."""
    # lazy: transformers is the optional trace extra
    from transformers import AutoConfig

    fields = parse_json(arch.config)
    layers = fields.get("num_hidden_layers")
    for key, value in fields.items():
        if isinstance(value, list) and isinstance(layers, int) and len(value) == layers:
            fields[key] = value[:arch.layers]
    fields.update(num_hidden_layers=arch.layers, use_cache=False)
    for key in ("model_type", "architectures", "auto_map", "transformers_version", "_name_or_path"):
        fields.pop(key, None)
    try:
        with quiet_deprecations():
            return AutoConfig.for_model(arch.model_type, **fields)
    except Exception as error:  # the family's own validation, whose errors have many types: one line each
        raise GpuEstimateError(f"transformers does not accept this {arch.model_type} config "
                               f"({_first_line(error)}); drop --trace for the formula estimate") from error


def _first_line(error: Exception) -> str:
    """``error``'s message on one printable line, at most 160 characters (it may quote the config's values)."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(error)).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _shape_config(arch: Architecture) -> Any:
    # lazy: transformers is the optional trace extra
    from transformers import Gemma2Config, LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config

    common: dict[str, Any] = dict(
        vocab_size=arch.vocab, hidden_size=arch.hidden, intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers, num_attention_heads=arch.heads, num_key_value_heads=arch.kv_heads,
        head_dim=arch.head_dim, tie_word_embeddings=arch.tied_embeddings, max_position_embeddings=arch.max_context,
        use_cache=False,
    )
    config: Any
    if arch.is_moe:
        config = MixtralConfig(**common, num_local_experts=arch.experts, num_experts_per_tok=arch.experts_per_token,
                               sliding_window=arch.sliding_window)
    elif arch.norms_per_layer == 4:
        config = Gemma2Config(**common, sliding_window=arch.sliding_window or 4096)
    elif arch.qkv_bias:
        config = Qwen2Config(**common)
    elif arch.sliding_window and arch.sliding_window_layers == arch.layers:
        config = MistralConfig(**common, sliding_window=arch.sliding_window)
    else:
        config = LlamaConfig(**common)
    return config


def build_model(arch: Architecture, request: EstimateRequest, device: torch.device) -> torch.nn.Module:
    """``arch`` as a transformers causal LM on ``device``, with LoRA adapters when ``request`` trains them."""
    # lazy: transformers is the optional trace extra
    from transformers import AutoModelForCausalLM

    register_flash_attention()
    register_even_routing()
    attention = FLASH if request.attention == "flash" else "eager"
    precision = Precision.of(request)
    if request.grad_ckpt == "selective" and request.training:
        attention = register_selective(attention, _checkpointing(precision).get("context_fn"))
    config = config_for(arch, attention)
    with torch.device(device), quiet_deprecations():
        try:
            model: Any = AutoModelForCausalLM.from_config(config, dtype=precision.weights)
        except (AssertionError, ValueError, TypeError, KeyError, IndexError, RuntimeError) as error:
            raise GpuEstimateError(f"transformers cannot build {arch.name} from its config "
                                   f"({_first_line(error)}); drop --trace for the formula estimate") from error
        if request.resolved_precision in QUANTIZED:
            quantize_layers(model, request.resolved_precision, request.double_quant)
        if request.grad_ckpt == "full" and request.training:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=_checkpointing(precision))
        if request.adapters:
            model = _with_lora(model, request, arch.lora_modules(request.lora_targets))
    if request.training and not request.adapters:
        model.requires_grad_(True)
    if request.training:
        model.train()
    else:
        model.eval()
    built: torch.nn.Module = model
    return built


def largest_unit_bytes(model: torch.nn.Module, compute: torch.dtype) -> tuple[int, int]:
    """(weights as gathered, trainable gradients) in bytes of the largest unit FSDP or ZeRO-3 gathers at once.

    A unit is one transformer layer, or the input embedding; floating-point weights are gathered in the
    compute dtype, quantized ones as they are stored.
    """
    units: list[list[torch.nn.Parameter]] = []
    for name, module in model.named_modules():
        if name.split(".")[-1] in LAYER_MODULES and isinstance(module, torch.nn.ModuleList):
            units += [list(layer.parameters()) for layer in module]
        elif name.split(".")[-1] == "embed_tokens":
            units.append(list(module.parameters()))
    compute_bytes = compute.itemsize

    def gathered(parameter: torch.nn.Parameter) -> int:
        return int(parameter.numel() * (compute_bytes if parameter.is_floating_point() else parameter.element_size()))

    weights = max((sum(gathered(p) for p in unit) for unit in units), default=0)
    gradients = max((sum(p.numel() * p.element_size() for p in unit if p.requires_grad) for unit in units), default=0)
    return weights, gradients


def _checkpointing(precision: Precision) -> dict[str, Any]:
    """Non-reentrant checkpointing whose recomputation (in backward, on autograd's thread) casts as autocast does."""
    if precision.autocast is None:
        return {"use_reentrant": False}
    dtype = precision.autocast
    return {"use_reentrant": False, "context_fn": lambda: (nullcontext(), MetaAutocast(dtype))}


def _with_lora(model: torch.nn.Module, request: EstimateRequest, targets: tuple[str, ...]) -> torch.nn.Module:
    """peft's LoRA on ``targets``, the modules the model has (Phi-3's fused ``qkv_proj`` for ``q_proj``)."""
    # lazy: peft is the optional trace extra, and the adapters module builds on it
    from peft import LoraConfig, get_peft_model

    from .adapters import QuantizedLoraLinear  # lazy: subclasses peft's LoRA layer

    config = LoraConfig(r=request.lora_rank, lora_alpha=2 * request.lora_rank, lora_dropout=0.0,
                        target_modules=list(targets), task_type="CAUSAL_LM")
    config._register_custom_module({QuantizedLinear: QuantizedLoraLinear})  # peft's lora.bnb layers
    adapted: torch.nn.Module = get_peft_model(model, config)
    return adapted
