"""The trace's methods beyond plain LoRA and full fine-tuning: quantized weights (QLoRA, int8).

Like ``test_gpu_trace.py`` these need the optional ``trace`` extra and skip without it.
"""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import betty_in_process
from test_gpu_trace import TINY, needs_extra, tensor_bytes, traced_step

from betty_jupyter.gpu import EstimateRequest, estimate
from betty_jupyter.gpu.architecture import Architecture
from betty_jupyter.gpu.estimate import GIB, NF4_SCALE_BYTES

QUANTIZED = [
    EstimateRequest(method="qlora", batch_size=2, seq_len=16),
    EstimateRequest(method="qlora", batch_size=2, seq_len=16, double_quant=False),
    EstimateRequest(method="qlora", batch_size=2, seq_len=16, grad_ckpt="full", lora_targets=("q_proj", "down_proj")),
    EstimateRequest(method="lora", precision="int8", batch_size=2, seq_len=16),
    EstimateRequest(method="inference", precision="nf4", batch_size=2, seq_len=16),
    EstimateRequest(method="inference", precision="int8", batch_size=2, seq_len=16),
]


def _quantized_layers(model):
    from betty_jupyter.gpu.trace.quantized import QuantizedLinear  # lazy: the trace extra is optional

    return [module for module in model.modules() if isinstance(module, QuantizedLinear)]


# ----- quantized weights: the meta trace is a real CPU run's storages --------------------------------------------

@needs_extra
@pytest.mark.parametrize("request_", QUANTIZED, ids=lambda r: f"{r.method}-{r.resolved_precision}-{r.grad_ckpt}"
                         f"{'' if r.double_quant else '-nodq'}")
def test_a_quantized_meta_trace_counts_what_a_real_cpu_run_allocates(request_: EstimateRequest) -> None:
    model, meta, on_meta = traced_step(request_, "meta")
    _, cpu, on_cpu = traced_step(request_, "cpu")
    trained = sum(1 for parameter in model.parameters() if parameter.requires_grad) if request_.training else 0
    for phase, live in on_meta.items():
        assert on_cpu[phase] == dict(live, optimizer=live["optimizer"] + 4 * trained), phase  # host step counters
    assert [(a.nbytes, a.op, a.tag) for a in meta.allocations if a.tag != "optimizer" and a.nbytes] == \
        [(a.nbytes, a.op, a.tag) for a in cpu.allocations if a.tag != "optimizer" and a.nbytes]
    layers = _quantized_layers(model)
    assert len(layers) == TINY.layers * 7  # q, k, v, o, gate, up, down; embeddings and lm_head stay bf16
    assert on_meta[next(iter(on_meta))]["quantization"] > 0


@needs_extra
def test_a_qlora_trace_of_a_catalog_models_layers_is_a_real_cpu_runs_storages() -> None:
    from dataclasses import replace

    from betty_jupyter.gpu.model_catalog import resolve_model

    # Llama-3.2-1B with every width as published (grouped-query attention, 128k vocabulary, tied embeddings) and
    # two of its sixteen layers, so that the real run fits a laptop's CPU.
    arch = replace(resolve_model("Llama-3.2-1B"), layers=2)
    request = EstimateRequest(method="qlora", batch_size=1, seq_len=8, lora_targets=("q_proj", "v_proj", "down_proj"))
    model, meta, on_meta = traced_step(request, "meta", arch)
    _, cpu, on_cpu = traced_step(request, "cpu", arch)
    trained = sum(1 for parameter in model.parameters() if parameter.requires_grad)
    for phase, live in on_meta.items():
        assert on_cpu[phase] == dict(live, optimizer=live["optimizer"] + 4 * trained), phase  # host step counters
    assert [(a.nbytes, a.op, a.tag) for a in meta.allocations if a.tag != "optimizer" and a.nbytes] == \
        [(a.nbytes, a.op, a.tag) for a in cpu.allocations if a.tag != "optimizer" and a.nbytes]


# ----- quantized weights: exactly the formula's bytes ------------------------------------------------------------

