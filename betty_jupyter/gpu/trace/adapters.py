"""peft's LoRA layer over a quantized layer, as ``peft.tuners.lora.bnb`` builds it for bitsandbytes.

peft wraps a bitsandbytes layer in its own LoRA layer (``lora.bnb.Linear4bit`` /
``Linear8bitLt``), which differs from the plain one in two ways that change memory:

* under autocast it does not cast the input to the adapters' float32 (``requires_conversion
  = not torch.is_autocast_enabled()``), so the adapter reads the same input storage the
  frozen layer reads instead of a copy;
* for a 4-bit layer it clones the frozen layer's output before adding the adapter's
  ("defensively", as peft's comment says, after Tim Dettmers).

:class:`QuantizedLoraLinear` is that layer for :class:`~.quantized.QuantizedLinear`
(plain LoRA, one adapter: what the trace builds).
"""

from __future__ import annotations

from typing import Any

import torch
from peft.tuners.lora.layer import Linear

from .kernels import autocast_running
from .quantized import QuantizedLinear


class QuantizedLoraLinear(Linear):
    """peft's ``lora.bnb`` forward over a :class:`QuantizedLinear` (see the module docstring)."""

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        """The frozen quantized layer's output (cloned for nf4) plus every active adapter's."""
        base: Any = self.get_base_layer()
        result: torch.Tensor = self.base_layer(x, *args, **kwargs)
        if isinstance(base, QuantizedLinear) and base.precision == "nf4":
            result = result.clone()
        for name in self.active_adapters:
            if name not in self.lora_A.keys():
                continue
            lora_a: Any = self.lora_A[name]
            lora_b: Any = self.lora_B[name]
            converts = not autocast_running()
            adapter_input = self._cast_input_dtype(x, lora_a.weight.dtype) if converts else x
            output = lora_b(lora_a(self.lora_dropout[name](adapter_input))) * self.scaling[name]
            result = result + (output.to(result.dtype) if converts else output)
        return result
