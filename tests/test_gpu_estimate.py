"""Memory estimates: exact formulas, how each option moves the peak, and refused combinations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import EstimateRequest, estimate, find_model
from betty_jupyter.gpu.activations import Layout, attention_bytes
from betty_jupyter.gpu.estimate import GIB
from betty_jupyter.gpu.report import render_estimate

LLAMA3_8B = find_model("Llama-3-8B").architecture


def test_kv_cache_per_token_of_llama3_8b_in_bf16_is_131072_bytes() -> None:
    assert LLAMA3_8B.kv_bytes_per_token(2) == 131_072


def test_kv_cache_follows_kv_heads_not_query_heads() -> None:
    mha = find_model("Llama-2-7B").architecture  # 32 KV heads
    assert mha.kv_bytes_per_token(2) == 4 * LLAMA3_8B.kv_bytes_per_token(2)


def test_inference_kv_cache_is_batch_times_context_times_per_token() -> None:
    result = estimate("Llama-3-8B", method="inference", batch_size=8, seq_len=4096)
    assert result.breakdown["kv_cache"] * GIB == 8 * 4096 * 131_072


def test_fp8_kv_cache_halves_it() -> None:
    bf16 = estimate("Llama-3-8B", method="inference", batch_size=4, seq_len=8192)
    fp8 = estimate("Llama-3-8B", method="inference", batch_size=4, seq_len=8192, kv_dtype="fp8")
    assert fp8.breakdown["kv_cache"] == pytest.approx(bf16.breakdown["kv_cache"] / 2)


def test_sliding_window_caps_the_kv_cache() -> None:
    short = estimate("Mistral-7B", method="inference", seq_len=4096, framework="vllm")
    long = estimate("Mistral-7B", method="inference", seq_len=32768, framework="vllm")
    assert long.breakdown["kv_cache"] == pytest.approx(short.breakdown["kv_cache"])


def test_transformers_holds_the_whole_prompt_in_its_window_layers_after_prefill() -> None:
    # traced (tests/data/gpu_trace_grid.csv, row 76): 0.9998 GiB of KV cache at the peak of an 8192-token prefill
    result = estimate("Mistral-7B", method="inference", precision="fp16", attention="eager", seq_len=8192)
    assert result.breakdown["kv_cache"] == pytest.approx(1.0)
    assert any("whole prompt" in note for note in result.notes)
    assert not any("whole prompt" in note for note in estimate("Mistral-7B", method="inference", seq_len=4096).notes)


def test_gemma2_caps_only_its_sliding_layers() -> None:
    gemma = find_model("Gemma-2-9B").architecture
    per_layer = 2 * gemma.kv_dim * 2
    assert gemma.kv_bytes_per_token(2, context=8192) == per_layer * (21 + 21 * 4096 / 8192)


@pytest.mark.parametrize(("precision", "bytes_per_param"), [("fp32", 4), ("bf16", 2), ("fp16", 2)])
def test_inference_weights_are_params_times_bytes_exactly(precision: str, bytes_per_param: int) -> None:
    result = estimate("Llama-2-7B", method="inference", precision=precision, seq_len=16)
    assert result.breakdown["weights"] * GIB == 6_738_415_616 * bytes_per_param
    assert result.breakdown["quantization"] == 0


def test_nf4_stores_the_layers_in_half_a_byte_and_the_embeddings_in_bf16() -> None:
    arch = find_model("Llama-2-7B").architecture
    result = estimate("Llama-2-7B", method="inference", precision="nf4", seq_len=16)
    expected = arch.linear_params() * 0.5 + (arch.params() - arch.linear_params()) * 2
    assert result.breakdown["weights"] * GIB == expected
    double_quant_scales = arch.linear_params() * (1 / 64 + 4 / (64 * 256))
    assert result.breakdown["quantization"] * GIB > double_quant_scales


def test_double_quantization_saves_about_three_eighths_of_a_bit_per_weight() -> None:
    arch = find_model("Llama-2-13B").architecture
    plain = estimate(arch, method="inference", precision="nf4", double_quant=False, seq_len=16)
    double = estimate(arch, method="inference", precision="nf4", seq_len=16)
    saved_bits = (plain.breakdown["quantization"] - double.breakdown["quantization"]) * GIB * 8 / arch.linear_params()
    assert saved_bits == pytest.approx(0.5 - 0.127, abs=0.001)


@pytest.mark.parametrize("gpus", [2, 4, 8, 64])
def test_zero3_model_states_are_16_bytes_per_param_over_n_plus_one_gathered_layer(gpus: int) -> None:
    result = estimate("Llama-3-8B", method="full", precision="bf16-mixed", sharding="zero3", gpus=gpus,
                      grad_ckpt="full", batch_size=1, seq_len=16)
    params = LLAMA3_8B.params()
    gathered = LLAMA3_8B.largest_layer_params() * 2
    states = (result.breakdown["weights"] + result.breakdown["optimizer"]) * GIB
    gradients = 2 * params / gpus
    assert states + gradients == pytest.approx(16 * params / gpus + gathered, rel=1e-9)


def test_zero_stages_shard_more_and_more() -> None:
    peaks = [estimate("Llama-3-8B", method="full", sharding=stage, gpus=8, grad_ckpt="full", seq_len=512).peak_gib
             for stage in ("ddp", "zero1", "zero2", "zero3")]
    assert peaks == sorted(peaks, reverse=True) and peaks[0] > 2 * peaks[-1]


def test_mixed_precision_adamw_needs_18_bytes_per_cast_param_without_sharding() -> None:
    """16 bytes per weight, plus the 2-byte copy autocast makes of every weight it casts (not the norms)."""
    result = estimate("Llama-3.2-1B", method="full", precision="bf16-mixed", optimizer="adamw",
                      grad_ckpt="full", seq_len=8, grad_accum=2, framework="torchtune")
    arch = find_model("Llama-3.2-1B").architecture
    params, norms = arch.params(), arch.layers * arch.norms_per_layer * arch.hidden + arch.hidden
    model_states = sum(result.breakdown[name] for name in ("weights", "gradients", "optimizer")) * GIB
    assert model_states == 16 * params + 2 * (params - norms)


def test_the_autocast_copy_is_gone_by_the_optimizer_step() -> None:
    result = estimate("Llama-3.2-1B", method="full", precision="bf16-mixed", optimizer="adamw", seq_len=8)
    params = find_model("Llama-3.2-1B").architecture.params()
    assert result.peak_moment == "optimizer step"
    assert result.breakdown["weights"] * GIB == 4 * params


@pytest.mark.parametrize(("optimizer", "state_bytes"), [("adamw", 8), ("adamw8bit", 2), ("sgd", 4)])
def test_optimizer_state_bytes_per_param(optimizer: str, state_bytes: int) -> None:
    result = estimate("Llama-3.2-1B", method="full", precision="fp32", optimizer=optimizer, seq_len=8,
                      framework="torchtune")
    assert result.breakdown["optimizer"] * GIB == state_bytes * find_model("Llama-3.2-1B").architecture.params()


def test_foreach_adamw_step_needs_one_more_state_sized_buffer() -> None:
    fused = estimate("Llama-3.2-1B", method="full", precision="fp32", seq_len=8, framework="torchtune")
    foreach = estimate("Llama-3.2-1B", method="full", precision="fp32", seq_len=8, framework="hf")
    assert foreach.peak_moment == "optimizer step"
    extra = (foreach.breakdown["optimizer"] - fused.breakdown["optimizer"]) * GIB
    assert extra == 4 * find_model("Llama-3.2-1B").architecture.params()


def test_adafactor_keeps_far_less_than_adam() -> None:
    adam = estimate("Llama-3.2-1B", method="full", precision="fp32", optimizer="adamw", seq_len=8, grad_accum=2)
    adafactor = estimate("Llama-3.2-1B", method="full", precision="fp32", optimizer="adafactor", seq_len=8, grad_accum=2)
    assert adafactor.breakdown["optimizer"] < adam.breakdown["optimizer"] / 100


def test_paged_optimizer_states_go_to_cpu_and_say_so() -> None:
    result = estimate("Llama-2-7B", method="full", precision="bf16", optimizer="paged-adamw", seq_len=64)
    assert result.breakdown["optimizer"] == 0
    assert result.cpu_gib * GIB == 2 * 2 * 6_738_415_616
    assert any("paged" in note for note in result.notes)


def test_optimizer_offload_moves_the_optimizer_to_cpu() -> None:
    kept = estimate("Llama-3-8B", method="full", sharding="zero2", gpus=4, seq_len=512)
    offloaded = estimate("Llama-3-8B", method="full", sharding="zero2", gpus=4, seq_len=512, offload="optimizer")
    assert offloaded.breakdown["optimizer"] == 0 and offloaded.cpu_gib > 0
    assert offloaded.peak_gib < kept.peak_gib


def test_lora_trains_rank_times_in_plus_out_per_module() -> None:
    arch = LLAMA3_8B
    result = estimate(arch, method="lora", lora_rank=16, lora_targets=("q_proj", "v_proj"), seq_len=64)
    assert result.trainable_params == 32 * 16 * ((4096 + 4096) + (4096 + 1024))
    assert estimate(arch, method="lora", lora_rank=64, seq_len=64).trainable_params == 4 * result.trainable_params


def test_lora_needs_far_less_than_full_and_qlora_less_still() -> None:
    options = dict(batch_size=1, seq_len=1024, grad_ckpt="full")
    full = estimate("Llama-3-8B", method="full", **options)
    lora = estimate("Llama-3-8B", method="lora", **options)
    qlora = estimate("Llama-3-8B", method="qlora", **options)
    assert full.peak_gib > 3 * lora.peak_gib and lora.peak_gib > qlora.peak_gib + 6


def test_training_peak_is_a_sum_not_a_max() -> None:
    result = estimate("Llama-3.2-1B", method="full", precision="fp32", batch_size=8, seq_len=2048)
    states = result.breakdown["weights"] + result.breakdown["optimizer"]
    assert result.allocated_gib > states + result.breakdown["activations"] * 0.99 > 0


def test_checkpointing_cuts_activations() -> None:
    options = dict(method="full", batch_size=4, seq_len=4096)
    none = estimate("Llama-3-8B", grad_ckpt="none", **options).breakdown["activations"]
    full = estimate("Llama-3-8B", grad_ckpt="full", **options).breakdown["activations"]
    assert full < none / 3


def test_selective_checkpointing_only_helps_eager_attention() -> None:
    options = dict(method="full", batch_size=2, seq_len=4096, framework="hf")
    flash = [estimate("Llama-3.2-1B", grad_ckpt=mode, **options).peak_gib for mode in ("none", "selective")]
    eager = [estimate("Llama-3.2-1B", grad_ckpt=mode, attention="eager", **options).peak_gib
             for mode in ("none", "selective")]
    assert flash[0] == flash[1]
    assert eager[1] < eager[0] - 10 and eager[1] == pytest.approx(flash[1], rel=0.05)


def test_activations_grow_linearly_with_batch_without_checkpointing() -> None:
    one, four = (estimate("Llama-3.2-3B", method="full", batch_size=b, seq_len=4096) for b in (1, 4))
    assert one.peak_moment == four.peak_moment == "start of the backward pass"
    assert four.breakdown["activations"] == pytest.approx(4 * one.breakdown["activations"])


def test_korthikanti_count_for_gpt_style_layers() -> None:
    """A BERT layer in 16-bit with dropout and eager attention keeps exactly Korthikanti et al.'s 34·h + 5·a·s bytes."""
    from betty_jupyter.gpu.activations import layer_bytes
    from betty_jupyter.gpu.estimate import _layout

    arch = find_model("BERT-large").architecture
    request = EstimateRequest(method="full", precision="bf16", attention="eager", seq_len=512).checked()
    per_token = layer_bytes(_layout(arch, request), 512)
    h, a, s = arch.hidden, arch.heads, 512
    assert per_token == 34 * h + 5 * a * s