@needs_extra
@pytest.mark.parametrize("precision,double_quant", [("nf4", True), ("nf4", False), ("int8", True)])
def test_quantized_weights_take_exactly_the_formulas_bytes(precision: str, double_quant: bool) -> None:
    import torch  # lazy: the trace extra is optional

    from betty_jupyter.gpu.model_catalog import resolve_model
    from betty_jupyter.gpu.trace.model import build_model
    from betty_jupyter.gpu.trace.quantized import DYNAMIC_MAP, NF4_CODE, quantization_constants

    arch = resolve_model("Llama-3.2-1B")
    request = EstimateRequest(method="inference", precision=precision, double_quant=double_quant).checked()
    model = build_model(arch, request, torch.device("meta"))
    layers = _quantized_layers(model)
    formula = estimate(arch, request)
    # The packed weights are the formula's quantized weights; with the bf16 rest, its whole weight term.
    assert tensor_bytes(layer.weight for layer in layers) == arch.linear_params() * (0.5 if precision == "nf4" else 1)
    assert tensor_bytes(model.parameters()) == pytest.approx(formula.breakdown["weights"] * GIB, abs=1)
    constants = tensor_bytes(quantization_constants(model))
    if precision == "nf4":
        # One absmax per 64 weights (8-bit plus a float32 per 256 blocks when double-quantized), as the formula
        # counts; bitsandbytes also keeps per matrix a 16-entry NF4 code (and an offset), and one shared map.
        tables = len(layers) * 4 * (NF4_CODE + (1 if double_quant else 0)) + (4 * DYNAMIC_MAP if double_quant else 0)
        assert constants == arch.linear_params() * NF4_SCALE_BYTES[double_quant] + tables
    else:
        assert constants == 4 * sum(layer.out_features for layer in layers)  # one float32 scale per output row


# ----- quantized matmuls: bitsandbytes' memory ---------------------------------------------------------------------

@needs_extra
def test_nf4_dequantizes_one_matrix_at_a_time_in_forward_and_again_in_backward() -> None:
    model, tracer, quantized = traced_step(EstimateRequest(method="qlora", batch_size=2, seq_len=16))
    dequantized = [a for a in tracer.allocations if a.tag == "quantization" and a.phase != "setup"]
    layers = _quantized_layers(model)
    assert {a.nbytes for a in dequantized} <= {2 * layer.in_features * layer.out_features for layer in layers}
    # Every layer dequantizes once in forward and again in backward, unless its input needs no gradient: the first
    # layer's q, k and v read the frozen embeddings.
    assert Counter(a.phase for a in dequantized) == {"forward": len(layers), "backward": len(layers) - 3}
    constants = quantized["setup"]["quantization"]
    assert all(live["quantization"] == constants for live in quantized.values())  # each is freed after its matmul


@needs_extra
def test_int8_keeps_the_input_of_every_frozen_layer_that_needs_a_gradient_and_nf4_none() -> None:
    qlora = EstimateRequest(method="qlora", batch_size=2, seq_len=16, lora_targets=("q_proj",))
    _, _, nf4 = traced_step(qlora)
    model, tracer, int8 = traced_step(qlora.changed(method="lora", precision="int8"))
    # The same peft layers over both: what differs is what the frozen matmul keeps. MatMul4Bit (bitsandbytes
    # >= 0.43.2) keeps nothing; MatMul8bitLt keeps its bf16 input (batch × seq × width) whenever it needs a
    # gradient: the gate/up and down inputs of every layer cost that much more. q/k/v's shared input costs nothing
    # more (q_proj's adapter keeps it anyway), nor does o_proj's (the attention output, which flash attention keeps).
    tokens = 2 * 16
    kept = TINY.layers * 2 * tokens * (TINY.hidden + TINY.intermediate)
    assert int8["forward"]["activations"] - nf4["forward"]["activations"] == kept
    # No weight is dequantized in forward (int8 × int8 product); in backward, once per layer with a gradient.
    dequantized = Counter(a.phase for a in tracer.allocations if a.tag == "quantization" and a.phase != "setup")
    assert dequantized == {"backward": len(_quantized_layers(model)) - 3}


