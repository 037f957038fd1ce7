"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import time
from typing import Any, Callable


def best_of(call: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``call``, in seconds (the least disturbed by a busy machine)."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)
