"""The notebook's GPU calculator: its controls and the estimate they give."""

from __future__ import annotations

from betty_jupyter.notebook.widgets.gpu import GpuCalculator


def test_the_calculator_checkpoints_every_nth_layer_only_with_layer_checkpointing() -> None:
    calculator = GpuCalculator("Llama-3.1-8B", "full", batch_size=4, seq_len=4096)
    assert calculator.ckpt_every.disabled and calculator.request().ckpt_every == 2
    calculator.grad_ckpt.value = "layer"
    assert not calculator.ckpt_every.disabled
    every_second = calculator.estimate.peak_gib
    calculator.ckpt_every.value = 1  # every layer checkpointed: less kept for the backward pass
    assert calculator.request().ckpt_every == 1 and calculator.estimate.peak_gib < every_second
    calculator.ckpt_every.value = 8
    assert calculator.estimate.peak_gib > every_second
    assert "ckpt every 8" in calculator.record().text
    calculator.grad_ckpt.value = "full"
    assert calculator.ckpt_every.disabled and calculator.request().ckpt_every == 2