@needs_extra
def test_peft_adds_an_adapter_to_a_quantized_layer_as_its_bitsandbytes_layers_do() -> None:
    lora = EstimateRequest(method="lora", batch_size=2, seq_len=16, lora_targets=("q_proj", "v_proj"))
    _, plain, _ = traced_step(lora)
    _, quantized, _ = traced_step(lora.changed(method="qlora"))

    def copies(tracer) -> int:  # storages cast for an adapter's input that are kept for backward
        freed = {handle for handle, nbytes, phase in tracer.phased_events() if nbytes < 0 and phase == "forward"}
        return sum(1 for a in tracer.allocations if a.phase == "forward" and a.handle not in freed
                   and a.op == "_to_copy" and "lora_A" in a.module and a.nbytes == 2 * 2 * 16 * TINY.hidden)

    # Plain peft casts each adapter's input to float32 (autocast casts it back: a copy kept per adapter); over a
    # bitsandbytes layer under autocast, it does not, and the adapter reads the frozen layer's own input.
    assert copies(plain) == 2 * TINY.layers and copies(quantized) == 0
    clones = [a for a in quantized.allocations if a.op == "clone" and a.module.endswith(("q_proj", "v_proj"))]
    assert len(clones) == 2 * TINY.layers  # peft clones a 4-bit layer's output before adding the adapter's


@needs_extra
def test_a_qlora_trace_of_a_catalog_model_lands_near_the_formula() -> None:
    from betty_jupyter.gpu.trace.run import run_trace  # lazy: the trace extra is optional
    from betty_jupyter.gpu.model_catalog import resolve_model

    request = EstimateRequest(method="qlora", batch_size=1, seq_len=512).checked()
    traced = run_trace(resolve_model("Llama-3.2-1B"), request)
    formula = estimate("Llama-3.2-1B", request)
    assert traced.peak["weights"] == pytest.approx(formula.breakdown["weights"] * GIB, rel=1e-4)  # + rotary buffer
    assert traced.allocated_bytes / GIB == pytest.approx(formula.allocated_gib, rel=0.10)
    assert any("bitsandbytes" in note for note in traced.notes)
    assert traced.params == resolve_model("Llama-3.2-1B").params()  # weights, not the bytes they are packed in


# ----- mixture of experts: transformers' expert loop with the tokens spread evenly --------------------------------

TINY_MOE = Architecture(name="tiny-moe", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128,
                        vocab=512, experts=4, experts_per_token=2)


@needs_extra
def test_even_routing_allocates_what_transformers_own_expert_loop_does_for_an_even_router() -> None:
    import torch  # lazy: the trace extra is optional

    from betty_jupyter.gpu.trace.experts import EVEN_ROUTING
    from betty_jupyter.gpu.trace.memory import MemoryTracer
    from betty_jupyter.gpu.trace.model import build_model

    model = build_model(TINY_MOE, EstimateRequest(method="full", precision="bf16").checked(), torch.device("cpu"))
    experts = next(module for module in model.modules() if hasattr(module, "gate_up_proj"))
    tokens, top_k = 32, TINY_MOE.experts_per_token
    # A router that really is even: token t goes to experts 2t and 2t + 1 (mod 4), 16 tokens each.
    index = torch.tensor([[(top_k * t + k) % TINY_MOE.experts for k in range(top_k)] for t in range(tokens)])
    runs = {}
    for implementation in ("eager", EVEN_ROUTING):
        experts.config._experts_implementation = implementation
        hidden = torch.randn(tokens, TINY_MOE.hidden, dtype=torch.bfloat16, requires_grad=True)
        tracer = MemoryTracer(device=torch.device("cpu"))
        with tracer:
            kept = experts(hidden, index, torch.rand(tokens, top_k))
            live = sum(tracer.live_by_tag().values())
        runs[implementation] = (live, max(moment.total for moment in tracer.timeline()),
                                [(a.nbytes, a.op) for a in tracer.allocations if a.nbytes >= 1024])
        del kept
    eager, even = runs["eager"], runs[EVEN_ROUTING]
    assert even[2] == eager[2]  # every allocation of 1 KiB or more, in order
    # What differs are the few index bytes transformers' mask bookkeeping makes (one_hot's own scratch).
    assert even[0] == pytest.approx(eager[0], rel=0.01) and even[1] == pytest.approx(eager[1], rel=0.01)