def test_grad_accumulation_keeps_gradients_at_the_peak() -> None:
    once = estimate("Llama-3.2-1B", method="full", batch_size=4, seq_len=2048)
    accumulating = estimate("Llama-3.2-1B", method="full", batch_size=4, seq_len=2048, grad_accum=4)
    assert accumulating.breakdown["gradients"] > once.breakdown["gradients"]


def test_tensor_parallel_inference_splits_weights() -> None:
    one = estimate("Llama-3-70B", method="inference", seq_len=4096)
    four = estimate("Llama-3-70B", method="inference", seq_len=4096, gpus=4)
    assert four.breakdown["weights"] == pytest.approx(one.breakdown["weights"] / 4)


def test_breakdown_adds_up_to_the_peak_and_runtime_is_separate() -> None:
    result = estimate("Mixtral-8x7B", method="qlora", batch_size=2, seq_len=2048, grad_ckpt="full")
    assert sum(result.breakdown.values()) == pytest.approx(result.peak_gib)
    assert result.allocated_gib == pytest.approx(result.peak_gib - result.breakdown["runtime"])
    assert set(result.breakdown) == {"weights", "gradients", "optimizer", "activations", "kv_cache",
                                     "quantization", "runtime"}


def test_vllm_counts_only_what_the_card_share_allows() -> None:
    from betty_jupyter.gpu import gpu_type

    result = estimate("Llama-3-8B", method="inference", framework="vllm", seq_len=40_000)
    a100 = gpu_type("a100-80gb")
    assert result.headroom_gib(a100) == pytest.approx(0.9 * a100.memory_gib - result.peak_gib)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 64), seq=st.integers(1, 32768),
       method=st.sampled_from(["inference", "full", "lora", "qlora"]),
       ckpt=st.sampled_from(["none", "selective", "full"]))
