"""The traced estimate: the job's real step run on ``meta`` tensors, its memory counted as it runs.

::

    from betty_jupyter.gpu import EstimateRequest
    from betty_jupyter.gpu.trace import trace_estimate

    traced = trace_estimate("Llama-3.1-8B", EstimateRequest(method="lora", batch_size=2, seq_len=2048))
    traced.peak_gib, traced.breakdown_gib(), traced.where

The model is built by its own transformers class from its config.json (a catalog model from
its published shape), on the ``meta`` device: no weights, no GPU, no download. The step (forward, loss, backward,
optimizer step; or prefill and decode) runs for real under :class:`.memory.MemoryTracer`,
and PyTorch's caching allocator is replayed over what it allocated and freed.

PyTorch, transformers and peft are the optional ``trace`` extra; PyTorch's CPU build is
all a trace needs (:data:`EXTRA` says how to install it instead of the CUDA build, which is
gigabytes). This module imports none of them until a trace runs, and :func:`trace_estimate`
says in one line how to install them when they are missing (:class:`TraceUnavailableError`).
Loading them is most of the first trace in a process (10–20 s); the progress says so.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ...errors import GpuEstimateError
from ..architecture import Architecture
from ..model_catalog import resolve_model
from ..hardware import GpuType
from ..request import EstimateRequest, attention_that_runs
from .extended import at_depth, depths_for, extended
from .refusals import check_traceable
from .result import TracedEstimate, TracePoint

CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
"""PyTorch's CPU build: all a trace needs (it runs on ``meta`` tensors), a fraction of the CUDA build's gigabytes."""
EXTRA = (f"the traced estimate needs PyTorch, transformers and peft; PyTorch's CPU build is all it needs: {CPU_TORCH}, "
         "then pip install 'betty-jupyter[trace]'")
LOADING = "loading PyTorch, transformers and peft (the first trace in a process spends 10–20 s here)"
"""The first phase a trace tells, while its packages load: most of the first trace's time."""
_EXTRA_MODULES = ("torch", "transformers", "peft")
_HOPPER_AND_LATER = ("H100", "H200", "GH200", "B100", "B200")
MAX_LAYERS = 256
"""The most layers a trace builds and runs (Llama 3.1 405B has 126): one costs about a tenth of a second of CPU.
A deeper model is traced at two small depths and extended (:mod:`.extended`)."""
MAX_EXPERTS = 512
"""The most experts per layer a trace builds (the largest published mixtures have 256)."""

__all__ = ["CPU_TORCH", "EXTRA", "LOADING", "TraceUnavailableError", "TracePoint", "TracedEstimate", "trace_estimate"]


class TraceUnavailableError(GpuEstimateError):
    """The trace's optional packages (the ``trace`` extra) are not installed."""


def _extra_installed() -> bool:
    """Whether torch, transformers and peft can be found (nothing is imported)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _EXTRA_MODULES)
    except (ImportError, ValueError):
        return False


def check_size(arch: Architecture) -> None:
    """Refuse in one line a model the trace would take minutes to build and run (the formula estimate covers it)."""
    if arch.experts > MAX_EXPERTS:
        raise GpuEstimateError(f"{arch.name} has {arch.experts:,} experts per layer; the trace builds at most "
                               f"{MAX_EXPERTS}; drop --trace for the formula estimate")


def trace_estimate(model: str | Path | Mapping[str, Any] | Architecture, request: EstimateRequest,
                   gpu: GpuType | None = None, progress: Callable[[str], None] = lambda _: None) -> TracedEstimate:
    """Trace one step of ``model`` run as ``request``; ``gpu`` picks the runtime term (Hopper's larger workspace).

    ``progress`` is told each phase as it starts (a trace takes seconds; the first in a process also loads
    PyTorch, :data:`LOADING`).
    """
    arch = resolve_model(model)
    request = request.checked()
    check_size(arch)
    check_traceable(arch, request)  # before PyTorch loads: a refusal is the only line a refused trace prints
    if f"{__name__}.run" not in sys.modules and _extra_installed():
        progress(LOADING)
    try:
        from .run import run_trace  # lazy: torch, transformers and peft are the optional trace extra
    except ImportError as error:
        if (error.name or "").split(".")[0] in _EXTRA_MODULES:
            raise TraceUnavailableError(EXTRA) from error
        raise
    hopper = gpu is not None and gpu.name.startswith(_HOPPER_AND_LATER)
    runs, note = attention_that_runs(arch, request)
    depths = depths_for(arch, MAX_LAYERS)
    if depths is None:
        traced = run_trace(arch, runs, hopper=hopper, progress=progress)
    else:
        shallow, deep = (run_trace(at_depth(arch, layers), runs, hopper=hopper, progress=progress)
                         for layers in depths)
        traced = extended(shallow, deep, arch, depths)
    if runs is request:
        return traced
    return replace(traced, request=request, notes=(*traced.notes, note))