@needs_extra
@pytest.mark.parametrize("request_", [
    EstimateRequest(method="full", batch_size=2, seq_len=16),
    EstimateRequest(method="lora", batch_size=2, seq_len=16, lora_targets=("q_proj", "o_proj")),
    EstimateRequest(method="inference", precision="bf16", batch_size=2, seq_len=16),
], ids=lambda r: r.method)
def test_a_moe_meta_trace_counts_what_a_real_cpu_run_allocates(request_: EstimateRequest) -> None:
    model, meta, on_meta = traced_step(request_, "meta", TINY_MOE)
    _, cpu, on_cpu = traced_step(request_, "cpu", TINY_MOE)
    trained = sum(1 for parameter in model.parameters() if parameter.requires_grad) if request_.training else 0
    for phase, live in on_meta.items():
        assert on_cpu[phase] == dict(live, optimizer=live["optimizer"] + 4 * trained), phase
    assert [(a.nbytes, a.op, a.tag) for a in meta.allocations if a.tag != "optimizer" and a.nbytes] == \
        [(a.nbytes, a.op, a.tag) for a in cpu.allocations if a.tag != "optimizer" and a.nbytes]
    base = sum(p.numel() for name, p in model.named_parameters() if "lora_" not in name)
    assert base == TINY_MOE.params()  # every expert is there, as the formula counts them


@needs_extra
def test_a_moe_trace_says_how_it_routed() -> None:
    from betty_jupyter.gpu.trace.run import run_trace  # lazy: the trace extra is optional

    traced = run_trace(TINY_MOE, EstimateRequest(method="lora", batch_size=2, seq_len=64).checked())
    assert any("even share of the tokens" in note for note in traced.notes)
    dense = run_trace(TINY, EstimateRequest(method="lora", batch_size=2, seq_len=64).checked())
    assert not any("even share" in note for note in dense.notes)
    assert traced.peak["activations"] > dense.peak["activations"]  # two experts per token instead of one MLP


@needs_extra
@pytest.mark.parametrize("argv,why", [
    (["--method", "lora", "--lora-targets", "q_proj,gate_proj"], "experts of a mixture of experts"),
    (["--method", "qlora"], "quantized experts"),
])
def test_what_a_moe_trace_does_not_run_is_refused_in_one_line(argv, why, capsys) -> None:
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", "Mixtral-8x7B", *argv, "--trace")
    assert code == 1 and out == "" and why in err and err.count("\n") == 1


# ----- several GPUs: one GPU's trace, sharded per rank ------------------------------------------------------------

def _pieces():
    from betty_jupyter.gpu.trace.sharding import Piece

    return [Piece(800, "weights", "setup", False), Piece(1600, "optimizer", "setup", False),
            Piece(400, "activations", "forward", False), Piece(200, "activations", "forward", True),
            Piece(800, "gradients", "backward", False), Piece(64, "quantization", "setup", False),
            Piece(96, "quantization", "forward", False)]


def _live_after(events, tag_of) -> Counter:
    live: Counter = Counter()
    for handle, nbytes, _ in events:
        live[tag_of(handle)] += nbytes
    return live


_EVENTS = [(0, 800, "setup"), (1, 1600, "setup"), (5, 64, "setup"), (2, 400, "forward"), (3, 200, "forward"),
           (6, 96, "forward"), (6, -96, "forward"), (3, -200, "backward"), (4, 800, "backward"), (2, -400, "backward"),
           (4, -800, "optimizer_step")]


