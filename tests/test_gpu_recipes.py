"""Training recipes the fast estimate sizes: selective checkpointing, FSDP2 mixed precision, CPU offload, optimizers.

Expectations are bytes worked out by hand on a tiny Llama (hidden 64, MLP 256, 4 query and
2 key-value heads of 16, 4 layers, 1000-token vocabulary, untied): a layer holds
64·64 + 2·64·32 + 64·64 + 3·64·256 + 2·64 = 61 568 weights, the embedding and the output
layer 64 000 each, the final norm 64: 374 336 in all.
"""

from __future__ import annotations

import json

import pytest
from conftest import betty_in_process

from betty_jupyter.agent.tools.gpu import EstimateArgs
from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import EstimateRequest, Target, advise, estimate, find_model, gpu_type
from betty_jupyter.gpu.estimate_options import job_options, request_from
from betty_jupyter.gpu.activations import Layout, padded_adapter_bytes, training_activations
from betty_jupyter.gpu.architecture import load_config
from betty_jupyter.gpu.estimate import GIB

TINY = load_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 4, "vocab_size": 1000,
                    "tie_word_embeddings": False, "max_position_embeddings": 4096}, name="tiny")
PARAMS = 374_336
LARGEST_UNIT = 64_000  # the embedding outweighs a layer (61 568)
TOKENS = 2 * 512


def bytes_of(gib: float) -> float:
    return gib * GIB


def activations(**options: object) -> tuple[float, float, float]:
    """(layers, recompute, loss) bytes of a pure-bf16 full fine-tuning of TINY on 2 × 512 tokens."""
    request = EstimateRequest(method="full", precision="bf16", batch_size=2, seq_len=512, **options).checked()
    found = training_activations(Layout(TINY, request, compute_bytes=2, quantized=False))
    return found.layers, found.recompute, found.loss


def test_tiny_model_is_the_one_the_expectations_are_worked_out_for() -> None:
    assert (TINY.params(), TINY.layer_params(), TINY.largest_layer_params()) == (PARAMS, 61_568, LARGEST_UNIT)


# ----- torchtitan's selective checkpointing -----------------------------------------------------------
def test_op_checkpointing_keeps_the_layer_input_every_other_matmul_and_the_attention_output() -> None:
    # per token and layer, bf16: input 64·2 = 128; q (64), v (32), gate (256), down (64) outputs · 2 = 832;
    # flash attention's output 64·2 = 128 and float32 log-sum-exp 4·4 = 16: 1104 bytes
    layers, recompute, _ = activations(grad_ckpt="op")
    assert layers == TOKENS * 4 * 1104
    none_layers, _, _ = activations()
    assert recompute == TOKENS * (none_layers / TOKENS / 4 - 1104)  # the rest of one layer, rebuilt in backward


def test_op_checkpointing_with_eager_attention_saves_no_attention_output() -> None:
    layers, _, _ = activations(grad_ckpt="op", attention="eager")
    assert layers == TOKENS * 4 * (1104 - 144)


@pytest.mark.parametrize(("every", "checkpointed"), [(1, 4), (2, 2), (3, 1), (4, 1), (5, 0)])
def test_layer_checkpointing_checkpoints_every_nth_layer_and_keeps_the_others_whole(every: int,
                                                                                   checkpointed: int) -> None:
    none_layers, _, _ = activations()
    one_layer = none_layers / 4
    layers, recompute, _ = activations(grad_ckpt="layer", ckpt_every=every)
    assert layers == (4 - checkpointed) * one_layer + checkpointed * TOKENS * 128
    assert recompute == (one_layer if checkpointed else 0.0)


def test_layer_checkpointing_of_every_layer_is_full_checkpointing() -> None:
    assert activations(grad_ckpt="layer", ckpt_every=1) == activations(grad_ckpt="full")


def test_selective_checkpointing_of_llama_8b_at_8k_keeps_what_its_policy_saves() -> None:
    llama = find_model("Llama-3.1-8B").architecture
    tokens = 8192

    def kept(**options: object) -> float:
        request = EstimateRequest(method="full", precision="bf16", seq_len=tokens, **options).checked()
        return training_activations(Layout(llama, request, compute_bytes=2, quantized=False)).layers

    one_layer = kept() / 32
    # op: input 4096·2; q 4096, v 1024, gate 14336, down 4096 wide outputs · 2; flash output 4096·2 + lse 32·4
    assert kept(grad_ckpt="op") == 32 * tokens * (8192 + 2 * (4096 + 1024 + 14336 + 4096) + 8192 + 128)
    # layer, every 2nd: 16 layers keep everything, 16 keep their 4096-wide bf16 input
    assert kept(grad_ckpt="layer") == pytest.approx(16 * one_layer + 16 * tokens * 4096 * 2, rel=1e-12)
    none, op, layer, full = (estimate("Llama-3.1-8B", method="full", precision="bf16", seq_len=tokens,
                                      grad_ckpt=mode) for mode in ("none", "op", "layer", "full"))
    assert full.allocated_gib <= op.allocated_gib < layer.allocated_gib < none.allocated_gib
    assert op.peak_gib < layer.peak_gib < none.peak_gib  # op's slack is the accumulating share, full's the larger


