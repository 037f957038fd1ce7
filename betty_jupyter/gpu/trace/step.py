"""One real step of the job, run under the memory tracer: what the trace measures.

Training runs one micro-batch of a step after the first, as a Hugging Face training loop does
(the optimizer's states already exist: they are made in a :data:`SETUP` phase by a step on
zero gradients, which the peak leaves out): forward with
labels (the model's own loss: logits upcast to float32, shifted, cross-entropy), backward,
the optimizer step (``torch.optim.AdamW`` with ``foreach=True``, what it picks on a GPU;
or SGD with momentum), then ``zero_grad(set_to_none=True)``. Inference reads a prompt
(prefill, logits for the last token only, as ``generate`` asks) and generates
:data:`DECODE_STEPS` tokens with the KV cache, so that prompt and generated tokens fill
``seq_len``.

Input tokens are zeros: no operation on the way depends on the values of token ids
(documented assumption; an operation that did would fail on ``meta`` rather than guess).
"""

from __future__ import annotations

import inspect
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

from ..activations import LOSS_CHUNKS
from ..request import EstimateRequest
from .kernels import MetaAutocast
from .memory import MemoryTracer, Tag, module_names
from .model import Precision, quiet_deprecations
from .quantized import quantization_constants

DECODE_STEPS = 2
SETUP = "setup"  # what exists before the traced step starts; not a candidate for the peak
LOGITS_MODULE = "lm_head"

Progress = Callable[[str], None]


def trace_step(model: torch.nn.Module, request: EstimateRequest, tracer: MemoryTracer,
               progress: Progress = lambda _: None) -> dict[str, dict[str, int]]:
    """Run ``request``'s step on ``model`` under ``tracer``; the live bytes by tag at the end of each phase."""
    tracer.logits_modules = _logits_modules(model)
    remove_hooks = module_names(model, tracer)
    try:
        with tracer, quiet_deprecations():
            for parameter in model.parameters():
                tracer.retag(parameter, "weights")
            for buffer in model.buffers():
                tracer.retag(buffer, "weights")
            for constant in quantization_constants(model):
                tracer.retag(constant, "quantization")
            if request.training:
                return _training(model, request, tracer, progress)
            return _inference(model, request, tracer, progress)
    finally:
        for remove in remove_hooks:
            remove()


def _logits_modules(model: torch.nn.Module) -> frozenset[str]:
    """The output layer and the modules around it, whose own work after the layers is the logits and the loss."""
    head = next((name for name, _ in model.named_modules() if name.split(".")[-1] == LOGITS_MODULE), "")
    parts = head.split(".")
    return frozenset({".".join(parts[:end]) or type(model).__name__ for end in range(len(parts) + 1)})


@contextmanager
def _phase(tracer: MemoryTracer, name: str, progress: Progress, snapshots: dict[str, dict[str, int]]) -> Iterator[None]:
    progress("optimizer states" if name == SETUP else name.replace("_", " "))
    tracer.phase = name
    tracer.modules.clear()  # a checkpointed layer's recomputation stops early, before its forward hooks finish
    tracer.default_tag = "optimizer" if name == "optimizer_step" else "activations"  # the step's temporaries too
    yield
    snapshots[name] = tracer.live_by_tag()


def _training(model: torch.nn.Module, request: EstimateRequest, tracer: MemoryTracer,
              progress: Progress) -> dict[str, dict[str, int]]:
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = _optimizer(request, trainable)
    for parameter in trainable:
        parameter.register_post_accumulate_grad_hook(
            lambda p: tracer.retag(p.grad, "gradients"))
    snapshots: dict[str, dict[str, int]] = {}
    device = next(model.parameters()).device
    precision = Precision.of(request)
    with _phase(tracer, SETUP, progress, snapshots):
        tracer.default_tag = "optimizer"
        for parameter in trainable:
            parameter.grad = torch.zeros_like(parameter)
            tracer.retag(parameter.grad, "gradients")
        optimizer.step()
        if request.grad_accum == 1:
            optimizer.zero_grad(set_to_none=True)
        # else the gradients stay, as the micro-batches before the last one of a step leave them
    with _phase(tracer, "forward", progress, snapshots):
        tokens = torch.zeros((request.batch_size, request.seq_len), dtype=torch.long, device=device)
        with _autocast(precision):
            loss = _chunked_loss(model, tokens, tracer) if request.chunked_loss else _loss(model, tokens, tracer)
        if request.grad_accum > 1:
            loss = loss / request.grad_accum
    with _phase(tracer, "backward", progress, snapshots):
        loss.backward()
        del loss
    with _phase(tracer, "optimizer_step", progress, snapshots):
        optimizer.step()
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    tracer.retag(value, "optimizer")
    optimizer.zero_grad(set_to_none=True)
    return snapshots