@pytest.mark.parametrize("sharding,shares", [
    ("zero1", [800, 400, 400, 200, 800, 64, 96]),
    ("zero2", [800, 400, 400, 200, 200, 64, 96]),
    ("fsdp", [200, 400, 400, 0, 200, 16, 96]),
    ("ddp", [800, 1600, 400, 200, 800, 64, 96]),
])
def test_each_stage_divides_what_it_shards_by_the_gpus(sharding: str, shares: list[int]) -> None:
    from betty_jupyter.gpu.trace.sharding import Sharding

    rank = Sharding.of(EstimateRequest(method="full", precision="bf16", gpus=4, sharding=sharding).checked(),
                       unit_bytes=(300, 100), gradient_bytes=800)
    assert [rank.share(piece) for piece in _pieces()] == shares


def test_sharding_adds_its_buffers_for_the_phases_they_live_in() -> None:
    from betty_jupyter.gpu.trace.sharding import Sharding, sharded_events

    fsdp = Sharding.of(EstimateRequest(method="full", precision="bf16", gpus=4, sharding="fsdp").checked(),
                       unit_bytes=(300, 100), gradient_bytes=800)
    events, tag_of = sharded_events(_EVENTS, _pieces(), fsdp)
    added = [(tag_of(handle), nbytes, phase) for handle, nbytes, phase in events if handle >= len(_pieces())]
    # The all-gather buffer from the start of forward to the end of backward, the reduce-scatter one in backward.
    assert added == [("weights", 300, "forward"), ("gradients", 100, "backward"), ("weights", -300, "backward"),
                     ("gradients", -100, "backward")]
    assert _live_after(events, tag_of)["weights"] == 200
    ddp = Sharding.of(EstimateRequest(method="full", precision="bf16", gpus=4, sharding="ddp").checked(),
                      unit_bytes=(300, 100), gradient_bytes=800)
    events, tag_of = sharded_events(_EVENTS, _pieces(), ddp)
    assert _live_after(events, tag_of)["gradients"] == 800  # the buckets stay for the whole run


def test_inference_on_several_gpus_divides_weights_and_kv_cache_only() -> None:
    from betty_jupyter.gpu.trace.sharding import Piece, Sharding

    rank = Sharding.of(EstimateRequest(method="inference", gpus=4).checked(), unit_bytes=(300, 0), gradient_bytes=0)
    pieces = [Piece(800, "weights", "setup", False), Piece(400, "kv_cache", "prefill", False),
              Piece(400, "activations", "prefill", False), Piece(64, "quantization", "setup", False)]
    assert [rank.share(piece) for piece in pieces] == [200, 100, 400, 16]
    assert rank.buffers() == []


@needs_extra
@pytest.mark.parametrize("method,sharding", [("full", "fsdp"), ("lora", "zero3"), ("qlora", "zero2"),
                                             ("full", "ddp")])
def test_a_sharded_trace_is_the_one_gpu_trace_divided_per_rank(method: str, sharding: str) -> None:
    from betty_jupyter.gpu.trace.run import run_trace  # lazy: the trace extra is optional

    one = EstimateRequest(method=method, batch_size=2, seq_len=64).checked()
    single = run_trace(TINY, one)
    ranked = run_trace(TINY, one.changed(gpus=4, sharding=sharding))
    setup, single_setup = ranked.phases["setup"], single.phases["setup"]
    stage = {"ddp": 0, "zero2": 2, "zero3": 3, "fsdp": 3}[sharding]
    assert setup["optimizer"] == (single_setup["optimizer"] if stage == 0 else
                                  pytest.approx(single_setup["optimizer"] / 4, abs=4 * 64))
    assert setup["weights"] == (pytest.approx(single_setup["weights"] / 4, abs=4 * 64) if stage == 3
                                else single_setup["weights"])
    # At the end of backward: every gradient (DDP: twice, with its buckets), a quarter of them from stage 2 on.
    assert ranked.phases["backward"]["gradients"] == pytest.approx(
        single.phases["backward"]["gradients"] * (2 if stage == 0 else 1 / 4 if stage >= 2 else 1), abs=4 * 64)
    assert any("sharding applied analytically" in note for note in ranked.notes)
    if stage == 3:
        assert ranked.peak["activations"] <= single.peak["activations"]  # autocast's weight copies are gathered


