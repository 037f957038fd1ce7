"""Every model family is sized from its own config exactly: Betty's parameter count and KV cache per token against
transformers' own model built on ``meta`` tensors, for each causal-LM family transformers ships, and for published
configs of the families researchers name most (mixtures of experts with shared experts, latent attention,
interleaved experts, sliding-window layers, multimodal configs with a ``text_config``).

The comparisons with transformers need the trace extra (torch, transformers); the published sizes need nothing.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import EstimateRequest, estimate, gpu_type, load_config
from betty_jupyter.gpu.architecture import ENCODER_FAMILIES, EXACT_FAMILIES, Architecture

HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))
needs_extra = pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers) is not installed")
GIB = 2**30
SWEEP_LAYERS = 6  # enough for DeepSeek's three dense layers and Gemma 3's five local layers before a global one

# Published config.json files (the fields that size the model), each from its model card's repository.
QWEN3_30B_A3B = {  # Qwen/Qwen3-30B-A3B: 30.5B parameters, 3.3B activated
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False,
    "vocab_size": 151936,
}
GEMMA3_27B = {  # google/gemma-3-27b-it: 27B parameters (text model; the vision tower adds 0.4B)
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "image_token_index": 262144, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024, "sliding_window_pattern": 6},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1: 46.7B parameters
    "architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000,
}
PHI4 = {  # microsoft/phi-4: 14.7B parameters
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 5120,
    "intermediate_size": 17920, "max_position_embeddings": 16384, "model_type": "phi3", "num_attention_heads": 40,
    "num_hidden_layers": 40, "num_key_value_heads": 10, "original_max_position_embeddings": 16384,
    "rms_norm_eps": 1e-05, "rope_theta": 250000, "sliding_window": None, "tie_word_embeddings": False,
    "vocab_size": 100352,
}
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3: 671B parameters (37B activated) without its multi-token-prediction module
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280,
}
LLAMA4_MAVERICK = {  # meta-llama/Llama-4-Maverick-17B-128E: 400B parameters, 17B activated; experts every other layer
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {"attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128, "hidden_act": "silu",
                    "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                    "interleave_moe_layer_step": 2, "max_position_embeddings": 1048576, "model_type": "llama4_text",
                    "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
                    "num_key_value_heads": 8, "num_local_experts": 128, "rms_norm_eps": 1e-05,
                    "rope_theta": 500000.0, "use_qk_norm": False, "vocab_size": 202048},
    "tie_word_embeddings": False,
}
PUBLISHED = {  # name: (config, published parameters, published activated parameters or None)
    "Qwen3-30B-A3B": (QWEN3_30B_A3B, 30.5e9, 3.3e9),
    "Gemma-3-27B": (GEMMA3_27B, 27.0e9, None),
    "Mixtral-8x7B": (MIXTRAL_8X7B, 46.7e9, 12.9e9),
    "Phi-4": (PHI4, 14.7e9, None),
    "DeepSeek-V3": (DEEPSEEK_V3, 671e9, 37e9),
    "Llama-4-Maverick": (LLAMA4_MAVERICK, 400e9, 17e9),
}
REQUIRED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
            "gemma3_text", "phi3", "deepseek_v3", "llama4_text", "olmo2", "glm4_moe")


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_a_published_config_gives_its_published_size(name: str) -> None:
    config, total, active = PUBLISHED[name]
    arch = load_config(config, name=name)
    assert abs(arch.params() / total - 1) < 0.01, (name, arch.params())
    if active is not None:
        assert abs(arch.active_params() / active - 1) < 0.04, (name, arch.active_params())


def test_qwen3_30b_a3b_fits_an_h100_for_inference() -> None:
    arch = load_config(QWEN3_30B_A3B)
    assert arch.intermediate == 768 and arch.experts == 128 and arch.qk_norm == 256
    result = estimate(arch, EstimateRequest(method="inference", batch_size=1, seq_len=4096))
    assert 56 < result.breakdown["weights"] < 58  # 30.5B in bf16
    assert result.fits(gpu_type("h100"))


def test_gemma3_keeps_a_full_cache_in_one_layer_of_six() -> None:
    arch = load_config(GEMMA3_27B)
    assert (arch.layers, arch.sliding_window, arch.sliding_window_layers, arch.vocab) == (62, 1024, 52, 262208)
    kv = arch.kv_bytes_per_token(2, context=32768) * 32768 / GIB
    assert kv == pytest.approx(2.91, abs=0.005)
    by_types = load_config({**GEMMA3_27B, "text_config": {
        **{k: v for k, v in GEMMA3_27B["text_config"].items() if k != "sliding_window_pattern"},  # type: ignore[union-attr]
        "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(62)]}})
    assert by_types.sliding_window_layers == 52 and by_types.params() == arch.params()


def test_deepseek_v3_reads_latent_attention_shared_experts_and_dense_layers() -> None:
    arch = load_config(DEEPSEEK_V3)
    assert (arch.moe_layer_count, arch.shared_intermediate, arch.dense_intermediate) == (58, 2048, 18432)
    assert arch.kv_bytes_per_token(2) == 61 * (512 + 64) * 2  # the compressed latent, not 128 heads of K and V


def test_phi4_adapts_its_fused_projections() -> None:
    arch = load_config(PHI4)
    assert arch.lora_modules(("q_proj", "v_proj")) == ("qkv_proj",)
    assert arch.lora_params(8, ("q_proj", "v_proj")) == 40 * 8 * (5120 + 5120 + 2 * 1280)


def test_a_family_not_read_exactly_is_refused_in_one_line() -> None:
    with pytest.raises(GpuEstimateError, match="does not size 'mamba' models") as refused:
        load_config({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280})
    assert "\n" not in str(refused.value)
    with pytest.raises(GpuEstimateError) as refused:  # a model_type with control characters stays one line
        load_config({"model_type": "x\n\x1b[31mred", "hidden_size": 8})
    assert "\n" not in str(refused.value) and "\x1b" not in str(refused.value)


def _text_config(model_type: str) -> Any:
    """transformers' default config of ``model_type``'s language model, cut to :data:`SWEEP_LAYERS` layers."""
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]()
    try:
        config = config.get_text_config()
    except ValueError:  # several text models (encoder-decoder speech models): not a causal LM family Betty reads
        return None
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return None
    for key, value in list(vars(config).items()):
        if isinstance(value, list) and len(value) == layers:
            setattr(config, key, value[:SWEEP_LAYERS])
    config.num_hidden_layers = SWEEP_LAYERS
    return config


def _measured(config: Any) -> tuple[int, int, int]:
    """(parameters, KV-cache bytes for one bf16 token, sliding-window layers) of transformers' own model."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        cache = model(input_ids=torch.zeros((1, 1), dtype=torch.long, device="meta"), use_cache=True).past_key_values
    kv = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values)
             if isinstance(t, torch.Tensor))
    windowed = sum(1 for layer in cache.layers if "Sliding" in type(layer).__name__ or "Chunked" in type(layer).__name__)
    return params, kv, windowed


