"""Betty against published peak-memory measurements (``tests/data/gpu_measured_public.csv``).

The bound asserted here is what Betty reaches without per-row adjustments: every row is
estimated from its published settings through the same options a person would pass to
``betty gpu estimate``. ``python bench/gpu_accuracy.py`` prints the full table.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
MEDIAN_BOUND = 0.15
MAX_BOUND = 0.35
# (median, worst) absolute error per method, for methods with at least three rows
METHOD_BOUNDS = {
    "inference": (0.05, 0.08),
    "full": (0.05, 0.26),
    "LoRA": (0.05, 0.06),
    "QLoRA": (0.07, 0.15),
    "multi-GPU": (0.08, 0.13),
}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_accuracy", REPO / "bench" / "gpu_accuracy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _bench()


@pytest.fixture(scope="module")
def comparisons(bench: ModuleType) -> list:
    done, _ = bench.compare(bench.load_rows())
    return done


def test_every_row_names_its_source_and_unit(bench: ModuleType) -> None:
    for row in bench.load_rows():
        assert row["source"].strip() and row["unit"].strip(), row["id"]
        assert row["measure"] in ("allocated", "reserved", "device"), row["id"]
        if not row["betty_args"]:
            assert row["note"].startswith("skipped:"), row["id"]


def test_the_shared_measurements_are_all_kept(bench: ModuleType) -> None:
    shared = REPO.parent / "shared" / "data" / "gpu_measured_public.csv"
    if not shared.exists():
        pytest.skip("shared/ is not beside this checkout")
    import csv

    ours = {row["id"]: row for row in bench.load_rows()}
    with shared.open(newline="") as handle:
        for row in csv.DictReader(handle):
            assert ours[row["id"]]["peak"] == row["peak"] and ours[row["id"]]["source"] == row["source"]


def test_enough_rows_have_settings(comparisons: list) -> None:
    assert len(comparisons) >= 25
    assert len({c.model for c in comparisons}) >= 5


def test_betty_is_within_the_error_bound(comparisons: list) -> None:
    errors = {c.row_id: abs(c.betty_error) for c in comparisons}
    assert statistics.median(errors.values()) <= MEDIAN_BOUND
    worst = max(errors, key=errors.__getitem__)
    assert errors[worst] <= MAX_BOUND, f"row {worst} is off by {errors[worst]:.0%}"


@pytest.mark.parametrize("method", METHOD_BOUNDS)
def test_each_method_is_within_its_bound(bench: ModuleType, comparisons: list, method: str) -> None:
    stats = bench.per_method(comparisons)[method]
    assert stats["rows"] >= 3
    median_bound, worst_bound = METHOD_BOUNDS[method]
    assert stats["median"] <= median_bound, f"{method}: median {stats['median']:.1%}"
    assert stats["max"] <= worst_bound, f"{method}: worst {stats['max']:.1%}"


def test_multi_gpu_rows_are_sharded_runs(comparisons: list) -> None:
    multi = [c for c in comparisons if c.method == "multi-GPU"]
    assert len(multi) >= 4
    assert all("fsdp on" in c.setting for c in multi)


def test_betty_beats_accelerates_method(comparisons: list) -> None:
    betty = statistics.median(abs(c.betty_error) for c in comparisons)
    accelerate = statistics.median(abs(c.accelerate_error) for c in comparisons)
    assert accelerate > 2 * betty
    assert max(abs(c.accelerate_error) for c in comparisons) > 2 * max(abs(c.betty_error) for c in comparisons)


def test_units_are_converted_once(bench: ModuleType) -> None:
    rows = {row["id"]: row for row in bench.load_rows()}
    assert float(rows["33"]["peak_gib"]) == pytest.approx(14949 / 1024, abs=1e-3)  # nvidia-smi MiB
    assert float(rows["23"]["peak_gib"]) == pytest.approx(13.52e9 / 2**30, abs=1e-3)  # 1e9-byte GB
    assert float(rows["101"]["peak_gib"]) == 60.0  # torchtune reports GiB


def test_the_script_prints_the_table(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert "Betty median" in out and "accelerate median" in out and "skipped 29" in out
    assert "QLoRA" in out and "multi-GPU" in out and "rows: median" in out
