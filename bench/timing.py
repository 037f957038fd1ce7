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


def timed_cell(kernel: Any, code: str) -> float:
    """Seconds from sending ``code`` to a kernel (``tests/kernel_driver.Kernel``) until it is idle again with every
    output sent; the benchmark stops when the cell failed."""
    began = time.perf_counter()
    cell = kernel.run(code, timeout=600)
    took = time.perf_counter() - began
    if cell.status != "ok" or cell.stderr.strip() or cell.errors:
        raise SystemExit(f"{code!r} failed: {cell.errors or cell.stderr}")
    return took
