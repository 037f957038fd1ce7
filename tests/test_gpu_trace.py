"""The traced estimate: byte counts that must be exact, a meta trace that matches a real CPU run, the caching
allocator against hand-computed cases, and ``betty gpu estimate --trace`` with and without the extra.

The trace needs the optional ``trace`` extra (torch, transformers, peft; the test extra installs it). The tests of
the allocator replay and of the one-line error need none of it and always run.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, betty_in_process

from betty_jupyter.gpu.estimate import GIB

from betty_jupyter.gpu import EstimateRequest, estimate
from betty_jupyter.gpu.architecture import Architecture
from betty_jupyter.gpu.trace import EXTRA, LOADING
from betty_jupyter.gpu.trace.allocator import MIB, CachingAllocator

HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
needs_extra = pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers, peft) is not installed")

# A Llama-family model small enough to run for real on the CPU in well under a second.
TINY = Architecture(name="tiny-llama", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128,
                    vocab=512)


def traced_step(request: EstimateRequest, device: str = "meta", arch: Architecture = TINY):
    """(model, tracer, live bytes by tag at the end of each phase) for ``request`` on the tiny model (or ``arch``)."""
    import torch  # lazy: the trace extra is optional

    from betty_jupyter.gpu.trace.memory import MemoryTracer
    from betty_jupyter.gpu.trace.model import build_model
    from betty_jupyter.gpu.trace.step import trace_step

    model = build_model(arch, request.checked(), torch.device(device))
    tracer = MemoryTracer(device=torch.device(device))
    phases = trace_step(model, request.checked(), tracer)
    return model, tracer, phases


def tensor_bytes(tensors) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


# ----- the tracer counts storages, not tensors ---------------------------------------------------------------------

@needs_extra
def test_views_share_their_storage_and_a_storage_is_freed_with_its_last_tensor() -> None:
    import torch  # lazy: the trace extra is optional

    from betty_jupyter.gpu.trace.memory import MemoryTracer

    tracer = MemoryTracer()
    with tracer:
        base = torch.empty(1000, device="meta")
        views = [base.view(10, 100), base[5:], base.view(10, 100).t()]
        other = base * 2
        assert tracer.live_by_tag()["activations"] == 2 * 4000
        del base
        assert tracer.live_by_tag()["activations"] == 2 * 4000  # the views keep it
        views.clear()
        assert tracer.live_by_tag()["activations"] == 4000
        del other
    assert tracer.live_by_tag()["activations"] == 0
    assert tracer.events() == [(0, 4000), (1, 4000), (0, -4000), (1, -4000)]
    assert [moment.total for moment in tracer.timeline()] == [4000, 8000, 4000, 0]


# ----- exact byte counts on meta ----------------------------------------------------------------------------------

@needs_extra
@pytest.mark.parametrize("method,precision", [("full", "bf16-mixed"), ("full", "bf16"), ("lora", "bf16-mixed"),
                                              ("inference", "fp32")])
def test_weights_are_every_parameter_and_buffer_exactly(method: str, precision: str) -> None:
    model, _, phases = traced_step(EstimateRequest(method=method, precision=precision, batch_size=2, seq_len=16))
    first = next(iter(phases.values()))
    assert first["weights"] == tensor_bytes(model.parameters()) + tensor_bytes(model.buffers())
    assert tensor_bytes(model.buffers()) < tensor_bytes(model.parameters()) / 100  # rotary frequencies only


@needs_extra
def test_full_finetuning_keeps_two_float32_adamw_states_per_weight() -> None:
    model, _, phases = traced_step(EstimateRequest(method="full", precision="bf16-mixed", batch_size=2, seq_len=16))
    weights = sum(parameter.numel() for parameter in model.parameters())
    assert all(parameter.dtype.itemsize == 4 for parameter in model.parameters())  # AMP: float32 weights
    assert phases["optimizer_step"]["optimizer"] == 2 * 4 * weights
    assert phases["backward"]["gradients"] == 4 * weights


@needs_extra
def test_lora_gradients_are_the_adapters_only() -> None:
    model, _, phases = traced_step(EstimateRequest(method="lora", batch_size=2, seq_len=16,
                                                   lora_targets=("q_proj", "v_proj", "down_proj")))
    trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora_A" in name or "lora_B" in name for name in trained)
    assert {name.split(".lora_")[0].rsplit(".", 1)[-1] for name in trained} == {"q_proj", "v_proj", "down_proj"}
    assert phases["backward"]["gradients"] == tensor_bytes(trained.values())
    assert all(p.dtype.itemsize == 4 for p in trained.values())  # peft keeps adapters in float32
    assert phases["optimizer_step"]["optimizer"] == 2 * tensor_bytes(trained.values())


@needs_extra
def test_inference_kv_cache_is_two_tensors_per_layer_of_the_whole_context() -> None:
    batch, seq = 3, 24
    _, _, phases = traced_step(EstimateRequest(method="inference", precision="bf16", batch_size=batch, seq_len=seq))
    expected = 2 * TINY.layers * TINY.kv_heads * TINY.head_dim * seq * batch * 2
    assert phases["decode"]["kv_cache"] == expected
    assert phases["prefill"]["kv_cache"] < expected  # the generated tokens are added while decoding


# ----- the meta trace is faithful: the same step run for real on the CPU --------------------------------------------

@needs_extra
@pytest.mark.parametrize("method,grad_ckpt", [("full", "none"), ("lora", "none"), ("inference", "none"),
                                              ("full", "full"), ("lora", "full")])
def test_a_meta_trace_counts_what_a_real_cpu_run_allocates(method: str, grad_ckpt: str) -> None:
    request = EstimateRequest(method=method, precision="bf16-mixed", batch_size=2, seq_len=16, grad_ckpt=grad_ckpt)
    model, meta, on_meta = traced_step(request, "meta")
    _, cpu, on_cpu = traced_step(request, "cpu")
    # AdamW keeps its step counters on the host when the weights are on a GPU (or on meta), but beside them on the CPU.
    trained = sum(1 for parameter in model.parameters() if parameter.requires_grad) if request.training else 0
    for phase, live in on_meta.items():
        expected = dict(live, optimizer=live["optimizer"] + 4 * trained)
        assert on_cpu[phase] == expected, phase
    # The same storages in the same order (empty ones aside: a cache starts as an empty tensor made differently).
    assert [(a.nbytes, a.op, a.tag) for a in meta.allocations if a.tag != "optimizer" and a.nbytes] == \
        [(a.nbytes, a.op, a.tag) for a in cpu.allocations if a.tag != "optimizer" and a.nbytes]


@needs_extra
def test_checkpointed_layers_keep_only_their_inputs_until_backward() -> None:
    request = EstimateRequest(method="full", batch_size=2, seq_len=64)
    _, _, plain = traced_step(request)
    _, _, checkpointed = traced_step(request.changed(grad_ckpt="full"))
    layer_inputs = TINY.layers * 2 * 64 * TINY.hidden * 4  # float32 residual stream under autocast
    assert checkpointed["forward"]["activations"] < plain["forward"]["activations"] / 2
    assert checkpointed["forward"]["activations"] >= layer_inputs


# ----- where the peak is ----------------------------------------------------------------------------------------

@needs_extra
def test_the_peak_names_its_phase_and_what_made_it() -> None:
    from betty_jupyter.gpu.trace.run import run_trace  # lazy: the trace extra is optional

    wide = Architecture(name="wide-vocabulary", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                        intermediate=128, vocab=32000)
    loss_bound = run_trace(wide, EstimateRequest(method="lora", batch_size=4, seq_len=256).checked())
    assert loss_bound.peak_phase == "backward"
    assert loss_bound.peak["logits"] > 0 and "backward" in loss_bound.where
    step_bound = run_trace(TINY, EstimateRequest(method="full", precision="fp32", batch_size=1, seq_len=8).checked())
    assert step_bound.peak_phase == "optimizer_step"
    assert step_bound.peak["optimizer"] > step_bound.peak["weights"]
    assert step_bound.allocated_bytes >= step_bound.traced_bytes
    assert step_bound.reserved_bytes >= step_bound.allocated_bytes


# ----- the caching allocator, by hand -----------------------------------------------------------------------------

def test_small_requests_are_rounded_to_512_bytes_in_2_mib_segments() -> None:
    allocator = CachingAllocator().replay([(1, 1), (2, 513), (3, 512)])
    assert allocator.allocated == 512 + 1024 + 512
    assert allocator.reserved == 2 * MIB


def test_a_freed_block_is_reused_before_a_new_segment_is_asked_for() -> None:
    allocator = CachingAllocator().replay([(1, 3 * MIB), (2, 5 * MIB), (3, 12 * MIB)])
    assert allocator.reserved == 20 * MIB  # 3 MiB gets a 20 MiB segment; 5 and 12 MiB are split off it
    allocator.replay([(4, 1536 * 1024)])
    assert allocator.reserved == 40 * MIB  # nothing free is left: a second 20 MiB segment
    allocator.replay([(1, -1), (2, -1), (5, 8 * MIB)])
    assert allocator.reserved == 40 * MIB  # the freed 3 and 5 MiB merged into one 8 MiB block
    assert allocator.allocated == 8 * MIB + 12 * MIB + 1536 * 1024


def test_large_requests_get_segments_rounded_to_2_mib_and_small_leftovers_are_not_split() -> None:
    allocator = CachingAllocator().replay([(1, 11 * MIB + 1)])
    assert allocator.reserved == 12 * MIB
    assert allocator.allocated == 12 * MIB  # 1 MiB minus 512 bytes left over: too small to split off
    allocator.replay([(2, 2 * MIB)])
    assert allocator.reserved == 12 * MIB + 20 * MIB
    assert allocator.peak_allocated == 12 * MIB + 2 * MIB


def test_small_and_large_pools_never_share_a_segment() -> None:
    allocator = CachingAllocator().replay([(1, 4 * MIB), (1, -1), (2, 1024)])
    assert allocator.reserved == 20 * MIB + 2 * MIB
    assert allocator.peak_reserved == allocator.reserved and allocator.allocated == 1024


# ----- betty gpu estimate --trace ----------------------------------------------------------------------------------

@needs_extra
def test_the_cli_prints_the_traced_breakdown_beside_the_formula(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", "Llama-3.2-1B", "--method", "lora",
                                      "--seq-len", "256", "--trace", "--gpu", "a100-80gb")
    assert code == 0, err
    formula = estimate("Llama-3.2-1B", method="lora", seq_len=256)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line.startswith("  ")}
    for item in ("weights", "gradients", "optimizer", "activations", "logits", "allocator", "runtime"):
        assert item in rows, item
    assert rows["weights"][1] == f"{formula.breakdown['weights']:.2f}" == rows["weights"][3]
    peak = rows["peak"]
    assert peak[3] == f"{formula.peak_gib:.2f}" and float(peak[1]) > float(rows["weights"][1])
    assert "the peak: backward" in out and "reserved" in out and "A100-80GB" in out
    assert "tracing: forward" in err and "tracing: optimizer step" in err


@needs_extra
def test_the_json_form_carries_the_trace_and_the_formula_beside_it(tmp_path, capsys) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(tmp_path / "config.json"),
                                      "--method", "full", "--seq-len", "32", "--trace", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["peak_phase"] in ("forward", "backward", "optimizer_step") and data["peak_op"]
    assert data["reserved_gib"] >= data["allocated_gib"] > 0
    assert data["peak_gib"] == pytest.approx(sum(data["breakdown"].values()), abs=0.01)
    assert data["formula"]["peak_gib"] == pytest.approx(estimate(str(tmp_path / "config.json"), method="full",
                                                                 seq_len=32).peak_gib, abs=1e-3)
    assert data["breakdown"]["runtime"] * GIB > 0.5 * GIB


@needs_extra
@pytest.mark.parametrize("argv,why", [
    (["--model", "BERT-large", "--method", "lora"], "encoder model"),
    (["--model", "Llama-3.2-1B", "--method", "qlora", "--framework", "torchtune"], "Hugging Face stack"),
    (["--model", "Llama-3.2-1B", "--method", "full", "--gpus", "2", "--sharding", "fsdp", "--offload", "optimizer"],
     "--offload"),
])
def test_what_is_not_traced_yet_is_refused_in_one_line(argv, why, capsys) -> None:
    code, out, err = betty_in_process(capsys, "gpu", "estimate", *argv, "--trace")
    assert code == 1 and out == ""
    assert why in err and "drop --trace for the formula estimate" in err
    assert err.count("\n") == 1


BLOCKED = textwrap.dedent("""
    import sys

    class NoTraceExtra:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "peft"):
                raise ImportError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTraceExtra())
    from betty_jupyter.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def test_without_the_extra_the_cli_says_how_to_install_it_in_one_line() -> None:
    argv = ["gpu", "estimate", "--model", "Llama-3.2-1B", "--method", "lora", "--trace"]
    result = subprocess.run([sys.executable, "-c", BLOCKED, *argv], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"betty: {EXTRA}\n"
    # PyTorch's CPU build first: the extra alone pulls the CUDA build (gigabytes) on Linux
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu, then pip install " \
           "'betty-jupyter[trace]'" in result.stderr
    assert result.stdout == ""
    plain = subprocess.run([sys.executable, "-c", BLOCKED, *argv[:-1]], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
    assert plain.returncode == 0 and "peak" in plain.stdout  # the formula estimate needs none of it


@needs_extra
def test_the_first_trace_in_a_process_says_it_is_loading_pytorch_before_anything_else(tmp_path) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "gpu", "estimate", "--model",
                             str(tmp_path / "config.json"), "--method", "full", "--seq-len", "32", "--trace"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    told = result.stderr.splitlines()
    assert told[0] == f"betty: tracing: {LOADING}…" and told[1].startswith("betty: tracing: building ")
    assert "tracing: forward" in result.stderr


def test_every_trace_install_hint_in_the_docs_names_pytorchs_cpu_build() -> None:
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if "betty-jupyter[trace]" in line:
                near = "\n".join(lines[max(0, number - 2):number + 3])
                assert "--index-url https://download.pytorch.org/whl/cpu" in near, f"{page.name}:{number + 1}"
