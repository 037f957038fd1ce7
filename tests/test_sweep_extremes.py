"""A sweep whose tasks print extreme numbers (``loss=1.7e308``, ``5e-324``, ``inf``, ``1e999``) is still shown:
its table and pictures, every coordinate finite; first Betty's own drawing, then the real sweep route."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_server_support import call, jp_server_config, llm, sweep_and_approve, until  # noqa: F401

from betty_jupyter.experiments.comparison import Comparison, comparison_rows
from betty_jupyter.experiments.sweep_charts import sweep_charts

EXTREMES = [1.7e308, -1.7e308, 1.7976931348623157e308, 1e300, 5e-324, -5e-324, 2.2250738585072014e-308, 0.0, 1e-9,
            123456789.125, -0.5]
NOT_FINITE = re.compile(r'(?:c[xy]|points|x|y|data-peak)="[^"]*(?:nan|inf)', re.I)


def sweep(first: float, second: float) -> Comparison:
    return Comparison.from_json({"slug": "2026-11-29-extremes", "grid": ["lr=1e-4,1e-3"], "tasks": [
        {"index": 0, "job_id": "9_0", "state": "COMPLETED", "series": {"loss": [[1, second], [2, first]]}},
        {"index": 1, "job_id": "9_1", "state": "COMPLETED", "series": {"loss": [[1, -first], [first, second]]}}]})


@pytest.mark.parametrize("first", EXTREMES)
def test_every_picture_of_extreme_values_is_drawn_with_finite_coordinates(first: float) -> None:
    for second in EXTREMES:
        comparison = sweep(first, second)
        header, rows = comparison_rows(comparison)
        assert header[0] == "task" and len(rows) == 2
        for chart in sweep_charts(comparison):
            assert chart.svg.startswith("<svg") and not NOT_FINITE.search(chart.svg), (first, second)


SCRIPT = (
    "#!/bin/bash\n#SBATCH --job-name=extreme-sweep\n#SBATCH --time=5\n"
    "i=$SLURM_ARRAY_TASK_ID\n"
    "case $i in\n"
    "  0) echo 'step=1 loss=1.7e308 acc=5e-324'; echo 'step=2 loss=1e308 acc=0' ;;\n"
    "  1) echo 'step=1 loss=-1.7e308'; echo 'step=1e308 loss=inf acc=1e999'; echo 'loss=nan step=3' ;;\n"
    "  2) echo 'loss=1.7976931348623157e308'; echo 'loss=-5e-324 acc=2.2250738585072014e-308' ;;\n"
    "  *) echo 'step=1 loss=0.5 acc=0.9' ;;\n"
    "esac\n"
)


@pytest.mark.cluster
async def test_the_sweep_view_shows_a_sweep_of_extreme_numbers(jp_fetch, dev_cluster) -> None:
    slug = await sweep_and_approve(jp_fetch, SCRIPT, ["lr=0.1,0.2", "seed=1,2"], "extremes")

    async def ended() -> dict[str, Any] | None:
        answer = await call(jp_fetch, "GET", "sweeps", slug)  # a 500 here fails the test at once
        return answer if answer["ok"] and answer["states"] == ["COMPLETED"] * 4 and all(
            row[6] for row in answer["rows"]) else None

    answer = await until("every task of the sweep ended", ended, guard=300.0)
    assert answer["header"][5:8] == ["efficiency", "loss", "acc"]
    assert [row[6] for row in answer["rows"]] == ["1e+308", "-1.7e+308", "-4.94066e-324", "0.5"]
    assert [(c["metric"], c["parameter"]) for c in answer["charts"]] == [
        (metric, parameter) for metric in ("loss", "acc") for parameter in (None, "lr", "seed")]
    for chart in answer["charts"]:
        assert chart["svg"].startswith("<svg") and not NOT_FINITE.search(chart["svg"]), chart["svg"][:300]