@needs_extra
def test_zero_with_a_float32_master_copy_is_refused_in_one_line(capsys) -> None:
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", "Llama-3.2-1B", "--method", "full",
                                      "--gpus", "2", "--sharding", "zero2", "--trace")
    assert code == 1 and out == "" and "master copy" in err and err.count("\n") == 1


# ----- the loss in chunks, selective checkpointing, gradient accumulation -----------------------------------------

WIDE = Architecture(name="wide-vocabulary", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128,
                    vocab=32000)


def _same_storages(request: EstimateRequest, arch: Architecture) -> tuple:
    """The meta trace and the CPU run of ``request`` (asserted to allocate the same storages); the meta ones."""
    model, meta, on_meta = traced_step(request, "meta", arch)
    _, cpu, _ = traced_step(request, "cpu", arch)
    assert [(a.nbytes, a.op, a.tag) for a in meta.allocations if a.tag != "optimizer" and a.nbytes] == \
        [(a.nbytes, a.op, a.tag) for a in cpu.allocations if a.tag != "optimizer" and a.nbytes]
    return model, meta, on_meta


def _peak(tracer):
    return max((moment for moment in tracer.timeline() if moment.phase != "setup"), key=lambda moment: moment.total)


@needs_extra
def test_a_chunked_loss_makes_one_chunk_of_float32_logits_at_a_time() -> None:
    batch, seq = 2, 64
    plain = EstimateRequest(method="lora", batch_size=batch, seq_len=seq)
    _, whole, _ = _same_storages(plain, WIDE)
    _, chunked, _ = _same_storages(plain.changed(chunked_loss=True), WIDE)
    float32_logits = 4 * batch * seq * WIDE.vocab
    assert max(a.nbytes for a in whole.allocations if a.tag == "logits") == float32_logits
    assert max(a.nbytes for a in chunked.allocations if a.tag == "logits") == float32_logits // 8
    assert _peak(chunked).total < _peak(whole).total * 0.75


def _kept_by(tracer, op: str) -> list:
    """Storages ``op`` made in forward that are still alive when backward starts."""
    freed = {handle for handle, nbytes, phase in tracer.phased_events() if nbytes < 0 and phase == "forward"}
    return [a for a in tracer.allocations if a.phase == "forward" and a.op == op and a.handle not in freed]


@needs_extra
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_selective_checkpointing_recomputes_the_attention_core_only(attention: str) -> None:
    plain = EstimateRequest(method="full", batch_size=2, seq_len=64, attention=attention)
    _, kept_tracer, kept = _same_storages(plain, TINY)
    _, tracer, selective = _same_storages(plain.changed(grad_ckpt="selective"), TINY)
    _, _, full = _same_storages(plain.changed(grad_ckpt="full"), TINY)
    assert full["forward"]["activations"] < selective["forward"]["activations"] < kept["forward"]["activations"]
    if attention == "eager":  # the softmax of the scores is kept for backward, unless it is recomputed
        assert len(_kept_by(kept_tracer, "_softmax")) == TINY.layers and not _kept_by(tracer, "_softmax")


@needs_extra
def test_accumulated_gradients_are_there_for_the_whole_step() -> None:
    one = EstimateRequest(method="full", batch_size=2, seq_len=64)
    model, single, _ = _same_storages(one, WIDE)
    _, accumulated, phases = _same_storages(one.changed(grad_accum=4), WIDE)
    gradients = tensor_bytes(p for p in model.parameters() if p.requires_grad)
    assert _peak(accumulated).live["gradients"] == gradients  # left by the micro-batches before
    assert phases["forward"]["gradients"] == gradients
    assert _peak(accumulated).total > _peak(single).total
