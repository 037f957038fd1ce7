"""The fast estimate against the stored traced grid (``tests/data/gpu_trace_grid.csv``).

The grid was traced once by ``bench/gpu_trace_grid.py`` and is only read here: these tests
need no torch. The error bounds are the calibration's targets; a formula change that moves
the fast estimate away from what the real step keeps fails them.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
MEDIAN_BOUND = 0.05
WORST_BOUND = 0.15
BREAKDOWN = ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "quantization", "allocator",
             "runtime")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def calibration() -> ModuleType:
    return _load("gpu_calibration")


@pytest.fixture(scope="module")
def rows(calibration: ModuleType) -> list[dict[str, str]]:
    return calibration.load_grid()


@pytest.fixture(scope="module")
def points(calibration: ModuleType, rows: list[dict[str, str]]) -> list:
    return calibration.grid_points(rows)


def test_every_row_is_a_traced_job_or_the_traces_refusal(calibration: ModuleType, rows: list[dict[str, str]]) -> None:
    for row in rows:
        request = calibration.request_for(row["model"], row["betty_args"])  # the options parse
        assert row["produced_by"].startswith("python bench/gpu_trace_grid.py"), row["id"]
        assert row["torch"] and row["transformers"] and row["peft"], row["id"]
        if row["skipped"]:
            assert row["skipped"].endswith("drop --trace for the formula estimate"), row["id"]
            assert not row["peak_gib"], row["id"]
            continue
        parts = [float(row[f"{name}_gib"]) for name in BREAKDOWN]
        assert min(parts) >= 0 and sum(parts) == pytest.approx(float(row["peak_gib"]), abs=1e-3), row["id"]
        assert float(row["allocated_gib"]) <= float(row["reserved_gib"]) < float(row["peak_gib"]), row["id"]
        assert row["peak_phase"] in (("forward", "backward", "optimizer_step") if request.training
                                     else ("prefill", "decode")), row["id"]


def test_the_stored_grid_is_the_generators(rows: list[dict[str, str]]) -> None:
    generator = _load("gpu_trace_grid")
    stored = [(row["model"], row["betty_args"]) for row in rows]
    assert stored == list(generator.grid())
    assert len(set(stored)) == len(stored)
    assert [row["id"] for row in rows] == [str(number) for number in range(1, len(rows) + 1)]


def test_the_grid_spans_models_methods_and_switches(calibration: ModuleType, points: list) -> None:
    requests = [calibration.request_for(p.model, p.betty_args) for p in points]
    assert len(points) >= 100
    assert len({p.model for p in points}) >= 10
    assert {r.method for r in requests} == {"inference", "full", "lora", "qlora"}
    assert {r.resolved_precision for r in requests} == {"fp32", "bf16-mixed", "bf16", "fp16", "nf4", "int8"}
    assert {r.grad_ckpt for r in requests} == {"none", "full"}
    assert {r.attention for r in requests} == {"flash", "eager"}
    assert {r.optimizer for r in requests if r.training} == {"adamw", "sgd"}
    assert len({r.batch_size for r in requests}) >= 4 and len({r.seq_len for r in requests}) >= 5


@pytest.mark.parametrize("measure", ["peak", "allocated"])
def test_the_fast_estimate_tracks_the_trace(points: list, measure: str) -> None:
    errors = {p.row_id: abs(getattr(p, f"{measure}_error")) for p in points}
    assert statistics.median(errors.values()) <= MEDIAN_BOUND
    worst = max(errors, key=errors.__getitem__)
    assert errors[worst] <= WORST_BOUND, f"grid row {worst} is off by {errors[worst]:.1%}"


def test_every_method_tracks_the_trace_on_its_own(calibration: ModuleType, points: list) -> None:
    summary = calibration.grid_summary(points)
    for method, item in summary["by_method"].items():
        assert item["peak"]["median"] <= MEDIAN_BOUND, method


def test_the_report_prints_the_grid_and_the_published_figures(calibration: ModuleType,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert calibration.main(["--no-cost"]) == 0
    out = capsys.readouterr().out
    assert "fast vs trace over" in out and "published rows: median" in out and "not traced" in out