# ----- FSDP2 mixed precision --------------------------------------------------------------------------
def fsdp(**options: object):
    return estimate(TINY, method="full", precision="bf16-mixed", gpus=2, sharding="fsdp", batch_size=2,
                    seq_len=512, **options)


def test_fsdp_mixed_precision_keeps_float32_shards_and_one_bf16_unit() -> None:
    result = fsdp(fsdp_mixed_precision=True)
    assert bytes_of(result.breakdown["weights"]) == pytest.approx(4 * PARAMS / 2 + 2 * LARGEST_UNIT)
    assert bytes_of(result.breakdown["optimizer"]) == pytest.approx(8 * PARAMS / 2)
    assert result.peak_moment == "start of the backward pass"
    # the unit's bf16 gradient and its float32 copy for the reduce-scatter: 64 000 · (2 + 4)
    assert bytes_of(result.breakdown["gradients"]) == pytest.approx(6 * LARGEST_UNIT)
    assert result.terms["gradients"].startswith("one unit's gradient in bf16 (0.1M weights")


def test_fsdp_mixed_precision_computes_in_bf16_not_in_autocasts_float32_stream() -> None:
    policy = fsdp(fsdp_mixed_precision=True)
    pure = estimate(TINY, method="full", precision="bf16", gpus=2, sharding="fsdp", batch_size=2, seq_len=512)
    autocast = fsdp()
    assert policy.breakdown["activations"] == pure.breakdown["activations"]
    assert policy.breakdown["activations"] < autocast.breakdown["activations"]


# ----- FSDP CPU offload -------------------------------------------------------------------------------
def test_fsdp_offload_holds_the_unit_being_computed_and_the_prefetched_next_one() -> None:
    result = fsdp(offload="params")
    assert bytes_of(result.breakdown["weights"]) == pytest.approx(2 * 2 * LARGEST_UNIT)
    assert result.breakdown["gradients"] == result.breakdown["optimizer"] == 0
    assert bytes_of(result.cpu_gib) == pytest.approx(4 * PARAMS / 2 + 4 * PARAMS / 2 + 8 * PARAMS / 2)
    zero3 = estimate(TINY, method="full", precision="bf16-mixed", gpus=2, sharding="zero3", batch_size=2,
                     seq_len=512, offload="params")
    assert bytes_of(zero3.breakdown["weights"]) == pytest.approx(2 * LARGEST_UNIT)


def test_fsdp_offload_of_llama_8b_keeps_two_embeddings_worth_of_bf16() -> None:
    result = estimate("Llama-3.1-8B", method="full", gpus=8, sharding="fsdp", offload="params", seq_len=4096)
    assert bytes_of(result.breakdown["weights"]) == pytest.approx(2 * 2 * 128_256 * 4096)


# ----- optimizers ---------------------------------------------------------------------------------------
def pure(**options: object):
    return estimate(TINY, method="full", precision="bf16", batch_size=2, seq_len=512, **options)


def test_8bit_adamw_keeps_two_bytes_per_parameter_for_both_states() -> None:
    assert bytes_of(pure(optimizer="adamw8bit").breakdown["optimizer"]) == pytest.approx(2 * PARAMS)
    assert bytes_of(pure().breakdown["optimizer"]) == pytest.approx(2 * 2 * PARAMS)  # bf16 AdamW: 2 + 2


def test_paged_8bit_adamw_counts_its_states_on_the_cpu() -> None:
    result = pure(optimizer="paged-adamw8bit")
    assert result.breakdown["optimizer"] == 0
    assert bytes_of(result.cpu_gib) == pytest.approx(2 * PARAMS)


def test_optimizer_in_backward_never_holds_every_gradient() -> None:
    result = pure(optimizer_in_backward=True)
    assert result.peak_moment == "start of the backward pass"
    assert bytes_of(result.breakdown["gradients"]) == pytest.approx(2 * 1000 * 64)  # the output layer's, in bf16
    assert pure().peak_gib >= result.peak_gib


