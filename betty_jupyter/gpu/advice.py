"""Advice: where a job fits on the cluster, and what to change when it fits nowhere.

Partitions come in as plain data (:class:`~betty_jupyter.gpu.hardware.Partition`, from
``sinfo`` GRES strings) so this module never talks to Slurm. Changes are tried from the
cheapest to the dearest, in this order, which the docs explain:

1. changes that leave the result of training untouched: activation checkpointing, a
   smaller micro-batch with gradient accumulation (same effective batch, slower);
2. cheap approximations: 8-bit AdamW, an 8-bit KV cache;
3. more hardware: more GPUs with FSDP (or tensor parallelism for inference), CPU offload;
4. changes to what is trained or served: LoRA instead of full fine-tuning, QLoRA,
   int8/nf4 weights, a shorter context.

When no single change is enough, they are combined in that order until the job fits.

Given a traced estimate of the job (:mod:`.trace`), the job as asked is placed by the
traced peak instead of the formula's, and the advice says so; the changes, and the job on
more cards than asked, are formula estimates (tracing each would take seconds apiece).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..errors import GpuEstimateError
from .architecture import Architecture
from .estimate import Estimate, estimate
from .hardware import GPU_TYPES, GpuType, Partition
from .request import EstimateRequest
from .trace.result import TracedEstimate

NODE_GPUS_WHEN_UNKNOWN = 8  # a GPU type given without a partition: assume the usual 8-GPU node
_SEARCH_LIMIT = 1 << 22


@dataclass(frozen=True)
class Target:
    """A place a job could run: a GPU type, the partition offering it, and the cards per node."""

    gpu: GpuType
    partition: str | None = None
    cards: int = NODE_GPUS_WHEN_UNKNOWN

    @property
    def label(self) -> str:
        """``partition/GPU`` or just the GPU type."""
        return f"{self.partition}/{self.gpu.name}" if self.partition else self.gpu.name


@dataclass(frozen=True)
class Placement:
    """The job on one target: how many cards it needs there, and the room left on each."""

    target: Target
    estimate: Estimate

    @property
    def fits(self) -> bool:
        """Whether it fits on this target with this many cards."""
        return self.estimate.request.gpus <= self.target.cards and self.estimate.fits(self.target.gpu)

    @property
    def headroom_gib(self) -> float:
        """GiB left per GPU (negative: missing)."""
        return self.estimate.headroom_gib(self.target.gpu)


@dataclass(frozen=True)
class Change:
    """A change to the job, its new estimate, and the targets it fits on."""

    description: str
    request: EstimateRequest
    estimate: Estimate
    fits_on: tuple[str, ...]


@dataclass(frozen=True)
class Advice:
    """Where the job fits as asked, and (when nowhere) the cheapest changes that make it fit."""

    estimate: Estimate
    placements: tuple[Placement, ...]
    changes: tuple[Change, ...]
    largest_batch: int | None
    longest_seq: int | None
    limits_on: str | None
    formula: Estimate | None = None
    """The formula estimate of the job as asked, when :attr:`estimate` is its traced peak."""

    @property
    def traced(self) -> bool:
        """Whether the job as asked is placed by its traced peak."""
        return self.formula is not None

    @property
    def fits_somewhere(self) -> bool:
        """Whether the job as asked fits on at least one target."""
        return any(placement.fits for placement in self.placements)

    def summary(self) -> str:
        """The advice as a few lines of text for a person."""
        lines = [f"{self.estimate.model}: {self.estimate.peak_gib:.1f} GiB per GPU as asked"
                 + (f" (traced on meta tensors; the formula estimate says {self.formula.peak_gib:.1f})"
                    if self.formula is not None else "")]
        for placement in self.placements:
            state = "fits" if placement.fits else "does not fit"
            room = f"{abs(placement.headroom_gib):.1f} GiB {'to spare' if placement.headroom_gib >= 0 else 'short'}"
            cards = placement.estimate.request.gpus
            lines.append(f"  {placement.target.label:<28} {cards} × {placement.target.gpu.memory_gib:.0f} GiB  "
                         f"{state}, {room} per GPU")
        if self.changes:
            lines.append("to make it fit, cheapest first" + (" (formula estimates):" if self.traced else ":"))
            lines += [f"  - {c.description}: {c.estimate.peak_gib:.1f} GiB per GPU, fits on {', '.join(c.fits_on)}"
                      for c in self.changes]
        elif not self.fits_somewhere:
            lines.append("no change Betty knows makes it fit on these GPUs")
        if self.largest_batch:
            setting = "as asked" if self.fits_somewhere or not self.changes else "with the first change"
            lines.append(f"on {self.limits_on} ({setting}): largest micro-batch {self.largest_batch}, "
                         f"longest sequence {self.longest_seq} tokens" + (" (formula estimates)" if self.traced else ""))
        elif self.limits_on:
            lines.append(f"on {self.limits_on}: not even one sequence of 1 token fits this way")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the advice."""
        return {
            "estimate": self.estimate.as_dict(),
            "traced": self.traced,
            "formula_peak_gib": round(self.formula.peak_gib, 3) if self.formula is not None else None,
            "fits_somewhere": self.fits_somewhere,
            "placements": [
                {"target": p.target.label, "partition": p.target.partition, "gpu": p.target.gpu.name,
                 "gpus": p.estimate.request.gpus, "sharding": p.estimate.request.sharding, "fits": p.fits,
                 "peak_gib": round(p.estimate.peak_gib, 3), "headroom_gib": round(p.headroom_gib, 3)}
                for p in self.placements
            ],
            "changes": [
                {"change": c.description, "peak_gib": round(c.estimate.peak_gib, 3), "fits_on": list(c.fits_on),
                 "request": _request_dict(c.request)}
                for c in self.changes
            ],
            "largest_batch": self.largest_batch,
            "longest_seq": self.longest_seq,
            "limits_on": self.limits_on,
        }