def _loss(model: torch.nn.Module, tokens: torch.Tensor, tracer: MemoryTracer) -> torch.Tensor:
    """The model's own loss (transformers' ``ForCausalLMLoss``: the logits upcast to float32, cross-entropy)."""
    output = model(input_ids=tokens, labels=tokens)
    tracer.retag(output.logits, "logits")
    loss: torch.Tensor = output.loss
    return loss


def _chunked_loss(model: torch.nn.Module, tokens: torch.Tensor, tracer: MemoryTracer) -> torch.Tensor:
    """torchtune's ``CEWithChunkedOutputLoss``: the output layer and the float32 cross-entropy one chunk at a time.

    The model returns its last hidden states; they are split into :data:`LOSS_CHUNKS` chunks of tokens, and
    each chunk goes through the output layer, is upcast and scored on its own, so only one chunk's float32
    logits are made at once and backward takes the chunks' gradients one at a time.
    """
    causal_lm: Any = model  # transformers' (or peft's) model: its decoder and output layer are typed loosely
    hidden = causal_lm.get_decoder()(input_ids=tokens).last_hidden_state
    head = causal_lm.get_output_embeddings()
    default, tracer.default_tag = tracer.default_tag, "logits"
    total = hidden.new_zeros((), dtype=torch.float32)
    for chunk, labels in zip(hidden.tensor_split(LOSS_CHUNKS, dim=1), tokens.tensor_split(LOSS_CHUNKS, dim=1)):
        logits = head(chunk)
        total = total + F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="sum")
    tracer.default_tag = default
    loss: torch.Tensor = total / tokens.numel()
    return loss


def _autocast(precision: Precision) -> ExitStack:
    stack = ExitStack()
    if precision.autocast is not None:
        stack.enter_context(MetaAutocast(precision.autocast))
    return stack


def _optimizer(request: EstimateRequest, trainable: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    if request.optimizer == "sgd":
        return torch.optim.SGD(trainable, lr=1e-4, momentum=0.9, foreach=True)
    return torch.optim.AdamW(trainable, lr=1e-4, foreach=True)


def _inference(model: torch.nn.Module, request: EstimateRequest, tracer: MemoryTracer,
               progress: Progress) -> dict[str, dict[str, int]]:
    snapshots: dict[str, dict[str, int]] = {}
    device = next(model.parameters()).device
    prompt = max(1, request.seq_len - DECODE_STEPS)
    with torch.no_grad():
        with _phase(tracer, "prefill", progress, snapshots):
            tokens = torch.zeros((request.batch_size, prompt), dtype=torch.long, device=device)
            output = model(input_ids=tokens, use_cache=True, logits_to_keep=1)
            cache = cache_of(output)
            _retag_cache(tracer, cache)
            del output
        with _phase(tracer, "decode", progress, snapshots):
            for _ in range(request.seq_len - prompt):
                tokens = torch.zeros((request.batch_size, 1), dtype=torch.long, device=device)
                output = model(input_ids=tokens, use_cache=True, **{cache_argument(model): cache})
                _retag_cache(tracer, cache)
                del output
    return snapshots


def cache_argument(model: torch.nn.Module) -> str:
    """The name the model's forward takes the KV cache under (``cache`` since transformers 5.x)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def cache_of(output: object) -> object:
    """The KV cache a forward with ``use_cache=True`` returned (``cache`` since transformers 5.x)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values")


def _retag_cache(tracer: MemoryTracer, cache: object) -> None:
    tag: Tag = "kv_cache"
    for layer in getattr(cache, "layers", ()):
        tracer.retag(getattr(layer, "keys", None), tag)
        tracer.retag(getattr(layer, "values", None), tag)
