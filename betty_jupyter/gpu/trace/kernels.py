"""What a GPU's kernels would do that the ``meta`` device does not: flash attention and autocast.

*Flash attention.* On ``meta`` (and on the CPU), ``scaled_dot_product_attention`` falls
back to its math path, which materialises the ``seq × seq`` score matrix for every head.
On a GPU with ``attn_implementation="flash_attention_2"`` or SDPA's flash kernel, no such
matrix exists. :func:`flash_attention` stands in for the kernel with the same memory
(Dao 2023, "FlashAttention-2", and ``flash_attn_func``'s own allocations): the forward
keeps the output ``(batch, seq, heads, value head_dim)`` and a float32 log-sum-exp
``(batch, heads, seq)`` beside the saved query, key and value; the backward allocates the
three input gradients, a float32 ``dq`` accumulator and a float32 softmax-delta. Key and
value heads are not repeated to the query heads (the kernel handles grouped-query
attention itself). The numbers it returns are zeros: only their sizes matter here.

*Selective checkpointing* (Korthikanti et al. 2022, §5): only the attention core — scores,
softmax and their product with the values — is recomputed in backward; :func:`register_selective`
wraps a transformers attention function in non-reentrant checkpointing, which keeps its
inputs (query, key, value) and nothing it makes.

*Autocast.* ``torch.autocast`` has no ``meta`` device type, so :class:`MetaAutocast`
does what CUDA autocast does to memory: the inputs of matrix products are cast to the
half-precision type (a weight's cast is made once per forward and kept, as autocast's
cast cache does), everything else runs in the dtype it gets.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils.checkpoint import checkpoint

from .memory import mark_weight_copy

FLASH = "betty_fused"  # not "flash…": transformers would look for the flash-attn package


class _FlashAttention(torch.autograd.Function):
    """Flash attention's memory with zeros for values: see the module docstring."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        batch, heads, seq, _ = query.shape
        output = query.new_zeros((batch, seq, heads, value.shape[-1]))  # values may be narrower (DeepSeek's MLA)
        log_sum_exp = query.new_zeros((batch, heads, seq), dtype=torch.float32)
        ctx.save_for_backward(query, key, value, output, log_sum_exp)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        query, key, value, output, log_sum_exp = ctx.saved_tensors
        softmax_delta = torch.zeros_like(log_sum_exp)
        dq_accumulator = torch.zeros_like(query, dtype=torch.float32)
        grads = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
        del softmax_delta, dq_accumulator  # freed when the kernel returns, after the gradients exist
        return grads


def flash_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, **_kwargs: Any) -> tuple[torch.Tensor, None]:
    """A transformers attention function with flash attention's memory (the causal mask is implicit)."""
    output: torch.Tensor = _FlashAttention.apply(query, key, value)
    return output, None


def register_flash_attention() -> None:
    """Make ``attn_implementation="betty_fused"`` known to transformers (and build no mask for it)."""
    # lazy: transformers is only needed once a model is built
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    AttentionInterface.register(FLASH, flash_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(FLASH, flash_attention_mask)


SELECTIVE = "betty_selective_{}"


def register_selective(base: str, context_fn: Callable[[], Any] | None) -> str:
    """Register the attention of implementation ``base`` recomputed in backward; the new implementation's name.

    ``context_fn`` gives checkpointing's (forward, recompute) contexts (the recompute runs under autocast too).
    """
    # lazy: transformers is only needed once a model is built
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask
    from transformers.models.llama.modeling_llama import eager_attention_forward

    attention = flash_attention if base == FLASH else eager_attention_forward
    options: dict[str, Any] = {"use_reentrant": False}
    if context_fn is not None:
        options["context_fn"] = context_fn

    def recomputed(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, **kwargs: Any) -> Any:
        return checkpoint(attention, module, query, key, value, attention_mask, **options, **kwargs)

    name = SELECTIVE.format(base)
    AttentionInterface.register(name, recomputed)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, flash_attention_mask if base == FLASH
                                          else ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    return name


def autocast_running() -> bool:
    """Whether :class:`MetaAutocast` runs now: what ``torch.is_autocast_enabled()`` says on a GPU under autocast."""
    return any(isinstance(mode, MetaAutocast) for mode in _get_current_function_mode_stack())


_MATMULS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm,
            torch.bmm, torch.Tensor.bmm, torch.addmm, torch.baddbmm}


class MetaAutocast(TorchFunctionMode):
    """CUDA autocast's casts, on any device: float32 inputs of matrix products become ``dtype``."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self._weights: dict[int, torch.Tensor] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _MATMULS:
            args = tuple(self._cast(arg) for arg in args)
            kwargs = {name: self._cast(arg) for name, arg in kwargs.items()}
        return func(*args, **kwargs)

    def __exit__(self, *exc: Any) -> None:
        self._weights.clear()  # autocast drops its cast cache when its region ends
        super().__exit__(*exc)

    def _cast(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
            return value
        if value.is_leaf and value.requires_grad:
            if id(value) not in self._weights:
                self._weights[id(value)] = value.to(self.dtype)
                mark_weight_copy(self._weights[id(value)])
            return self._weights[id(value)]
        return value.to(self.dtype)