def _request_dict(request: EstimateRequest) -> dict[str, Any]:
    return {name: (list(value) if isinstance(value, tuple) else value) for name, value in vars(request).items()}


def targets_from(partitions: Iterable[Partition] = (), gpu_types: Iterable[GpuType] = ()) -> list[Target]:
    """Targets from partitions (cards per node from GRES) and bare GPU types; every known type if both are empty."""
    targets = [Target(gpu, partition.name, cards) for partition in partitions for gpu, cards in partition.gpu_types()]
    targets += [Target(gpu) for gpu in gpu_types]
    return targets or [Target(gpu) for gpu in GPU_TYPES]


def with_traced_peak(formula: Estimate, traced: TracedEstimate) -> Estimate:
    """``formula`` with the traced peak's breakdown in its place: the estimate a traced number decides with."""
    if traced.request != formula.request:
        raise GpuEstimateError(f"the trace is of another job than {formula.model} as asked; trace this one, "
                               "or advise without the trace")
    notes = (f"the peak is traced on meta tensors (the formula estimate says {formula.peak_gib:.1f} GiB)",
             *traced.notes)
    return dataclasses.replace(formula, breakdown=traced.breakdown_gib(), peak_moment=traced.where, slack_gib=0.0,
                               notes=notes, terms={})


def advise(model: Architecture | str, request: EstimateRequest, targets: list[Target],
           limits_on: GpuType | None = None, traced: TracedEstimate | None = None) -> Advice:
    """Place the job on each target, and find the cheapest changes when it fits nowhere.

    ``traced``, a traced estimate of this very job, places it as asked by the traced peak.
    """
    request = request.checked()
    formula = estimate(model, request)
    asked = with_traced_peak(formula, traced) if traced is not None else formula
    placements = tuple(sorted((_place(model, request, asked, target) for target in targets), key=_placement_order))
    changes: tuple[Change, ...] = ()
    if not any(p.fits for p in placements):
        changes = tuple(_changes_that_fit(model, request, targets))
    limit_gpu, limit_request = _limits_setting(request, placements, changes, targets, limits_on)
    return Advice(
        estimate=asked,
        placements=placements,
        changes=changes,
        largest_batch=largest_fitting(model, limit_request, limit_gpu, "batch_size"),
        longest_seq=largest_fitting(model, limit_request, limit_gpu, "seq_len"),
        limits_on=limit_gpu.name,
        formula=formula if traced is not None else None,
    )


def _placement_order(placement: Placement) -> tuple[bool, int, float]:
    return (not placement.fits, placement.estimate.request.gpus, placement.target.gpu.memory_mib)


def _limits_setting(request: EstimateRequest, placements: tuple[Placement, ...], changes: tuple[Change, ...],
                    targets: list[Target], limits_on: GpuType | None) -> tuple[GpuType, EstimateRequest]:
    """Which GPU and which version of the job the largest batch and context are reported for."""
    fitting = [p for p in placements if p.fits and (limits_on is None or p.target.gpu == limits_on)]
    if fitting:
        return fitting[0].target.gpu, fitting[0].estimate.request
    if changes:
        target = next(t for t in targets if t.label == changes[0].fits_on[0])
        return limits_on or target.gpu, changes[0].request
    return limits_on or max((t.gpu for t in targets), key=lambda gpu: gpu.memory_mib), request


def _place(model: Architecture | str, request: EstimateRequest, asked: Estimate, target: Target) -> Placement:
    """The job on ``target`` as asked or, if it does not fit, on the fewest cards of one node that hold it."""
    as_asked = Placement(target, asked)
    if as_asked.fits:
        return as_asked
    for cards in _card_counts(target.cards, request.gpus):
        scaled = _scaled(request, cards)
        placement = Placement(target, estimate(model, scaled))
        if placement.fits:
            return placement
    return as_asked


def _card_counts(available: int, asked: int) -> list[int]:
    counts = [n for n in (2, 4, 8) if asked < n <= available]
    return counts + ([available] if available > max(counts, default=asked) else [])


