"""Advice: GRES parsing, where a job fits, the cheapest changes, and the largest batch or context."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import betty_in_process

from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import (EstimateRequest, Target, advise, estimate, gpu_type, largest_fitting, parse_gres,
                               parse_partition, targets_from)
from betty_jupyter.gpu.hardware import parse_gpu_type


@pytest.mark.parametrize(("gres", "counts"), [
    ("gpu:a100:4,gpu:h100:2", {"a100": 4, "h100": 2}),
    ("gpu:a100:4(S:0-1),gpu:h100:2(S:0)", {"a100": 4, "h100": 2}),
    ("gpu:nvidia_a100-sxm4-80gb:8", {"nvidia_a100-sxm4-80gb": 8}),
    ("gpu:4", {"gpu": 4}),
    ("(null)", {}),
    ("shard:8,gpu:l40s:2", {"l40s": 2}),
])
def test_gres_strings_as_sinfo_prints_them(gres: str, counts: dict[str, int]) -> None:
    assert parse_gres(gres) == counts


@pytest.mark.parametrize(("name", "expected"), [
    ("nvidia_a100-sxm4-80gb", "A100-80GB"), ("a100", "A100-40GB"), ("H100", "H100-80GB"),
    ("tesla_v100-sxm2-16gb", "V100-16GB"), ("4090", "RTX4090"), ("l40s", "L40S"), ("h200", "H200"),
])
def test_gpu_type_spellings(name: str, expected: str) -> None:
    assert gpu_type(name).name == expected


def test_a100_80gb_has_80_gib_and_a_custom_type_takes_its_memory() -> None:
    assert gpu_type("a100-80gb").memory_gib == 80
    assert parse_gpu_type("mygpu=48").memory_gib == 48


def test_unknown_gpu_types_and_bad_partitions_are_refused() -> None:
    with pytest.raises(GpuEstimateError, match="unknown GPU type 'tpu'"):
        gpu_type("tpu")
    with pytest.raises(GpuEstimateError, match="name=gres"):
        parse_partition("gpu:a100:4")
    with pytest.raises(GpuEstimateError, match="lists no GPUs"):
        parse_partition("cpu=(null)")


def test_partitions_become_targets_with_cards_per_node() -> None:
    targets = targets_from([parse_partition("gpu=gpu:a100:4,gpu:h100:2")])
    assert [(t.label, t.cards) for t in targets] == [("gpu/A100-40GB", 4), ("gpu/H100-80GB", 2)]


def test_a_job_that_fits_is_placed_on_the_smallest_card_that_holds_it() -> None:
    request = EstimateRequest(method="inference", batch_size=8, seq_len=8192)
    advice = advise("Llama-3-8B", request, targets_from(gpu_types=[gpu_type("h100"), gpu_type("a10"),
                                                                     gpu_type("l40s")]))
    assert advice.fits_somewhere and not advice.changes
    first = advice.placements[0]
    assert first.target.gpu.name == "L40S" and first.fits and first.headroom_gib > 0
    assert first.estimate.request.gpus == 1
    a10 = next(p for p in advice.placements if p.target.gpu.name == "A10")
    assert a10.fits and a10.estimate.request.gpus >= 2  # tensor parallel over several A10s


def test_a_job_too_big_for_one_card_is_spread_with_fsdp_within_a_node() -> None:
    request = EstimateRequest(method="full", batch_size=1, seq_len=2048, grad_ckpt="full")
    advice = advise("Llama-3-8B", request, [Target(gpu_type("a100-80gb"), "gpu", 8)])
    placement = advice.placements[0]
    assert placement.fits and placement.estimate.request.sharding == "fsdp"
    assert 2 <= placement.estimate.request.gpus <= 8


def test_when_nothing_fits_each_suggested_change_fits_somewhere() -> None:
    request = EstimateRequest(method="full", batch_size=4, seq_len=4096)
    advice = advise("Llama-3-8B", request, [Target(gpu_type("rtx4090"), "small", 1)])
    assert not advice.fits_somewhere and advice.changes
    for change in advice.changes:
        assert change.fits_on == ("small/RTX4090",)
        assert change.estimate.peak_gib <= gpu_type("rtx4090").memory_gib
    assert any("QLoRA" in change.description for change in advice.changes)


def test_changes_come_cheapest_first() -> None:
    request = EstimateRequest(method="lora", batch_size=4, seq_len=4096)
    advice = advise("Llama-3-8B", request, [Target(gpu_type("a100-80gb"))])
    descriptions = [change.description for change in advice.changes]
    assert descriptions[0].startswith("activation checkpointing")


def test_largest_batch_fits_and_one_more_does_not() -> None:
    request = EstimateRequest(method="lora", seq_len=2048, grad_ckpt="full")
    gpu = gpu_type("a100-40gb")
    batch = largest_fitting("Llama-3-8B", request, gpu, "batch_size")
    assert batch is not None and batch > 1
    assert estimate("Llama-3-8B", request.changed(batch_size=batch)).fits(gpu)
    assert not estimate("Llama-3-8B", request.changed(batch_size=batch + 1)).fits(gpu)


def test_longest_context_fits_and_one_more_token_does_not() -> None:
    request = EstimateRequest(method="inference", batch_size=4)
    gpu = gpu_type("l40s")
    context = largest_fitting("Llama-3-8B", request, gpu, "seq_len")
    assert context is not None
    assert estimate("Llama-3-8B", request.changed(seq_len=context)).fits(gpu)
    assert not estimate("Llama-3-8B", request.changed(seq_len=context + 1)).fits(gpu)


def test_nothing_fits_gives_none_not_zero() -> None:
    assert largest_fitting("Llama-3.1-405B", EstimateRequest(), gpu_type("t4"), "batch_size") is None


def test_advice_summary_and_dict_agree() -> None:
    request = EstimateRequest(method="full", batch_size=2, seq_len=2048)
    advice = advise("Llama-3.2-1B", request, targets_from([parse_partition("gpu=gpu:v100:4")]))
    data = advice.as_dict()
    assert data["fits_somewhere"] == advice.fits_somewhere
    assert all(f"{c['peak_gib']:.1f} GiB" in advice.summary() for c in data["changes"])


# ----- a traced peak decides where the job fits as asked ------------------------------------------------------------

def test_a_traced_peak_places_the_job_as_asked_and_the_advice_says_so() -> None:
    from test_gpu_chart import traced_by_hand  # lazy: the hand-written traced estimate lives beside the chart tests

    traced = traced_by_hand()
    request = traced.request
    small = parse_gpu_type("small=7.5")
    formula = advise("Llama-3.2-1B", request, [Target(small, "gpu", 1)])
    assert not formula.fits_somewhere and not formula.traced  # the formula's 9.2 GiB does not fit in 7.5
    with_trace = advise("Llama-3.2-1B", request, [Target(small, "gpu", 1)], traced=traced)
    assert with_trace.fits_somewhere and with_trace.traced and with_trace.changes == ()
    assert with_trace.estimate.peak_gib == pytest.approx(traced.peak_gib)
    assert with_trace.placements[0].headroom_gib == pytest.approx(7.5 - traced.peak_gib)
    first = with_trace.summary().splitlines()[0]
    assert first == (f"Llama-3.2-1B: {traced.peak_gib:.1f} GiB per GPU as asked (traced on meta tensors; "
                     f"the formula estimate says {formula.estimate.peak_gib:.1f})")
    assert "(formula estimates)" in with_trace.summary()  # the largest batch and context are the formula's
    data = with_trace.as_dict()
    assert data["traced"] is True and data["formula_peak_gib"] == pytest.approx(formula.estimate.peak_gib, abs=1e-3)
    assert formula.as_dict()["traced"] is False


def test_a_trace_of_another_job_is_refused_in_one_line() -> None:
    from test_gpu_chart import traced_by_hand  # lazy: the hand-written traced estimate lives beside the chart tests

    traced = traced_by_hand()
    with pytest.raises(GpuEstimateError, match="the trace is of another job"):
        advise("Llama-3.2-1B", traced.request.changed(batch_size=4), [Target(gpu_type("h100"))], traced=traced)


@pytest.mark.skipif(not all(importlib.util.find_spec(name) for name in ("torch", "transformers", "peft")),
                    reason="the trace extra (torch, transformers, peft) is not installed")
def test_betty_gpu_advise_trace_places_the_job_by_its_real_trace(capsys: pytest.CaptureFixture[str]) -> None:
    job = ["--model", "Llama-3.2-1B", "--method", "lora", "--batch-size", "2", "--seq-len", "512"]
    code, out, err = betty_in_process(capsys, "gpu", "estimate", *job, "--trace", "--json")
    assert code == 0, err
    traced = json.loads(out)
    code, out, err = betty_in_process(capsys, "gpu", "advise", *job, "--gpu-types", "a100-40gb", "--trace", "--json")
    assert code == 0, err
    advice = json.loads(out)
    assert advice["traced"] is True
    assert advice["estimate"]["peak_gib"] == pytest.approx(traced["peak_gib"], abs=1e-3)
    assert advice["formula_peak_gib"] == pytest.approx(traced["formula"]["peak_gib"], abs=1e-3)
    assert advice["placements"][0]["headroom_gib"] == pytest.approx(40.0 - traced["peak_gib"], abs=1e-3)
    assert "betty: tracing: forward…" in err