def test_more_tokens_never_need_less_memory(batch: int, seq: int, method: str, ckpt: str) -> None:
    request = EstimateRequest(method=method, batch_size=batch, seq_len=seq, grad_ckpt=ckpt)  # type: ignore[arg-type]
    base = estimate("Llama-3.2-1B", request).peak_gib
    assert estimate("Llama-3.2-1B", request.changed(batch_size=batch + 1)).peak_gib >= base
    assert estimate("Llama-3.2-1B", request.changed(seq_len=seq + 1)).peak_gib >= base


@pytest.mark.parametrize(("options", "named"), [
    (dict(method="full", precision="nf4"), "--precision nf4"),
    (dict(method="full", precision="int8"), "--precision int8"),
    (dict(method="qlora", precision="bf16"), "--method qlora"),
    (dict(method="full", sharding="zero3", gpus=1), "--sharding zero3"),
    (dict(method="full", sharding="ddp", gpus=1), "--sharding ddp"),
    (dict(method="full", gpus=4), "--gpus 4"),
    (dict(method="full", batch_size=-1), "--batch-size"),
    (dict(method="inference", seq_len=0), "--seq-len"),
    (dict(method="lora", lora_rank=0), "--lora-rank"),
    (dict(method="full", offload="params", sharding="zero2", gpus=2), "--offload params"),
    (dict(method="full", offload="optimizer"), "--offload optimizer"),
    (dict(method="inference", sharding="fsdp", gpus=2), "--sharding"),
    (dict(method="full", framework="vllm"), "--framework vllm"),
    (dict(method="full", framework="deepspeedish"), "--framework"),
    (dict(method="lora", lora_targets=("qkv",)), "--lora-targets"),
    (dict(method="full", optimizer_in_backward=True, grad_accum=2), "--optimizer-in-backward"),
])
def test_impossible_requests_name_the_option(options: dict, named: str) -> None:
    with pytest.raises(GpuEstimateError) as caught:
        estimate("Llama-3-8B", **options)
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


