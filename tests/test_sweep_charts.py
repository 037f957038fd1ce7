"""A sweep's pictures as Betty draws them (SVG): a line per task by step, a point per task by parameter, every text
escaped — a parameter's value is anyone's text."""

from __future__ import annotations

from betty_jupyter.experiments.comparison import Comparison
from betty_jupyter.experiments.sweep_charts import LEGEND_ROWS, curves_svg, final_svg, sweep_charts

HOSTILE = "<img src=x onerror=alert(1)>"


def comparison(tags: list[str], steps: int = 3) -> Comparison:
    grid = ["lr=1e-4,1e-3", f"tag={','.join(tags)}"]
    count = 2 * len(tags)
    return Comparison.from_json({"slug": "2026-11-25-lr", "grid": grid, "tasks": [
        {"index": i, "job_id": f"42_{i}", "state": "COMPLETED",
         "series": {"loss": [[s * 10, 1.0 / (s + i)] for s in range(1, steps + 1)]}} for i in range(count)]})


def test_a_chart_per_metric_by_step_and_per_parameter_in_order():
    charts = sweep_charts(comparison([HOSTILE, "plain"]))
    assert [(c.metric, c.parameter) for c in charts] == [("loss", None), ("loss", "lr"), ("loss", "tag")]
    assert all(c.svg.startswith("<svg") and c.svg.endswith("</svg>") for c in charts)


def test_each_task_is_a_line_by_step_and_a_point_by_parameter_and_hostile_text_is_escaped():
    sweep = comparison([HOSTILE, "plain"])
    steps = curves_svg(sweep, "loss")
    assert steps.count("<polyline") == 4 and steps.count("<circle") == 12
    assert "task 1: lr=1e-4 tag=plain, step 30: loss=0.25" in steps
    by_tag = final_svg(sweep, "loss", "tag")
    assert by_tag.count('<circle data-task="') == 4
    for svg in (steps, by_tag):
        assert "<img" not in svg and "onerror=alert(1)>" not in svg and "&lt;img s" in svg


def test_a_metric_nobody_printed_yet_says_so_and_a_long_legend_says_how_many_more():
    assert "no task has printed acc with its steps yet" in curves_svg(comparison(["a"]), "acc")
    assert "no task has printed acc yet" in final_svg(comparison(["a"]), "acc", "lr")
    many = comparison([f"t{n}" for n in range(10)])
    assert f"and {20 - LEGEND_ROWS} more" in curves_svg(many, "loss")