def test_chunked_loss_holds_one_eighth_of_the_two_float32_logit_gradients() -> None:
    # per token: 1000 logits × (2 gradients × 4 bytes) unchunked, an eighth of that in chunks: 7000 bytes fewer
    _, _, whole = activations()
    _, _, chunked = activations(chunked_loss=True)
    assert whole - chunked == TOKENS * 7000


# ----- refused combinations ----------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "named"), [
    (dict(method="full", optimizer_in_backward=True, grad_accum=4), "--optimizer-in-backward"),
    (dict(method="inference", optimizer="adamw8bit"), "--optimizer adamw8bit"),
    (dict(method="inference", optimizer="paged-adamw"), "--optimizer paged-adamw"),
    (dict(method="inference", optimizer_in_backward=True), "--optimizer-in-backward"),
    (dict(method="inference", chunked_loss=True), "--chunked-loss"),
    (dict(method="inference", grad_ckpt="op"), "--grad-ckpt op"),
    (dict(method="lora", grad_ckpt="op"), "--grad-ckpt op"),
    (dict(method="full", ckpt_every=3), "--ckpt-every"),
    (dict(method="full", ckpt_every=0, grad_ckpt="layer"), "--ckpt-every"),
    (dict(method="full", fsdp_mixed_precision=True), "--fsdp-mixed-precision"),
    (dict(method="full", sharding="zero3", gpus=2, fsdp_mixed_precision=True), "--fsdp-mixed-precision"),
    (dict(method="full", precision="bf16", sharding="fsdp", gpus=2, fsdp_mixed_precision=True),
     "--fsdp-mixed-precision"),
    (dict(method="lora", sharding="fsdp", gpus=2, fsdp_mixed_precision=True), "--fsdp-mixed-precision"),
])
def test_impossible_recipes_are_refused_in_one_line_naming_the_option(options: dict, named: str) -> None:
    with pytest.raises(GpuEstimateError) as caught:
        estimate(TINY, **options)
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("options", "named"), [
    (dict(grad_ckpt="op"), "--grad-ckpt op"),
    (dict(grad_ckpt="layer", ckpt_every=3), "--grad-ckpt layer"),
    (dict(sharding="fsdp", gpus=2, fsdp_mixed_precision=True), "--fsdp-mixed-precision"),
    (dict(optimizer="adamw8bit"), "--optimizer adamw8bit"),
    (dict(optimizer_in_backward=True), "--optimizer-in-backward"),
])
def test_the_trace_refuses_these_recipes_by_name(options: dict, named: str) -> None:
    pytest.importorskip("torch")
    from betty_jupyter.gpu.trace.refusals import check_traceable

    with pytest.raises(GpuEstimateError) as caught:
        check_traceable(TINY, EstimateRequest(method="full", **options).checked())  # type: ignore[arg-type]
    assert named in str(caught.value) and "drop --trace" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("options", [
    dict(sharding="fsdp", gpus=2, fsdp_mixed_precision=True, grad_ckpt="op"),
    dict(optimizer_in_backward=True, grad_ckpt="layer", ckpt_every=4),
])
def test_advice_for_these_recipes_suggests_only_changes_that_can_run(options: dict) -> None:
    request = EstimateRequest(method="full", batch_size=4, seq_len=4096, **options).checked()  # type: ignore[arg-type]
    advice = advise("Llama-3-8B", request, [Target(gpu_type("a100-40gb"), "gpu", 4)])
    assert not advice.fits_somewhere and advice.changes
    for change in advice.changes:
        assert change.request.checked() is change.request
        assert change.estimate.peak_gib <= gpu_type("a100-40gb").memory_gib


# ----- every face takes them ------------------------------------------------------------------------------
RECIPE_ARGV = ["--model", "Llama-3.1-8B", "--method", "full", "--gpus", "8", "--sharding", "fsdp",
               "--fsdp-mixed-precision", "--grad-ckpt", "layer", "--ckpt-every", "4", "--optimizer", "adamw8bit",
               "--chunked-loss", "--seq-len", "4096"]
RECIPE = EstimateRequest(method="full", gpus=8, sharding="fsdp", fsdp_mixed_precision=True, grad_ckpt="layer",
                         ckpt_every=4, optimizer="adamw8bit", chunked_loss=True, seq_len=4096)


def test_the_cli_and_the_magics_parser_take_the_recipes(capsys: pytest.CaptureFixture[str]) -> None:
    assert request_from(job_options().parse_args(RECIPE_ARGV)) == RECIPE
    code, out, err = betty_in_process(capsys, "gpu", "estimate", *RECIPE_ARGV, "--json")
    assert code == 0, err
    assert json.loads(out)["peak_gib"] == pytest.approx(estimate("Llama-3.1-8B", RECIPE).peak_gib, abs=1e-3)
    code, out, err = betty_in_process(capsys, "gpu", "estimate", *RECIPE_ARGV[:4], "--fsdp-mixed-precision")
    assert code == 1 and out == "" and "--fsdp-mixed-precision" in err and err.count("\n") == 1