# ----- QLoRA against LoRA, term by term --------------------------------------------------------------
LLAMA2_7B = find_model("Llama-2-7B").architecture


@pytest.mark.parametrize("framework", ["hf", "torchtune"])
def test_qlora_needs_less_than_lora_for_the_same_llama_7b_and_batch(framework: str) -> None:
    options = dict(batch_size=4, seq_len=2048, framework=framework)
    lora, qlora = (estimate(LLAMA2_7B, method=method, **options) for method in ("lora", "qlora"))
    assert qlora.peak_gib < lora.peak_gib - 5
    # the same adapters and the same tokens. Under hf, peft's float32 adapters over a bf16 base each keep their
    # own copy of the layer's input (q_proj's and v_proj's: 2 + 2 bytes an element), while over bitsandbytes
    # layers they read the input itself (2 bytes); elsewhere only the frozen base and its constants differ.
    copies = 2 * 4 * 2048 * LLAMA2_7B.hidden * LLAMA2_7B.layers if framework == "hf" else 0
    assert (lora.breakdown["activations"] - qlora.breakdown["activations"]) * GIB == pytest.approx(copies)
    assert qlora.breakdown["optimizer"] == lora.breakdown["optimizer"]
    quantized = LLAMA2_7B.linear_params()
    # the layers' linear weights go from 2 bytes to half a byte; embeddings, norms and the output layer stay bf16
    assert (lora.breakdown["weights"] - qlora.breakdown["weights"]) * GIB == pytest.approx(quantized * (2 - 0.5))
    scales = quantized * (1 / 64 + 4 / (64 * 256))
    one_matrix = 2 * LLAMA2_7B.hidden * 3 * LLAMA2_7B.hidden  # Q, K and V together: 4096 × 12288 in bf16
    assert qlora.breakdown["quantization"] * GIB == pytest.approx(scales + one_matrix)
    assert lora.breakdown["quantization"] == 0


