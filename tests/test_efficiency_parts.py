"""Efficiency and right-sizing without a cluster: sacct's text as each Slurm version prints it, hostile job names,
and the right-sizing rules (the real jobs are in test_efficiency.py)."""

from __future__ import annotations

import pytest

from betty_jupyter.cluster.advisor.efficiency import (EFFICIENCY_FIELDS, JobEfficiency, parse_efficiency,
                                                      requested_memory, sacct_argv)
from betty_jupyter.cluster.advisor.rightsizing import MIN_RUNS, propose
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.errors import ToolError, UsageError
from hostile import hostile

MiB, GiB = 2**20, 2**30


def line(**cells: str) -> str:
    """One sacct row in the pinned format, blanks where not given."""
    return SEPARATOR.join(cells.get(name, "") for _, name in EFFICIENCY_FIELDS)


def job(ident: str, name: str = "train", state: str = "COMPLETED", **more: str) -> str:
    cells = dict(job_id=ident, name=name, partition="cpu", state=state, ended="2026-11-25T03:22:00", elapsed="100",
                 time_limit="60", cpus="4", nodes="1", total_cpu="03:20.000", req_mem="8G",
                 req_tres="billing=4,cpu=4,mem=8G,node=1", alloc_tres="billing=4,cpu=4,mem=8G,node=1")
    return line(**{**cells, **more})


def step(ident: str, max_rss: str, usage_max: str = "", usage_ave: str = "", total_cpu: str = "") -> str:
    return line(job_id=ident, name=ident.split(".")[1], state="COMPLETED", elapsed="100", cpus="4", nodes="1",
                total_cpu=total_cpu, max_rss=max_rss, usage_max=usage_max, usage_ave=usage_ave)


def test_the_three_ratios_come_from_the_job_and_its_largest_step() -> None:
    text = "\n".join([job("12"), step("12.batch", "1200M"), step("12.extern", "1M"), step("12.0", "2G")]) + "\n"
    (found,) = parse_efficiency(text)
    assert found.cpu_seconds == 200 and found.cpu_efficiency == pytest.approx(200 / (100 * 4))
    assert found.memory_peak_bytes == 2 * GiB and found.memory_peak_step == "0"
    assert found.memory_efficiency == pytest.approx(0.25)
    assert found.time_limit_seconds == 3600 and found.time_efficiency == pytest.approx(100 / 3600)
    assert found.gpus == 0 and found.gpu_utilization is None and found.gpu_memory_bytes is None


@pytest.mark.parametrize(("req_tres", "req_mem", "cpus", "nodes", "expected"), [
    ("cpu=4,mem=16G,node=1", "16G", 4, 1, 16 * GiB),        # 21.08 and later: ReqTRES is the whole job
    ("", "4000Mc", 4, 1, 4 * 4000 * MiB),                    # before 21.08: per CPU
    ("", "4000Mn", 4, 2, 2 * 4000 * MiB),                    # before 21.08: per node
    ("cpu=8,mem=7.81G,node=2", "4000M", 8, 2, round(7.81 * GiB)),
    ("", "", 1, 1, None),
    ("", "garbage", 1, 1, None),
])
def test_the_request_is_the_whole_jobs_in_every_slurm_version(req_tres, req_mem, cpus, nodes, expected) -> None:
    assert requested_memory(req_tres, req_mem, cpus, nodes) == expected


def test_gpu_use_is_read_where_accounting_gathers_it_and_none_elsewhere() -> None:
    gathered = "\n".join([
        job("20", alloc_tres="billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=32G,node=1"),
        step("20.batch", "3G", usage_max="cpu=00:01:00,gres/gpumem=30000M,gres/gpuutil=97,mem=3G",
             usage_ave="cpu=00:01:00,gres/gpumem=20000M,gres/gpuutil=81,mem=2G"),
        job("21", alloc_tres="billing=1,cpu=1,gres/gpu=1,mem=1G,node=1"), step("21.batch", "10M"),
    ])
    first, second = parse_efficiency(gathered)
    assert (first.gpus, first.gpu_type, first.gpu_utilization, first.gpu_memory_bytes) == (2, "a100", 81.0,
                                                                                         30000 * MiB)
    assert (second.gpus, second.gpu_utilization, second.gpu_memory_bytes) == (1, None, None)