def test_the_gpu_estimate_tool_takes_the_recipes() -> None:
    args = EstimateArgs(model="Llama-3.1-8B", method="full", gpus=8, sharding="fsdp", fsdp_mixed_precision=True,
                        grad_ckpt="layer", ckpt_every=4, optimizer="adamw8bit", chunked_loss=True, seq_len=4096)
    assert args.request() == RECIPE
    schema = EstimateArgs.model_json_schema()["properties"]
    assert {"op", "layer"} <= set(schema["grad_ckpt"]["enum"])
    assert {"ckpt_every", "fsdp_mixed_precision"} <= set(schema)


def _loss_per_token(**options: object) -> float:
    """The loss's bytes per token, less the final norm and the hidden state it keeps (bf16 TINY)."""
    # the final RMSNorm keeps a float32 input and its bf16 output (for its weight) unless compiled
    norm = 2 * 64 if options.get("compiled") else 4 * 64 + 2 * 64
    rest = norm + 2 * 64
    return activations(**options)[2] / TOKENS - rest


def test_a_compiled_chunked_loss_keeps_bf16_logits_and_one_bf16_chunk_gradient() -> None:
    assert _loss_per_token(framework="torchtune", compiled=True, chunked_loss=True) == 1000 * (2 + 2 / 8)
    assert _loss_per_token(framework="torchtune", chunked_loss=True) == 1000 * (4 + 8 / 8)


def test_a_compiled_unchunked_loss_keeps_the_upcast_logits_and_casts_its_gradient_back() -> None:
    assert _loss_per_token(framework="torchtune", compiled=True) == 1000 * (4 + 4 + 2)
    assert _loss_per_token(framework="torchtune") == 1000 * (4 + 8)


def test_older_torchtune_holds_float32_logits_and_compiles_only_the_model() -> None:
    assert _loss_per_token(framework="torchtune-0.2", compiled=True) == 1000 * (4 + 8 + 4)
    assert _loss_per_token(framework="torchtitan", compiled=True) == 1000 * (4 + 8)


def test_litgpt_lora_keeps_one_dropped_input_and_mask_for_its_fused_qkv_adapter() -> None:
    request = EstimateRequest(method="lora", framework="litgpt", lora_targets=("q_proj", "v_proj")).checked()
    layout = Layout(TINY, request, compute_bytes=2, quantized=False)
    assert layout.input_bytes(("q_proj", "k_proj", "v_proj"), 64) == 64 * (2 + 1)
    assert layout.input_bytes(("gate_proj", "up_proj"), 64) == 0  # frozen, no adapter: nothing kept
    both = EstimateRequest(method="lora", framework="litgpt", lora_targets=("gate_proj", "up_proj")).checked()
    assert Layout(TINY, both, compute_bytes=2, quantized=False).input_bytes(("gate_proj", "up_proj"), 64) == 64 * 6


def test_litgpt_keeps_the_padded_output_of_a_fused_qkv_adapter_on_some_of_q_k_v() -> None:
    def padded(framework: str, targets: tuple[str, ...]) -> float:
        request = EstimateRequest(method="lora", framework=framework, lora_targets=targets).checked()
        return padded_adapter_bytes(Layout(TINY, request, compute_bytes=2, quantized=False))

    assert padded("litgpt", ("q_proj", "v_proj")) == 2 * (64 + 32)  # B's output: query (4 × 16) and value (2 × 16)
    assert padded("litgpt", ("q_proj", "k_proj", "v_proj")) == 0  # all three adapted: no padding
    assert padded("litgpt", ("gate_proj",)) == 0
    assert padded("hf", ("q_proj", "v_proj")) == 0  # separate projections, separate adapters


def test_litgpt_qlora_keeps_the_input_for_the_4_bit_matmul_besides_the_dropped_copy() -> None:
    request = EstimateRequest(method="qlora", framework="litgpt", lora_targets=("q_proj", "v_proj")).checked()
    layout = Layout(TINY, request, compute_bytes=2, quantized=True, keeps_quantized_inputs=True)
    assert layout.input_bytes(("q_proj", "k_proj", "v_proj"), 64) == 64 * (2 + 2 + 1)
    assert layout.input_bytes(("gate_proj", "up_proj"), 64) == 64 * 2