def test_the_breakdown_names_what_each_qlora_term_holds() -> None:
    result = estimate(LLAMA2_7B, method="qlora", batch_size=4, seq_len=2048, framework="hf")
    terms = result.terms
    assert terms["weights"] == ("6.48B layer weights in 4-bit NF4 (0.5 byte each) + 262.4M other weights "
                                "(embeddings, norms, output layer) in bf16 + "
                                "8.4M adapter weights in float32")
    assert terms["quantization"] == ("constants for 6.48B weights (one absmax per 64 weights, double-quantized) + "
                                     "the one 50.3M-weight matrix dequantized to bf16 at a time (0.09 GiB)")
    assert "kv_cache" not in terms and "gradients" not in terms  # nothing there at this peak
    assert "matmul keeps" not in terms["activations"]
    shown = render_estimate(result)
    assert "  weights            3.54 GiB  6.48B layer weights in 4-bit NF4" in shown
    assert result.as_dict()["terms"] == terms


def test_bitsandbytes_before_0_43_2_kept_every_4bit_input_and_the_breakdown_says_so() -> None:
    """LitGPT's measured QLoRA ran a bitsandbytes whose 4-bit matmul kept its input: more activations than LoRA."""
    options = dict(batch_size=4, seq_len=2048, framework="litgpt")
    lora, qlora = (estimate(LLAMA2_7B, method=method, **options) for method in ("lora", "qlora"))
    assert qlora.peak_gib > lora.peak_gib  # right for that stack at this batch: the kept inputs outweigh the weights
    kept = qlora.breakdown["activations"] - lora.breakdown["activations"]
    # every frozen 4-bit projection keeps its bf16 input: q/k/v (h: LitGPT's adapter keeps its own dropped copy
    # beside it), o_proj (h), gate/up (h), down (i)
    per_token = 2 * (3 * LLAMA2_7B.hidden + LLAMA2_7B.intermediate) * LLAMA2_7B.layers
    assert kept * GIB == pytest.approx(4 * 2048 * per_token)
    assert f"{kept:.2f} GiB of it are the inputs the nf4 matmul keeps for every frozen layer" in qlora.terms[
        "activations"]


def _attention(request: EstimateRequest) -> float:
    arch = find_model("Llama-3.2-1B").architecture
    request = request.checked()
    compute = 4 if request.resolved_precision == "fp32" else 2
    return attention_bytes(Layout(arch, request, compute_bytes=compute, quantized=False), request.seq_len)


@pytest.mark.parametrize(("framework", "precision", "extra"), [
    ("hf", "bf16", 4 * 2048 + 4 * 16),  # peft casts to its float32 adapter: k_proj keeps its own float32 input
    ("hf", "bf16-mixed", 2 * 2048 + 2 * 16),  # ... which autocast casts back: a half copy of its own
    ("torchtune", "bf16", 2 * 16),  # adapters in the model's dtype share the input: only A's output is new
])
def test_each_adapted_projection_keeps_its_input_as_peft_casts_it(framework: str, precision: str, extra: int) -> None:
    one, two = (_attention(EstimateRequest(method="lora", precision=precision, framework=framework,
                                           lora_targets=targets)) for targets in (("q_proj",), ("q_proj", "k_proj")))
    assert two - one == extra


def test_eager_attention_of_a_decoder_keeps_a_float32_softmax_and_its_cast() -> None:
    arch = find_model("Llama-3.2-1B").architecture
    for precision, per_score in (("bf16", 4 + 2), ("fp32", 4)):
        flash, eager = (_attention(EstimateRequest(method="full", precision=precision, attention=kernel,
                                                   seq_len=1024)) for kernel in ("flash", "eager"))
        compute = 4 if precision == "fp32" else 2
        repeated = 2 * compute * (arch.q_dim - arch.kv_dim)  # eager attention repeats K and V to every head
        output = compute * arch.q_dim + 4 * arch.heads  # flash's output and log-sum-exp
        assert eager - flash == per_score * arch.heads * 1024 + repeated - output
