"""A traced estimate as plain data: the peak, what it is made of, where in the step it happens.

Nothing here imports torch, so a traced estimate can be shown, compared and stored by
code that never runs a trace.

What the trace cannot see is added as explicit terms, each documented in ``docs/gpu.md``:

* the caching allocator's rounding and segments (:mod:`.allocator`, replayed over the
  traced allocations): *reserved* beside *allocated*;
* the CUDA context and library workspaces, which no tensor owns: :data:`CUDA_CONTEXT_GIB`
  (the ``hf`` profile's figure, the same as the formula estimate's) plus the cuBLAS
  workspace PyTorch keeps per stream (:data:`CUBLAS_WORKSPACE_MIB`, PyTorch's default of
  ``4096 KiB × 2 + 16 KiB × 8`` before Hopper; 32 MiB on Hopper and later).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..estimate import GIB, Estimate
from ..frameworks import framework_profile
from ..request import EstimateRequest

CUBLAS_WORKSPACE_MIB = {"before-hopper": 8.125, "hopper": 32.0}
CUDA_CONTEXT_GIB = framework_profile("hf").cuda_context_gib
TRACE_ITEMS = ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "quantization")


@dataclass(frozen=True)
class TracePoint:
    """One moment of the step: its index, phase and the live bytes by item."""

    index: int
    phase: str
    live: dict[str, int]


@dataclass(frozen=True)
class TracedEstimate:
    """Peak GPU memory of one step as the trace measured it, with the terms it cannot see added."""

    model: str
    request: EstimateRequest
    params: int
    trainable_params: int
    peak: dict[str, int]
    """Live bytes by item (:data:`TRACE_ITEMS`) at the moment the most bytes live."""
    peak_phase: str
    peak_op: str
    peak_module: str
    allocated_bytes: int
    """The allocator's peak of blocks in use (rounded sizes): ``torch.cuda.max_memory_allocated()``."""
    reserved_bytes: int
    """The allocator's peak of segments: ``torch.cuda.max_memory_reserved()``."""
    runtime_bytes: int
    """CUDA context and cuBLAS workspace: memory no tensor owns."""
    phases: dict[str, dict[str, int]] = field(default_factory=dict)
    """Live bytes by item at the end of each phase."""
    timeline: tuple[TracePoint, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def traced_bytes(self) -> int:
        """The bytes of tensors alive at the peak, as the trace counted them (unrounded)."""
        return sum(self.peak.values())

    @property
    def peak_gib(self) -> float:
        """What the GPU must hold at the peak: reserved memory plus CUDA context and workspace."""
        return (self.reserved_bytes + self.runtime_bytes) / GIB

    @property
    def where(self) -> str:
        """Where in the step the peak happens, in words."""
        phase = self.peak_phase.replace("_", " ")
        module = f" in {self.peak_module}" if self.peak_module else ""
        return f"{phase}{module}, at {self.peak_op}" if self.peak_op else f"{phase}{module}"

    def breakdown_gib(self) -> dict[str, float]:
        """GiB by item at the peak, the allocator's share and the runtime last (they add up to :attr:`peak_gib`)."""
        parts = {name: self.peak.get(name, 0) / GIB for name in TRACE_ITEMS}
        parts["allocator"] = (self.reserved_bytes - self.traced_bytes) / GIB
        parts["runtime"] = self.runtime_bytes / GIB
        return parts

    def as_dict(self, formula: Estimate | None = None) -> dict[str, Any]:
        """A JSON-ready summary, with the formula estimate's peak and breakdown beside it when given."""
        result: dict[str, Any] = {
            "model": self.model, "method": self.request.method, "precision": self.request.resolved_precision,
            "params": self.params, "trainable_params": self.trainable_params,
            "peak_gib": round(self.peak_gib, 3),
            "allocated_gib": round(self.allocated_bytes / GIB, 3),
            "reserved_gib": round(self.reserved_bytes / GIB, 3),
            "breakdown": {name: round(value, 3) for name, value in self.breakdown_gib().items()},
            "peak_phase": self.peak_phase, "peak_op": self.peak_op, "peak_module": self.peak_module,
            "notes": list(self.notes),
        }
        if formula is not None:
            result["formula"] = {"peak_gib": round(formula.peak_gib, 3),
                                 "breakdown": {name: round(value, 3) for name, value in formula.breakdown.items()}}
        return result


def runtime_bytes(hopper: bool = False) -> int:
    """CUDA context plus the cuBLAS workspace of one stream, per GPU."""
    workspace = CUBLAS_WORKSPACE_MIB["hopper" if hopper else "before-hopper"] * 1024**2
    return int(CUDA_CONTEXT_GIB * GIB + workspace)
