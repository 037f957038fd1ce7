"""Frozen weights stored as bitsandbytes stores them (nf4, int8), and the memory of its matmuls.

With ``--method qlora`` (nf4) or ``--precision int8``, the Hugging Face stack replaces every
linear layer of the transformer layers by a bitsandbytes one (``Linear4bit`` /
``Linear8bitLt``); embeddings, norms and the output layer (``lm_head`` is skipped) stay in
the compute dtype. :func:`quantize_layers` does the same with :class:`QuantizedLinear`,
which holds exactly the storage bitsandbytes holds and whose matmul allocates what
bitsandbytes' allocates (read off bitsandbytes 0.50, ``autograd/_functions.py`` and
``backends/default/ops.py``):

* **nf4** (``Params4bit``, Dettmers et al. 2023, *QLoRA* §3): the weight packed two per
  byte (``uint8``, numel / 2), one absmax per block of 64 weights and the 16-entry NF4 code
  (float32). Double quantization stores the absmax in 8 bits, plus a float32 absmax per 256
  blocks, a float32 offset, and the 256-entry dynamic map every matrix shares.
  ``MatMul4Bit`` dequantizes the absmax (float32, one per block) and then the whole matrix
  to the compute dtype, multiplies and frees it; it saves no input and no dequantized
  matrix for backward (since 0.43.2), and dequantizes again in backward for the input's
  gradient. A single token without gradient (decoding) takes the fused ``gemv_4bit``
  kernel, which dequantizes nothing.
* **int8** (``Int8Params``, Dettmers et al. 2022, *LLM.int8()*): the int8 weight and one
  float32 scale per output row. ``MatMul8bitLt`` casts its input to float16, quantizes it
  (int8 plus a float32 scale per row) and multiplies into the output; it *keeps its input*
  for backward whenever the input needs a gradient, and in backward dequantizes the weight
  to the input's dtype. Outlier columns (threshold 6.0) depend on the values, which
  ``meta`` has none of: none are assumed (:data:`NO_OUTLIERS`).

bitsandbytes itself is not used: its operations run on ``meta`` through their fake
kernels, but those allocate only the output, so the dequantized matrix the real kernel
makes would be missing from the trace.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
import torch.nn.functional as F

from .memory import tag_storage

NF4_BLOCK = 64  # weights per absmax (bitsandbytes' default blocksize for 4-bit)
NESTED_BLOCK = 256  # absmax values per float32 absmax under double quantization
NF4_CODE = 16  # NF4's 16 levels, float32, one table per matrix
DYNAMIC_MAP = 256  # the 8-bit dynamic map double quantization uses, one table for the whole model
LAYER_MODULES = ("layers", "h", "blocks")  # the containers of transformer layers in transformers' models
NO_OUTLIERS = (
    "int8 matmuls are counted without outlier columns (LLM.int8's threshold 6.0 picks them by value, which "
    "meta tensors do not have); each outlier column would add a few bytes per token"
)
FUSED_SMALL_BATCH = (
    "nf4 matmuls are counted as dequantize-then-multiply, bitsandbytes' path for many tokens; its fused kernel "
    "for a few tokens dequantizes nothing, so there the trace may count one matrix too many"
)


def _blocks(count: int, size: int) -> int:
    return -(-count // size)


class QuantizedLinear(torch.nn.Linear):
    """A frozen linear layer with bitsandbytes' storage and matmul memory (see the module docstring).

    A subclass of ``torch.nn.Linear`` so that peft puts its LoRA adapters on it as on any linear layer.
    """

    def __init__(self, linear: torch.nn.Linear, precision: str, double_quant: bool,
                 dynamic_map: torch.Tensor | None) -> None:
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.precision = precision
        self.compute_dtype = linear.weight.dtype
        weight = linear.weight
        numel = weight.numel()
        if precision == "nf4":
            stored = torch.empty((_blocks(numel, 2), 1), dtype=torch.uint8, device=weight.device)
            blocks = _blocks(numel, NF4_BLOCK)
            self.register_buffer("code", torch.empty(NF4_CODE, device=weight.device))
            if double_quant:
                self.register_buffer("absmax", torch.empty(blocks, dtype=torch.uint8, device=weight.device))
                self.register_buffer("nested_absmax", torch.empty(_blocks(blocks, NESTED_BLOCK), device=weight.device))
                self.register_buffer("offset", torch.empty((), device=weight.device))
                self.register_buffer("dynamic_map", dynamic_map)
            else:
                self.register_buffer("absmax", torch.empty(blocks, device=weight.device))
        else:
            stored = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
            self.register_buffer("row_scales", torch.empty(self.out_features, device=weight.device))
        self.weight = torch.nn.Parameter(stored, requires_grad=False)
        self.bias = linear.bias
        if self.bias is not None:
            self.bias.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The bitsandbytes matmul of this layer's precision."""
        matmul = _Matmul4bit if self.precision == "nf4" else _Matmul8bit
        result: torch.Tensor = matmul.apply(x, self)
        return result

    def constants(self) -> Iterator[torch.Tensor]:
        """The quantization constants: absmax, codes, scales (everything stored but the weight itself)."""
        return iter(self.buffers())

    def dequantized(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The whole weight in ``dtype`` as bitsandbytes makes it for a matmul, and the float32 absmax it made first.

        The caller keeps both until its product exists, as bitsandbytes' kernel does. Zeros: only sizes matter.
        """
        device = self.weight.device
        constants = dict(self.named_buffers())
        if self.precision == "nf4":
            absmax = None
            if "nested_absmax" in constants:
                absmax = torch.zeros(constants["absmax"].shape, dtype=torch.float32, device=device) + constants["offset"]
            weight = torch.zeros((self.out_features, self.in_features), dtype=dtype, device=device)
        else:
            absmax = constants["row_scales"].unsqueeze(1).mul(1.0 / 127.0)
            weight = self.weight.to(dtype, copy=True).mul_(absmax)
        tag_storage(weight, "quantization")
        return weight, absmax


class _Matmul4bit(torch.autograd.Function):
    """``MatMul4Bit``: dequantize, multiply, free; nothing saved but the layer; dequantize again in backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        ctx.layer = layer
        if x.numel() == x.shape[-1] and not x.requires_grad:  # one token: fused gemv_4bit
            return x.new_zeros((*x.shape[:-1], layer.out_features))
        weight, _absmax = layer.dequantized(x.dtype)
        return F.linear(x, weight, layer.bias)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        weight, _absmax = ctx.layer.dequantized(grad_output.dtype)
        return torch.matmul(grad_output, weight), None


class _Matmul8bit(torch.autograd.Function):
    """``MatMul8bitLt``: float16 input quantized to int8, int8 product scaled into the output; keeps its input."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        half = rows.to(torch.float16)
        quantized = torch.zeros(rows.shape, dtype=torch.int8, device=rows.device)
        row_scales = torch.zeros(rows.shape[0], dtype=torch.float32, device=rows.device)
        del half  # the float16 copy goes once it is quantized
        product = torch.zeros((rows.shape[0], layer.out_features), dtype=torch.int32, device=rows.device)
        output = torch.zeros((rows.shape[0], layer.out_features), dtype=x.dtype, device=rows.device)
        if layer.bias is not None:
            output += layer.bias
        del quantized, row_scales, product
        ctx.layer = layer
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(rows)
        return output.reshape(*x.shape[:-1], layer.out_features)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        (rows,) = ctx.saved_tensors
        weight, _scales = ctx.layer.dequantized(rows.dtype)
        grad_rows = grad_output.reshape(-1, grad_output.shape[-1]).to(rows.dtype)
        return torch.matmul(grad_rows, weight).view(*grad_output.shape[:-1], rows.shape[-1]), None


def quantization_notes(precision: str) -> list[str]:
    """What the trace assumes about ``precision``'s bitsandbytes matmuls, for the estimate's notes."""
    if precision == "nf4":
        return ["nf4 weights stored and multiplied as bitsandbytes does (dequantized one matrix at a time, "
                "again in backward; nothing saved)", FUSED_SMALL_BATCH]
    if precision == "int8":
        return ["int8 weights stored and multiplied as bitsandbytes' LLM.int8 does (the input is kept for backward, "
                "the weight dequantized there)", NO_OUTLIERS]
    return []


def quantize_layers(model: torch.nn.Module, precision: str, double_quant: bool) -> int:
    """Replace the linear layers inside the transformer layers by :class:`QuantizedLinear`; how many were replaced."""
    layers = next((module for name, module in model.named_modules()
                   if name.split(".")[-1] in LAYER_MODULES and isinstance(module, torch.nn.ModuleList)), None)
    if layers is None:
        return 0
    device = next(model.parameters()).device
    shared = torch.empty(DYNAMIC_MAP, device=device) if precision == "nf4" and double_quant else None
    replaced = 0
    for parent in list(layers.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, QuantizedLinear(child, precision, double_quant, shared))
                replaced += 1
    return replaced


def weight_count(model: torch.nn.Module) -> int:
    """The model's parameters, a quantized weight counted once per weight rather than per stored element."""
    packed = sum(module.in_features * module.out_features - module.weight.numel()
                 for module in model.modules() if isinstance(module, QuantizedLinear))
    return int(sum(parameter.numel() for parameter in model.parameters()) + packed)


def quantization_constants(model: torch.nn.Module) -> Iterator[torch.Tensor]:
    """Every quantization constant of ``model``'s quantized layers (a shared table once)."""
    seen: set[int] = set()
    for module in model.modules():
        if isinstance(module, QuantizedLinear):
            for constant in module.constants():
                if id(constant) not in seen:
                    seen.add(id(constant))
                    yield constant
