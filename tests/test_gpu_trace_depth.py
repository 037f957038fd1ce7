"""A model deeper than the trace runs is traced at two small depths and extended in a straight line.

A trace of 2,000 layers once held the one trace slot for minutes; now any depth costs two
small traces. The extension is checked against full traces of real catalog models.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import betty_in_process

from betty_jupyter.gpu import EstimateRequest
from betty_jupyter.gpu.architecture import LARGEST_FIELD, load_config
from betty_jupyter.gpu.model_catalog import resolve_model
from betty_jupyter.gpu.trace import MAX_LAYERS, trace_estimate
from betty_jupyter.gpu.trace.extended import DEEP, SHALLOW, at_depth, extended

HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
pytestmark = pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers, peft) is not installed")

LLAMA = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
         "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256}


@pytest.mark.parametrize("name, method", [
    ("Qwen2.5-7B", "full"), ("Qwen2.5-7B", "lora"), ("gemma-2-9b", "inference"), ("gemma-2-9b", "qlora"),
    ("Llama-3.1-70B", "lora"),
])
def test_the_extension_agrees_with_a_full_trace(name: str, method: str) -> None:
    from betty_jupyter.gpu.trace.run import run_trace  # lazy: torch

    arch = resolve_model(name)
    request = EstimateRequest(method=method, batch_size=1, seq_len=1024).checked()
    exact = run_trace(arch, request)
    shallow, deep = (run_trace(at_depth(arch, layers), request) for layers in (SHALLOW, DEEP))
    guess = extended(shallow, deep, arch)
    assert guess.params == exact.params and guess.trainable_params == exact.trainable_params
    assert guess.peak_phase == exact.peak_phase
    assert arch.layers > DEEP and guess.peak == exact.peak  # the bytes alive at the peak, item by item
    assert abs(guess.peak_gib / exact.peak_gib - 1) < 0.02, (guess.peak_gib, exact.peak_gib)  # the allocator's
    assert any("identical layers" in note for note in guess.notes)


@pytest.mark.parametrize("layers", [MAX_LAYERS + 1, 2000, 100_000])
def test_a_model_of_thousands_of_layers_is_traced_at_once_through_the_cli(tmp_path: Path, capsys: Any,
                                                                         layers: int) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "num_hidden_layers": layers}))
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(tmp_path / "config.json"),
                                      "--method", "lora", "--trace", "--json")
    assert code == 0, err
    traced = json.loads(out)
    assert any(f"{SHALLOW} and {DEEP} of its {layers:,} identical layers" in note for note in traced["notes"])
    assert traced["params"] == load_config(tmp_path / "config.json").params()  # every layer counted
    assert traced["peak_gib"] > traced["formula"]["breakdown"]["weights"]


def test_more_layers_never_cost_less_and_the_largest_depth_still_answers() -> None:
    request = EstimateRequest(method="lora", batch_size=1, seq_len=512)
    arch = resolve_model(LLAMA | {"num_hidden_layers": 300})
    deeper = trace_estimate(at_depth(arch, 600).with_name("deeper"), request)
    shallower = trace_estimate(arch, request)
    assert deeper.peak_gib > shallower.peak_gib and deeper.params > shallower.params
    widest = trace_estimate(resolve_model(LLAMA | {"num_hidden_layers": LARGEST_FIELD}), request)
    assert widest.peak_gib > deeper.peak_gib