def test_running_and_pending_jobs_and_stray_steps_are_left_out() -> None:
    text = "\n".join([job("30", state="RUNNING"), step("30.batch", "1G"), job("31", state="PENDING", elapsed="0"),
                      step("32.batch", "1G"), job("33", state="CANCELLED by 1000"), job("34", state="TIMEOUT"),
                      job("35", state="OUT_OF_MEMORY")])
    assert [(found.job_id, found.state) for found in parse_efficiency(text)] == [
        ("33", "CANCELLED"), ("34", "TIMEOUT"), ("35", "OUT_OF_MEMORY")]


def test_unlimited_time_and_never_run_give_no_ratio_rather_than_a_wrong_one() -> None:
    (found,) = parse_efficiency(job("40", time_limit="UNLIMITED", elapsed="0", state="CANCELLED"))
    assert found.time_limit_seconds is None and found.time_efficiency is None and found.cpu_efficiency is None
    assert found.memory_peak_bytes is None and found.memory_efficiency is None


@pytest.mark.parametrize("name", hostile("job_names", "unicode") + ["a|b|c", "two\nlines", "<img src=x onerror=1>"])
def test_a_hostile_job_name_shifts_no_column(name: str) -> None:
    text = "\n".join([job("50", name=name), step("50.batch", "1G"), job("51"), step("51.batch", "2G")]) + "\n"
    found = {item.job_id: item for item in parse_efficiency(text)}
    assert found["51"].memory_peak_bytes == 2 * GiB and found["51"].name == "train"
    if SEPARATOR not in name:  # a name holding Betty's separator cannot be split exactly: that row is left out
        assert found["50"].name == name and found["50"].memory_peak_bytes == GiB and found["50"].cpus == 4


def test_the_sacct_call_pins_its_format_and_checks_what_it_is_given() -> None:
    argv = sacct_argv(["12", "13_4"], "2026-11-20")
    assert argv[:4] == ["sacct", "--parsable2", "--noheader", f"--delimiter={SEPARATOR}"]
    assert "--jobs" in argv and "12,13_4" in argv and "2026-11-20" in argv
    with pytest.raises(UsageError, match="not a Slurm job id"):
        sacct_argv(["12; rm -rf ~"])
    with pytest.raises(UsageError, match="since: .* is not a date"):
        sacct_argv(None, "now --allusers")


def run(ident: str, peak: int, asked: int = 64 * GiB, elapsed: int = 1200, limit: int = 4 * 3600,
        state: str = "COMPLETED") -> JobEfficiency:
    return JobEfficiency(ident, "train", "cpu", state, "", elapsed, limit, 4, 100.0, asked, peak, "batch", 0, None,
                         None, None)


def test_right_sizing_asks_for_the_peak_with_headroom_rounded_up() -> None:
    runs = [run("1", 9 * GiB), run("2", int(11.2 * GiB)), run("3", 10 * GiB), run("4", 8 * GiB), run("5", 7 * GiB)]
    sizing = propose(runs)
    assert sizing.memory == "16G"                                   # 11.2 × 1.25 = 14 → 16
    assert sizing.time == "00:30:00"                                # 20 min × 1.5 = 30 min
    assert "asked 64GiB, peak 11.2GiB over 5 runs: ask 16G" in sizing.line()
    script = "#!/bin/bash\n#SBATCH --mem-per-cpu=16G\n#SBATCH --time=04:00:00\npython train.py --mem=64G\n"
    edited = sizing.edited(script)
    # the per-CPU request gives way to --mem; the program's own --mem argument is not a directive and stays
    assert edited == "#!/bin/bash\n#SBATCH --time=00:30:00\n#SBATCH --mem=16G\npython train.py --mem=64G\n"