@needs_extra
def test_every_family_is_sized_exactly_or_refused() -> None:
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # default configs warn about their own token ids
    try:
        wrong, sized = _sweep(sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert not wrong, wrong
    assert set(REQUIRED) <= set(sized), set(REQUIRED) - set(sized)


def _sweep(families: list[str]) -> tuple[list[Any], list[str]]:
    """(families sized wrong with Betty's and transformers' numbers, families sized) of ``families``."""
    wrong: list[Any] = []
    sized: list[str] = []
    for model_type in families:
        if model_type in ENCODER_FAMILIES:
            continue  # read as the encoder with its pooler, not as a language-model head
        if model_type not in EXACT_FAMILIES:
            with pytest.raises(GpuEstimateError, match="does not size"):
                load_config({"model_type": model_type, "hidden_size": 64})
            continue
        config = _text_config(model_type)
        assert config is not None, model_type
        arch = load_config(config.to_dict())
        params, kv, windowed = _measured(config)
        got = (arch.params(), arch.kv_bytes_per_token(2), arch.sliding_window_layers)
        if got != (params, kv, windowed):
            wrong.append((model_type, got, (params, kv, windowed)))
        sized.append(model_type)
    return wrong, sized


@needs_extra
@pytest.mark.parametrize("name", list(PUBLISHED))
def test_a_published_config_matches_transformers_model(name: str) -> None:
    from transformers import AutoConfig

    config, _, _ = PUBLISHED[name]
    arch = load_config(config)
    text = dict(config.get("text_config", config))  # type: ignore[arg-type]
    text.pop("model_type", None)
    built = AutoConfig.for_model(arch.model_type, **text)
    params, kv, windowed = _measured(built)
    assert (arch.params(), arch.kv_bytes_per_token(2), arch.sliding_window_layers) == (params, kv, windowed)



SMALL = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "intermediate_size_mlp": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
         "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
         "n_group": 2, "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8,
         "qk_nope_head_dim": 8, "v_head_dim": 16, "sliding_window": 8, "attention_chunk_size": 8}


