"""Several GPUs: the one-GPU trace, each traced storage divided as sharding divides it on one GPU (rank).

The trace runs one GPU's step; sharding is applied analytically on top, allocation by
allocation, with the rules the formula estimate uses (ZeRO, Rajbhandari et al. 2020 §3;
FSDP shards like ZeRO-3):

* stage 1 (``zero1``) divides optimizer states (and the step's temporaries) by N;
* stage 2 (``zero2``) the gradients too, and each unit's gradients exist whole until they
  are reduce-scattered: one *reduce-scatter buffer* (the largest unit's gradients) lives
  through backward;
* stage 3 (``zero3``, ``fsdp``) the weights too (and the quantization constants); each unit
  (a transformer layer, or the embedding) is gathered whole to compute: one *all-gather
  buffer* (the largest unit in the compute dtype) lives through forward and backward, and
  autocast's half-precision copies of the weights disappear (FSDP's mixed precision
  gathers the half-precision unit instead);
* ``ddp`` keeps everything and adds its gradient buckets (a copy of every gradient, unless
  ``gradient_as_bucket_view=True``) for the whole run.

Inference on N GPUs is tensor parallel, as the formula estimate counts it: weights,
quantization constants and KV cache are divided by N, activations are not.

FSDP2 traced under a fake process group was tried and not used: it runs, but its
optimizer step's numbers could not be trusted. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..request import EstimateRequest

STAGES = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}
SHARDED_NOTE = (
    "several GPUs: one GPU's step is traced and sharding applied analytically on top, storage by storage "
    "({rule}), not traced under a process group"
)


@dataclass(frozen=True)
class Piece:
    """What sharding needs to know of one traced storage."""

    nbytes: int
    tag: str
    phase: str
    weight_copy: bool


@dataclass(frozen=True)
class Sharding:
    """How one rank holds a step traced on one GPU: the division by tag and the buffers added."""

    gpus: int
    stage: int
    tensor_parallel: bool = False
    gathered_bytes: int = 0
    """The all-gather buffer: the largest unit's weights as they are gathered (stage 3)."""
    reduce_scatter_bytes: int = 0
    """The reduce-scatter buffer: the largest unit's gradients before they are scattered (stage 2 and 3)."""
    bucket_bytes: int = 0
    """DDP's gradient buckets: a copy of every gradient."""

    @classmethod
    def of(cls, request: EstimateRequest, unit_bytes: tuple[int, int], gradient_bytes: int) -> Sharding:
        """The sharding of ``request`` given the largest unit's (weights, gradients) and all gradients, in bytes."""
        if not request.training:
            return cls(request.gpus, 0, tensor_parallel=request.gpus > 1)
        stage = STAGES.get(request.sharding, 0)
        return cls(request.gpus, stage,
                   gathered_bytes=unit_bytes[0] if stage == 3 else 0,
                   reduce_scatter_bytes=unit_bytes[1] if stage >= 2 else 0,
                   bucket_bytes=gradient_bytes if request.sharding == "ddp" else 0)

    def share(self, piece: Piece) -> int:
        """The bytes of ``piece`` one rank holds."""
        divided = self._divided(piece)
        if piece.weight_copy and self.stage == 3:
            return 0
        return -(-piece.nbytes // self.gpus) if divided else piece.nbytes

    def _divided(self, piece: Piece) -> bool:
        constants = piece.tag == "quantization" and piece.phase == "setup"  # not a dequantized matrix
        if self.tensor_parallel:
            return piece.tag in ("weights", "kv_cache") or constants
        return (piece.tag == "optimizer" and self.stage >= 1) or (piece.tag == "gradients" and self.stage >= 2) \
            or ((piece.tag == "weights" or constants) and self.stage == 3)

    def buffers(self) -> list[tuple[str, int, str, str]]:
        """The buffers sharding adds: (tag, bytes, phase it appears in, phase after which it goes)."""
        added = [("weights", self.gathered_bytes, "forward", "backward"),
                 ("gradients", self.reduce_scatter_bytes, "backward", "backward"),
                 ("gradients", self.bucket_bytes, "setup", "")]
        return [buffer for buffer in added if buffer[1] > 0]

    def rule(self) -> str:
        """The rule applied, in words, for the notes."""
        if self.tensor_parallel:
            return f"tensor parallel: weights and KV cache divided by {self.gpus}"
        words = {0: "DDP: every GPU holds everything, plus gradient buckets",
                 1: f"ZeRO-1: optimizer states divided by {self.gpus}",
                 2: f"ZeRO-2: optimizer states and gradients divided by {self.gpus}, plus a reduce-scatter buffer",
                 3: f"ZeRO-3/FSDP: weights, gradients and optimizer states divided by {self.gpus}, plus an all-gather "
                    "and a reduce-scatter buffer of the largest unit"}
        return words[self.stage]


Event = tuple[int, int, str]  # (handle, +bytes born / -bytes freed, phase)


def sharded_events(events: Iterable[Event], pieces: list[Piece], sharding: Sharding,
                   ) -> tuple[list[Event], Callable[[int], str]]:
    """``events`` with each storage's bytes one rank's share and the buffers added; and each handle's tag."""
    tags = {handle: piece.tag for handle, piece in enumerate(pieces)}
    pending = {}
    for tag, nbytes, appears, goes in sharding.buffers():
        handle = len(tags)
        tags[handle] = tag
        pending[handle] = (nbytes, appears, goes)
    result: list[Event] = []
    phase = ""
    for handle, nbytes, event_phase in events:
        if event_phase != phase:
            result += _buffer_events(pending, phase, event_phase)
            phase = event_phase
        share = sharding.share(pieces[handle])
        result.append((handle, share if nbytes > 0 else -share, event_phase))
    result += _buffer_events(pending, phase, "")
    return result, tags.__getitem__


def _buffer_events(pending: dict[int, tuple[int, str, str]], ending: str, starting: str) -> list[Event]:
    """Frees of buffers whose last phase is ``ending``, then allocations of those that appear in ``starting``."""
    moved = [(handle, -nbytes, ending) for handle, (nbytes, _, goes) in pending.items() if ending and goes == ending]
    moved += [(handle, nbytes, starting) for handle, (nbytes, appears, _) in pending.items() if appears == starting]
    return moved
