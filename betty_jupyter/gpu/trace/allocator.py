"""PyTorch's CUDA caching allocator, replayed over a traced sequence of allocations and frees.

Tensors do not get memory straight from the GPU: PyTorch's caching allocator
(``c10/cuda/CUDACachingAllocator.cpp``) rounds every request, carves it out of larger
segments it asks CUDA for, and keeps freed blocks for reuse instead of giving them back.
``torch.cuda.max_memory_allocated()`` counts the rounded blocks in use;
``torch.cuda.max_memory_reserved()`` counts the segments, which is what ``nvidia-smi``
sees (without the CUDA context). The rules replayed here are the allocator's defaults:

* a request is rounded up to a multiple of 512 bytes (at least 512);
* requests of at most 1 MiB come from the *small* pool, whose segments are 2 MiB;
* larger requests come from the *large* pool: a request under 10 MiB gets a 20 MiB
  segment, a larger one a segment rounded up to a multiple of 2 MiB;
* a free block is found by best fit (the smallest free block of the pool that is large
  enough); a block is split when what is left is at least 512 bytes (small pool) or more
  than 1 MiB (large pool);
* a freed block merges with free neighbours of its segment; segments are never released
  (no ``empty_cache``), and there is one stream.

Pure Python on purpose: it needs no torch, so it is checked against hand-computed cases.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

MIB = 1024**2
MIN_BLOCK = 512
SMALL_REQUEST = 1 * MIB  # the largest request served from the small pool
SMALL_SEGMENT = 2 * MIB
LARGE_SEGMENT = 20 * MIB  # the segment a large request under MIN_LARGE_ALLOC gets
MIN_LARGE_ALLOC = 10 * MIB
ROUND_LARGE = 2 * MIB


def rounded_size(nbytes: int) -> int:
    """The block size the allocator hands out for a request of ``nbytes``."""
    if nbytes < MIN_BLOCK:
        return MIN_BLOCK
    return MIN_BLOCK * ((nbytes + MIN_BLOCK - 1) // MIN_BLOCK)


def segment_size(block: int) -> int:
    """The size of the segment CUDA is asked for when no free block can take ``block`` bytes."""
    if block <= SMALL_REQUEST:
        return SMALL_SEGMENT
    if block < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return ROUND_LARGE * ((block + ROUND_LARGE - 1) // ROUND_LARGE)


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    small: bool
    free: bool = True

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.size, self.segment, self.offset)


@dataclass
class CachingAllocator:
    """The allocator's state: segments, blocks in use and free blocks per pool, and the peaks seen so far."""

    allocated: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    _segments: int = 0
    _free: dict[bool, list[tuple[int, int, int]]] = field(default_factory=lambda: {True: [], False: []})
    _blocks: dict[tuple[int, int], _Block] = field(default_factory=dict)  # (segment, offset) -> block
    _in_use: dict[int, _Block] = field(default_factory=dict)  # the caller's handle -> block
    _free_ends: dict[tuple[int, int], _Block] = field(default_factory=dict)  # (segment, end offset) -> free block

    def malloc(self, handle: int, nbytes: int) -> None:
        """Give ``nbytes`` to the allocation called ``handle`` (zero bytes take no block, as in CUDA)."""
        if nbytes <= 0:
            return
        size = rounded_size(nbytes)
        small = size <= SMALL_REQUEST
        block = self._best_fit(size, small) or self._new_segment(size, small)
        self._take(block)
        if self._splits(block, size):
            rest = _Block(block.segment, block.offset + size, block.size - size, small)
            block.size = size
            self._blocks[(rest.segment, rest.offset)] = rest
            self._release(rest)
        block.free = False
        self._in_use[handle] = block
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def free(self, handle: int) -> None:
        """Return the block of ``handle`` to its pool, merged with free neighbours (unknown handles are ignored)."""
        block = self._in_use.pop(handle, None)
        if block is None:
            return
        self.allocated -= block.size
        for neighbour in (self._before(block), self._blocks.get((block.segment, block.offset + block.size))):
            if neighbour is not None and neighbour.free:
                self._take(neighbour)
                del self._blocks[(neighbour.segment, neighbour.offset)]
                del self._blocks[(block.segment, block.offset)]
                block = _Block(block.segment, min(block.offset, neighbour.offset), block.size + neighbour.size,
                               block.small)
                self._blocks[(block.segment, block.offset)] = block
        self._release(block)

    def replay(self, events: Iterable[tuple[int, int]]) -> CachingAllocator:
        """Apply ``(handle, nbytes)`` events in order: a positive size allocates, a negative one frees."""
        for handle, nbytes in events:
            if nbytes > 0:
                self.malloc(handle, nbytes)
            else:
                self.free(handle)
        return self

    def _best_fit(self, size: int, small: bool) -> _Block | None:
        pool = self._free[small]
        index = bisect.bisect_left(pool, (size, -1, -1))
        if index == len(pool):
            return None
        _, segment, offset = pool[index]
        return self._blocks[(segment, offset)]

    def _new_segment(self, size: int, small: bool) -> _Block:
        segment_bytes = segment_size(size)
        self._segments += 1
        block = _Block(self._segments, 0, segment_bytes, small)
        self._blocks[(block.segment, 0)] = block
        self._release(block)
        self.reserved += segment_bytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return block

    @staticmethod
    def _splits(block: _Block, size: int) -> bool:
        remaining = block.size - size
        return remaining >= MIN_BLOCK if block.small else remaining > SMALL_REQUEST

    def _before(self, block: _Block) -> _Block | None:
        return self._free_ends.get((block.segment, block.offset))

    def _take(self, block: _Block) -> None:
        pool = self._free[block.small]
        index = bisect.bisect_left(pool, block.key)
        if index < len(pool) and pool[index] == block.key:
            pool.pop(index)
            del self._free_ends[(block.segment, block.offset + block.size)]
        block.free = False

    def _release(self, block: _Block) -> None:
        block.free = True
        bisect.insort(self._free[block.small], block.key)
        self._free_ends[(block.segment, block.offset + block.size)] = block
