"""The sweep routes on the real dev cluster: the list of recorded sweeps, and one sweep's comparison — its table as
text, each task's state, the failed tasks, and its pictures as SVG whose every text is escaped."""

from __future__ import annotations

from typing import Any

import pytest
from test_server_support import (  # noqa: F401
    call, jp_server_config, llm, open_session, refusal, submit_and_approve, sweep_and_approve, until,
)

pytestmark = pytest.mark.cluster

HOSTILE_TAG = "<img src=x onerror=alert(1)>"
SCRIPT = (
    "#!/bin/bash\n#SBATCH --job-name=panel-sweep\n#SBATCH --time=5\n"
    "i=$SLURM_ARRAY_TASK_ID\n"
    "for s in 1 2 3; do echo \"step=$s loss=$s.${i}5 acc=0.$s$i\"; done\n"
    "echo '<b>evil</b>=1 <img src=x onerror=alert(2)> fine=3'\n"
    "if [ \"$i\" = 3 ]; then echo '<script>alert(3)</script>'; exit 1; fi\n"
)


async def test_a_sweeps_comparison_and_pictures_over_the_server_with_hostile_text_escaped(jp_fetch, dev_cluster):
    slug = await sweep_and_approve(jp_fetch, SCRIPT, ["lr=0.1,0.2", f"tag={HOSTILE_TAG},plain"], "which lr")

    listed = (await call(jp_fetch, "GET", "sweeps"))["sweeps"]
    assert [(s["experiment"]["slug"], s["grid"], s["tasks"], s["retries"]) for s in listed] == [
        (slug, ["lr=0.1,0.2", f"tag={HOSTILE_TAG},plain"], 4, 0)]

    async def ended() -> dict[str, Any] | None:
        answer = await call(jp_fetch, "GET", "sweeps", slug)
        done = answer["ok"] and answer["states"] == ["COMPLETED"] * 3 + ["FAILED"]
        return answer if done and all(row[6] for row in answer["rows"][:3]) else None

    answer = await until("every task of the sweep ended", ended, guard=300.0)
    assert answer["header"] == ["task", "lr", "tag", "state", "runtime", "efficiency", "loss", "acc", "fine", "notes"]
    job = answer["job_id"]
    for index, row in enumerate(answer["rows"]):
        assert row[:3] == [f"{index} ({job}_{index})", ["0.1", "0.2"][index // 2], [HOSTILE_TAG, "plain"][index % 2]]
        assert row[6:9] == [f"{float(f'3.{index}5'):.6g}", f"{float(f'0.3{index}'):.6g}", "3"]  # what it printed
    assert answer["failed"] == [3] and "Failed" in answer["rows"][3][9]
    assert "evil" not in " ".join(answer["header"])  # a hostile `name=value` is no metric

    charts = answer["charts"]
    assert [(c["metric"], c["parameter"]) for c in charts] == [
        (metric, parameter) for metric in ("loss", "acc", "fine") for parameter in (None, "lr", "tag")]
    for chart in charts:
        svg = chart["svg"]
        assert svg.startswith("<svg") and svg.endswith("</svg>")
        assert "<img" not in svg and "<script" not in svg and "<b>" not in svg and "onerror=alert(1)>" not in svg
    by_tag = next(c["svg"] for c in charts if c["metric"] == "loss" and c["parameter"] == "tag")
    assert "&lt;img src=" in by_tag and by_tag.count('<circle data-task="') == 4
    steps = next(c["svg"] for c in charts if c["metric"] == "loss" and c["parameter"] is None)
    assert steps.count("<polyline") == 4 and f"step 3: loss={float('3.25'):g}" in steps


async def test_an_unknown_sweep_or_a_single_job_is_refused_in_one_line(jp_fetch, dev_cluster):
    code, error = await refusal(jp_fetch, "GET", "sweeps", "2026-01-01-nothing")
    assert code == 404 and "no sweep '2026-01-01-nothing'" in error
    job = await submit_and_approve(jp_fetch, "#!/bin/bash\n#SBATCH --time=1\nhostname\n", "one job")
    code, error = await refusal(jp_fetch, "GET", "sweeps", job)
    assert code == 404 and f"no sweep '{job}'" in error
    assert (await call(jp_fetch, "GET", "sweeps"))["sweeps"] == []