def _scaled(request: EstimateRequest, cards: int) -> EstimateRequest:
    if not request.training:
        return request.changed(gpus=cards)
    sharding = request.sharding if request.sharding not in ("none", "ddp") else "fsdp"
    return request.changed(gpus=cards, sharding=sharding)


def _candidate_changes(request: EstimateRequest, targets: list[Target]) -> list[tuple[str, dict[str, Any]]]:
    """(description, option changes), cheapest first."""
    most_cards = max(target.cards for target in targets)
    if not request.training:
        return _inference_changes(request, most_cards)
    changes: list[tuple[str, dict[str, Any]]] = []
    if request.grad_ckpt != "full":
        changes.append(("activation checkpointing (--grad-ckpt full)", {"grad_ckpt": "full", "ckpt_every": 2}))
    if request.batch_size > 1:
        accum = request.grad_accum * request.batch_size
        # accumulated gradients must outlive backward: the optimizer step goes back after it
        after = " and the optimizer step after backward" if request.optimizer_in_backward else ""
        changes.append((f"micro-batch 1 with gradient accumulation {accum} (same effective batch){after}",
                        {"batch_size": 1, "grad_accum": accum, "optimizer_in_backward": False}))
    if request.optimizer in ("adamw", "paged-adamw"):
        changes.append(("8-bit AdamW (--optimizer adamw8bit)", {"optimizer": "adamw8bit"}))
    if most_cards > request.gpus:
        changes.append((f"{most_cards} GPUs with FSDP", {"gpus": most_cards, "sharding": "fsdp"}))
        changes.append((f"{most_cards} GPUs with ZeRO-3 and optimizer offload to CPU",
                        {"gpus": most_cards, "sharding": "zero3", "offload": "optimizer",
                         "fsdp_mixed_precision": False}))
    # adapters: FSDP2's full-precision shards and op-level checkpointing are full fine-tuning's
    adapters = {"fsdp_mixed_precision": False, **({"grad_ckpt": "full"} if request.grad_ckpt == "op" else {})}
    if request.method == "full":
        changes.append((f"LoRA rank {request.lora_rank} instead of full fine-tuning", {"method": "lora", **adapters}))
    if request.method in ("full", "lora"):
        changes.append(("QLoRA (nf4 base model, double quantization)",
                        {"method": "qlora", "precision": None, **adapters}))
    return changes


def _inference_changes(request: EstimateRequest, most_cards: int) -> list[tuple[str, dict[str, Any]]]:
    changes: list[tuple[str, dict[str, Any]]] = []
    if request.kv_dtype not in ("fp8",):
        changes.append(("8-bit KV cache (--kv-dtype fp8)", {"kv_dtype": "fp8"}))
    if request.batch_size > 1:
        changes.append((f"batch {max(1, request.batch_size // 2)}", {"batch_size": max(1, request.batch_size // 2)}))
    if most_cards > request.gpus:
        changes.append((f"tensor parallel over {most_cards} GPUs", {"gpus": most_cards}))
    for precision in ("int8", "nf4"):
        if request.resolved_precision not in ("int8", "nf4"):
            changes.append((f"{precision} weights (--precision {precision})", {"precision": precision}))
    if request.seq_len > 2048:
        changes.append((f"context {request.seq_len // 2} tokens", {"seq_len": request.seq_len // 2}))
    return changes


def _changes_that_fit(model: Architecture | str, request: EstimateRequest, targets: list[Target]) -> list[Change]:
    candidates = _candidate_changes(request, targets)
    found = [change for change in (_try(model, request, d, c, targets) for d, c in candidates) if change.fits_on]
    if found:
        return found
    combined: dict[str, Any] = {}
    names: list[str] = []
    for description, options in candidates:
        if "sharding" in options and "sharding" in combined:
            continue
        if options.get("method") == "qlora":
            combined.pop("optimizer", None)
        combined.update(options)
        names.append(description)
        change = _try(model, request, " + ".join(names), combined, targets)
        if change.fits_on:
            return [change]
    return []


def _try(model: Architecture | str, request: EstimateRequest, description: str, options: dict[str, Any],
         targets: list[Target]) -> Change:
    changed = request.changed(**options)
    result = estimate(model, changed)
    fits_on = tuple(t.label for t in targets if changed.gpus <= t.cards and result.fits(t.gpu))
    return Change(description, changed, result, fits_on)


def largest_fitting(model: Architecture | str, request: EstimateRequest, gpu: GpuType, option: str) -> int | None:
    """The largest ``batch_size`` or ``seq_len`` that still fits on ``gpu`` (None when 1 does not)."""
    def fits(value: int) -> bool:
        return estimate(model, request.changed(**{option: value})).fits(gpu)

    return _largest(fits)


def _largest(fits: Callable[[int], bool]) -> int | None:
    """Binary search for the largest n with ``fits(n)``; memory only grows with batch and length."""
    if not fits(1):
        return None
    low, high = 1, 2
    while high < _SEARCH_LIMIT and fits(high):
        low, high = high, high * 2
    if high >= _SEARCH_LIMIT and fits(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