def small(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """``config`` with the same families and layer layout, its widths cut to :data:`SMALL`'s and ``layers`` deep."""
    text = config.get("text_config", config)
    cut = {key: SMALL[key] for key in text if key in SMALL}
    cut.update(num_hidden_layers=layers, pad_token_id=None, bos_token_id=None, eos_token_id=None)
    if "moe_layers" in text:
        cut["moe_layers"] = [layer for layer in text["moe_layers"] if layer < layers]
    if "text_config" in config:
        return {**config, "text_config": {**text, **cut}}
    return {**config, **cut}


@needs_extra
@pytest.mark.parametrize("name", list(PUBLISHED))
def test_the_trace_builds_the_real_model_and_adapts_the_modules_it_has(name: str) -> None:
    from betty_jupyter.gpu.trace import trace_estimate

    arch = load_config(small(PUBLISHED[name][0], layers=4), name=name)
    inference = trace_estimate(arch, EstimateRequest(method="inference", batch_size=1, seq_len=16))
    assert inference.params == arch.params()  # Qwen 3's query/key norms, DeepSeek's latent attention: all there
    if arch.is_latent:
        with pytest.raises(GpuEstimateError, match="latent attention"):
            trace_estimate(arch, EstimateRequest(method="lora", batch_size=1, seq_len=16))
        return
    request = EstimateRequest(method="lora", batch_size=1, seq_len=16, lora_rank=8, lora_targets=("q_proj", "v_proj"))
    lora = trace_estimate(arch, request)
    assert lora.trainable_params == arch.lora_params(8, ("q_proj", "v_proj")) > 0


@needs_extra
def test_a_deep_mixture_of_many_experts_is_traced_at_two_depths_and_extended(monkeypatch: Any) -> None:
    from betty_jupyter.gpu.trace import trace_estimate

    extended = importlib.import_module("betty_jupyter.gpu.trace.extended")  # the module, not its function
    monkeypatch.setattr(extended, "EXPERT_LAYERS", 40)  # 12 layers of 4 experts count as many
    arch = load_config({**small(QWEN3_30B_A3B, layers=12), "mlp_only_layers": [0]}, name="deep-moe")
    assert arch.moe_layer_count == 11
    request = EstimateRequest(method="inference", batch_size=1, seq_len=16)
    traced = trace_estimate(arch, request)
    assert traced.params == arch.params()  # each MoE layer extended, the dense first layer counted once
    depths = extended.MOE_DEPTHS
    assert any(f"{depths[0]} and {depths[1]} of its 12" in note for note in traced.notes), traced.notes
    monkeypatch.setattr(extended, "EXPERT_LAYERS", 48)
    whole = trace_estimate(arch, request)  # traced whole: the same bytes at the peak
    assert whole.peak == traced.peak and not any("identical layers" in note for note in whole.notes)


@needs_extra
def test_a_config_its_own_family_refuses_is_one_line() -> None:
    from betty_jupyter.gpu.trace import trace_estimate

    for broken in ({"rope_scaling": {"rope_type": "longrope", "short_factor": "x"}}, {"pad_token_id": 100_000},
                   {"head_dim": 17}):  # rotary embeddings need an even head width
        config = {**small(PHI4, layers=2), **broken}
        with pytest.raises(GpuEstimateError) as refused:
            trace_estimate(load_config(config), EstimateRequest(method="inference", batch_size=1, seq_len=8))
        assert "\n" not in str(refused.value) and "drop --trace" in str(refused.value), broken


@pytest.mark.parametrize("config, field", [
    (QWEN3_30B_A3B, "moe_intermediate_size"), (QWEN3_30B_A3B, "num_experts"), (QWEN3_30B_A3B, "decoder_sparse_step"),
    (DEEPSEEK_V3, "n_shared_experts"), (DEEPSEEK_V3, "first_k_dense_replace"), (DEEPSEEK_V3, "kv_lora_rank"),
    (DEEPSEEK_V3, "q_lora_rank"), (DEEPSEEK_V3, "qk_rope_head_dim"), (DEEPSEEK_V3, "v_head_dim"),
    (GEMMA3_27B, "sliding_window_pattern"), (LLAMA4_MAVERICK, "interleave_moe_layer_step"),
    (LLAMA4_MAVERICK, "intermediate_size_mlp"),
])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -4, 4096.5, "32", [1]])
def test_a_bad_size_in_a_new_field_is_one_line_naming_it(config: dict[str, Any], field: str, value: Any) -> None:
    bad = ({**config, "text_config": {**config["text_config"], field: value}} if "text_config" in config
           else {**config, field: value})
    with pytest.raises(GpuEstimateError, match=f"`{field}`") as refused:
        load_config(bad)
    assert "\n" not in str(refused.value)
