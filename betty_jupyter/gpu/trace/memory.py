"""The memory tracer: every tensor storage the step creates, how many bytes it holds, and while it lives.

:class:`MemoryTracer` is a ``TorchDispatchMode``: it sees every ATen operation below
autograd, so it sees what the real step allocates, including what autograd saves for
backward and what the optimizer creates. Tensors are counted by *storage*, so views
(``transpose``, ``view``, slices) cost nothing; a storage is freed when its last tensor
goes, which a weak-reference finalizer reports. Only storages on the traced device count
(on a GPU, AdamW's step counters live on the host).

Each storage gets a :data:`Tag` saying what it is; a tag can change while the storage
lives (a tensor autograd just produced becomes a parameter's gradient), and the timeline
is computed after the step, so every moment is reported with the storages' final tags.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
from torch.utils._pytree import tree_flatten

Tag = Literal["weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "quantization"]
TAGS: tuple[Tag, ...] = ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "quantization")


ASSUMED_TRUE = (
    "a yes-or-no question the model code asks of a tensor's values on meta (`mask.all()`) is answered yes: "
    "every token is real and sequences are not packed, so attention masks are all ones and can be dropped"
)


@dataclass
class Allocation:
    """One storage: its size, what it is, the moment it was born, and the phase, operation and module that made it."""

    handle: int
    nbytes: int
    tag: Tag
    born: int
    phase: str
    op: str
    module: str
    weight_copy: bool = False
    """A half-precision copy of a weight made by autocast (sharding's gathered unit replaces it)."""


@dataclass(frozen=True)
class Moment:
    """The live bytes right after one allocation or free, by tag."""

    index: int
    phase: str
    live: dict[str, int]

    @property
    def total(self) -> int:
        """All live bytes at this moment."""
        return sum(self.live.values())


class MemoryTracer(TorchDispatchMode):
    """Counts the bytes of every live storage on ``device`` while the step runs under it.

    ``phase``, ``default_tag`` and the module stack are set by the step runner; a new storage
    gets ``default_tag`` (``logits`` when made by one of ``logits_modules``) unless
    :meth:`retag` says otherwise later.
    """

    def __init__(self, device: torch.device | None = None) -> None:
        super().__init__()
        self.device = device or torch.device("meta")
        self.phase = "setup"
        self.default_tag: Tag = "activations"
        self.allocations: list[Allocation] = []
        self.modules: list[str] = []
        self.logits_modules: frozenset[str] = frozenset()  # where what is made is the logits and the loss
        self._live: dict[int, Allocation] = {}  # id of the storage object -> its allocation
        self._events: list[tuple[int, int, str]] = []  # (handle, +bytes born / -bytes freed, phase)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default and _meta_bool(args[0]):
            return True  # see ASSUMED_TRUE
        out = func(*args, **(kwargs or {}))
        for tensor in _tensors(out):
            self.track(tensor, op=str(func.overloadpacket.__name__))
        return out

    def track(self, tensor: torch.Tensor, op: str = "", tag: Tag | None = None) -> Allocation | None:
        """Count ``tensor``'s storage if it is new (a view of a counted storage adds nothing)."""
        if tensor.device != self.device:
            return None
        storage = tensor.untyped_storage()
        known = self._live.get(id(storage))
        if known is not None:
            return known
        handle = len(self.allocations)
        module = self._where()
        if tag is None:
            tag = "logits" if module in self.logits_modules else self.default_tag
        allocation = Allocation(handle, storage.nbytes(), tag, len(self._events), self.phase, op, module)
        self.allocations.append(allocation)
        self._live[id(storage)] = allocation
        self._events.append((handle, allocation.nbytes, self.phase))
        weakref.finalize(storage, self._free, id(storage), allocation)
        return allocation

    def retag(self, tensor: torch.Tensor | None, tag: Tag) -> None:
        """Say what ``tensor``'s storage is (counting it first if it was made outside the tracer)."""
        if tensor is None:
            return
        allocation = self.track(tensor, tag=tag)
        if allocation is not None:
            allocation.tag = tag

    def live_by_tag(self) -> dict[str, int]:
        """Bytes of the storages alive now, by tag."""
        live: dict[str, int] = dict.fromkeys(TAGS, 0)
        for allocation in self._live.values():
            live[allocation.tag] += allocation.nbytes
        return live

    def _where(self) -> str:
        """The module whose forward runs, or in backward the autograd node that runs (``MmBackward0``)."""
        node = torch._C._current_autograd_node()
        if node is not None:
            return str(node.name())
        return self.modules[-1] if self.modules else ""

    def events(self) -> list[tuple[int, int]]:
        """Every allocation (positive bytes) and free (negative bytes) in order, by allocation handle."""
        return [(handle, nbytes) for handle, nbytes, _ in self._events]

    def phased_events(self) -> list[tuple[int, int, str]]:
        """:meth:`events` with the phase each happened in."""
        return list(self._events)

    def timeline(self) -> list[Moment]:
        """The live bytes by tag after every event, with the storages' final tags."""
        return timeline_of(self._events, lambda handle: self.allocations[handle].tag)

    def _free(self, key: int, allocation: Allocation) -> None:
        if self._live.get(key) is allocation:
            del self._live[key]
        self._events.append((allocation.handle, -allocation.nbytes, self.phase))


def timeline_of(events: list[tuple[int, int, str]], tag_of: Callable[[int], str]) -> list[Moment]:
    """The live bytes by tag after every ``(handle, bytes, phase)`` event."""
    live: dict[str, int] = dict.fromkeys(TAGS, 0)
    moments = []
    for index, (handle, nbytes, phase) in enumerate(events):
        live[tag_of(handle)] += nbytes
        moments.append(Moment(index, phase, dict(live)))
    return moments


def mark_weight_copy(tensor: torch.Tensor) -> None:
    """Tell the tracer running now (if one is) that ``tensor`` is autocast's half-precision copy of a weight."""
    for mode in _get_current_dispatch_mode_stack():
        if isinstance(mode, MemoryTracer):
            allocation = mode.track(tensor)
            if allocation is not None:
                allocation.weight_copy = True


def tag_storage(tensor: torch.Tensor, tag: Tag) -> None:
    """Tell the tracer running now (if one is) what ``tensor`` is: for code deep in the step that holds no tracer."""
    for mode in _get_current_dispatch_mode_stack():
        if isinstance(mode, MemoryTracer):
            mode.retag(tensor, tag)


def _meta_bool(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "meta" and value.dtype == torch.bool


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    return (leaf for leaf in leaves if isinstance(leaf, torch.Tensor))


def module_names(model: torch.nn.Module, tracer: MemoryTracer) -> list[Callable[[], None]]:
    """Keep ``tracer.modules`` naming the module whose forward is running; the hooks' removers."""
    names = {id(module): name or type(module).__name__ for name, module in model.named_modules()}

    def enter(module: torch.nn.Module, _args: Any) -> None:
        tracer.modules.append(names.get(id(module), type(module).__name__))

    def leave(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if tracer.modules:
            tracer.modules.pop()

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return [handle.remove for handle in handles]
