"""The trace and the fast estimate against peaks measured on a real GPU (``tests/data/gpu_real_peaks.csv``).

The file is written by ``python bench/gpu_real_peaks.py`` on a machine with a CUDA GPU: points of
the traced grid (``tests/data/gpu_trace_grid.csv``) run for real with the same model class and
step, ``torch.cuda.max_memory_allocated()`` and ``max_memory_reserved()`` read over the step,
and the device's used memory read by Betty's own job sampler from the real ``nvidia-smi``.
The estimates are computed here, now, so a change to the estimator is judged against the GPU.
"""

from __future__ import annotations

import csv
import shlex
import statistics
from pathlib import Path

import pytest

from betty_jupyter.gpu import estimate
from betty_jupyter.gpu.estimate_options import job_options, request_from

DATA = Path(__file__).parent / "data"
REAL = DATA / "gpu_real_peaks.csv"
GRID = DATA / "gpu_trace_grid.csv"

# Relative errors of the allocated peak. Measured: the trace's median 0.3%, worst 12.7%; the fast estimate's
# median 0.6%, worst 11.8% (both worst: eager attention at 8,192 tokens in inference, over the real peak).
TRACE_MEDIAN, TRACE_WORST = 0.01, 0.15
FAST_MEDIAN, FAST_WORST = 0.02, 0.15
METHODS = ("inference", "full", "lora")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def measured() -> list[dict[str, str]]:
    return [row for row in _rows(REAL) if not row["skipped"]]


@pytest.fixture(scope="module")
def grid() -> dict[str, dict[str, str]]:
    return {row["id"]: row for row in _rows(GRID)}


def _fast_allocated(row: dict[str, str]) -> float:
    parser = job_options()
    request = request_from(parser.parse_args(["--model", row["model"], *shlex.split(row["betty_args"])]))
    return estimate(row["model"], request).allocated_gib


def _errors(pairs: list[tuple[float, float]]) -> list[float]:
    return [abs(predicted / real - 1) for predicted, real in pairs]


def test_enough_points_were_measured_on_a_real_gpu(measured: list[dict[str, str]]) -> None:
    assert len(measured) >= 20
    assert len({row["model"] for row in measured}) >= 5
    assert {"inference", "full", "lora"} <= {shlex.split(row["betty_args"])[1] for row in measured}
    assert all("H100" in row["gpu"] or "H200" in row["gpu"] or "A100" in row["gpu"] for row in measured)


def test_each_point_is_the_grid_point_it_names(measured: list[dict[str, str]],
                                               grid: dict[str, dict[str, str]]) -> None:
    for row in measured:
        assert (grid[row["grid_id"]]["model"], grid[row["grid_id"]]["betty_args"]) == (row["model"], row["betty_args"])


def test_the_trace_agrees_with_the_gpus_allocator(measured: list[dict[str, str]],
                                                  grid: dict[str, dict[str, str]]) -> None:
    errors = _errors([(float(grid[row["grid_id"]]["allocated_gib"]), float(row["allocated_gib"])) for row in measured])
    assert statistics.median(errors) <= TRACE_MEDIAN
    assert max(errors) <= TRACE_WORST


@pytest.mark.parametrize("method", METHODS)
def test_the_fast_estimate_agrees_with_the_gpus_allocator(measured: list[dict[str, str]], method: str) -> None:
    rows = [row for row in measured if shlex.split(row["betty_args"])[1] == method]
    errors = _errors([(_fast_allocated(row), float(row["allocated_gib"])) for row in rows])
    assert len(rows) >= 8
    assert statistics.median(errors) <= FAST_MEDIAN
    assert max(errors) <= FAST_WORST, max(zip(errors, (row["grid_id"] for row in rows)))


def test_float32_with_grouped_heads_is_sized_as_the_math_kernel_it_runs(measured: list[dict[str, str]]) -> None:
    """Llama-3.1-8B in float32: SDPA's math kernel stores the scores; sizing it as flash was 12% low."""
    row = next(row for row in measured if row["model"] == "Llama-3.1-8B" and "fp32" in row["betty_args"])
    parser = job_options()
    request = request_from(parser.parse_args(["--model", row["model"], *shlex.split(row["betty_args"])]))
    result = estimate(row["model"], request)
    assert result.request.attention == "flash" and any("math kernel" in note for note in result.notes)
    assert abs(result.allocated_gib / float(row["allocated_gib"]) - 1) <= 0.05