def test_right_sizing_needs_enough_runs_and_keeps_what_is_close_or_was_too_small() -> None:
    assert propose([run("1", GiB)] * (MIN_RUNS - 1)).changes == {}
    assert f"right-sizing needs {MIN_RUNS}" in propose([run("1", GiB)]).line()
    close = propose([run(str(i), 50 * GiB, elapsed=3 * 3600) for i in range(3)])
    assert close.changes == {} and "keep 64GiB" in close.line()
    starved = propose([run("1", GiB), run("2", GiB), run("3", 64 * GiB, state="OUT_OF_MEMORY")])
    assert starved.memory is None and "ran out of memory" in starved.line()
    timed_out = propose([run("1", GiB), run("2", GiB), run("3", GiB, elapsed=4 * 3600, state="TIMEOUT")])
    assert timed_out.time is None and "hit its limit" in timed_out.line()


@pytest.mark.parametrize(("args", "refusal"), [
    ({"since": "now --allusers"}, "since: 'now --allusers' is neither a span"),
    ({"job_ids": ["12; scancel -u ada"]}, "not a Slurm job id"),
    ({"experiment": "../../etc/passwd"}, "is not an experiment Betty recorded on nowhere"),
])
def test_the_agent_tool_refuses_hostile_arguments_in_one_line(offline_context, args, refusal) -> None:
    import asyncio

    from betty_jupyter.agent.tools import ClusterEfficiency

    with pytest.raises(ToolError) as refused:
        asyncio.run(ClusterEfficiency().dry_run(offline_context, args))
    assert refusal in str(refused.value) and "\n" not in str(refused.value)


def test_the_agent_tools_preview_is_the_pinned_sacct_call(offline_context) -> None:
    import asyncio

    from betty_jupyter.agent.tools import ClusterEfficiency

    preview = asyncio.run(ClusterEfficiency().dry_run(offline_context, {"job_ids": ["12", "13_4"]}))
    assert preview.text.startswith("sacct --parsable2 --noheader '--delimiter=|' --format JobID,JobName,")
    assert "--jobs 12,13_4" in preview.text and SEPARATOR not in preview.text


def test_the_notebooks_view_escapes_job_names_and_draws_a_picture(monkeypatch) -> None:
    import betty_jupyter.notebook.display as shown
    from hostile import live_html, shown_text

    names = hostile("html") + ["$x^2$ \\frac{1}{0}"]  # mathematics for matplotlib: jobs are labelled by id alone
    text = "\n".join(job(str(60 + n), name=name) + "\n" + step(f"{60 + n}.batch", "1G") for n, name in enumerate(names))
    jobs = parse_efficiency(text)
    assert [found.name for found in jobs] == names
    data = {"jobs": [found.as_dict() for found in jobs], "right_sizing": {"line": names[0], "changes": {}}}
    displayed: list[object] = []
    monkeypatch.setattr(shown, "display", displayed.append)
    frame = shown.efficiency_frame(data)
    assert list(frame["job_id"]) == [found.job_id for found in jobs]
    frame._ipython_display_()
    table, picture = displayed
    assert live_html(table.data) == []
    assert all(name in shown_text(table.data) for name in names)  # shown as text, not dropped
    assert picture.data[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("argv", "error"), [
    (["--since", "yesterday"], "betty: error: since: 'yesterday' is neither a span (7d, 12h, 30m) nor a date"),
    (["--plot", "figures.txt"], "betty: error: --plot: 'figures.txt' is not a .png, .svg or .pdf file name"),
])
def test_betty_efficiency_refuses_bad_input_in_one_line(capsys, argv, error) -> None:
    from conftest import betty_in_process

    code, out, err = betty_in_process(capsys, "efficiency", *argv)
    assert code == 1 and out == "" and err.startswith(error) and err.count("\n") == 1
