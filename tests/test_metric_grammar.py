"""The one grammar of a job's numbers (``NAME=NUMBER``, finite), read the same by both of its readers.

Every line is read through the sweep comparison's reader (:func:`read_metrics`) and the experiment
notebook's table (:func:`parse_metrics`): what one counts, the other counts, with the same value.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from betty_jupyter.experiments.metrics_table import parse_metrics
from betty_jupyter.experiments.task_metrics import MAX_METRICS, read_metrics


def by_comparison(text: str) -> dict[str, list[float]]:
    return {name: [value for _, value in points] for name, points in read_metrics(text).series.items()}


def by_notebook(text: str) -> dict[str, list[float]]:
    frame = parse_metrics(text)
    return {str(name): frame[name].dropna().tolist() for name in frame.columns if name != "step"}


READERS = pytest.mark.parametrize("read", [by_comparison, by_notebook], ids=["comparison", "notebook"])
Read = Callable[[str], dict[str, list[float]]]

IGNORED = [
    "loss: 0.4", "loss = 0.4", "loss=nan", "loss=NaN", "loss=inf", "loss=-inf", "loss=Infinity", "loss=1e999",
    "loss=-1e999", "loss=1e99999999999999999999", "loss=" + "9" * 400, "loss=１", "loss=٣", "ｌoss=1", "loss=1\u0663",
    "\x1b[32mloss=0.5\x1b[0m", "loss=0.5\x1b[0m", "los\x1bs=1", "<b>loss</b>=1", "loss=0.4<img src=x onerror=alert(1)>",
    "1loss=2", "lo-ss=2", "train/loss=1", "loss=0x10", "loss=1_000", "loss=", "=1", "loss=1.2.3", "version=2.1.0",
    "a" * 65 + "=1", "<script>x=1</script>", "x=1<script>", "loss=" + "1" * 100_000 + "x",
]


@READERS
@pytest.mark.parametrize("line", IGNORED, ids=range(len(IGNORED)))
def test_anything_but_an_exact_name_equals_finite_number_is_ignored(read: Read, line: str) -> None:
    assert read(line) == {}


@READERS
def test_the_same_log_gives_the_same_numbers_to_both(read: Read) -> None:
    log = ("step=1 loss=0.9 acc=0.5\nloading data\nloss: 0.8\nstep=2 loss=0.42, acc=0.75;\n"
           "<img src=x onerror=alert(1)> loss=0.25 \x1b[31m\nloss=1.7e308 acc=5e-324 lr=-1e-3\n")
    assert read(log) == {"loss": [0.9, 0.42, 0.25, 1.7e308], "acc": [0.5, 0.75, 5e-324], "lr": [-1e-3]}


@READERS
def test_a_very_long_line_is_read_quickly_and_its_metric_words_count(read: Read) -> None:
    line = "x" * 1_000_000 + " loss=0.5 " + "step=1 " * 50_000 + "y=" + "1" * 200_000 + "z"
    started = time.monotonic()
    assert read(line) == {"loss": [0.5]}
    assert time.monotonic() - started < 20  # a quadratic reading of one long word would take minutes


@READERS
def test_a_log_printing_thousands_of_names_keeps_the_first_few(read: Read) -> None:
    found = read("\n".join(f"m{n}=1" for n in range(500)))
    assert list(found) == [f"m{n}" for n in range(MAX_METRICS)]


def test_the_notebook_table_has_the_step_the_lines_printed() -> None:
    frame = parse_metrics("step=1 loss=1e999\nstep=2 loss=-1e999 acc=0.5\nstep=3 loss=1.7e308\nstep=4\n")
    assert frame["step"].tolist() == [2, 3] and frame["acc"].count() == 1  # a line with no metric is no row
    assert frame["loss"].count() == 1 and frame["loss"].iloc[1] == 1.7e308


def test_the_comparison_puts_each_value_at_its_step() -> None:
    metrics = read_metrics("loss=inf\nloss=nan\nloss=1e999\nloss=-1e999\nloss=1.7e308 step=1e308\nacc=5e-324\n")
    assert metrics.series == {"loss": [(1e308, 1.7e308)], "acc": [(1.0, 5e-324)]}
