"""Efficiency and right-sizing without a cluster: sacct's text as each Slurm version prints it, hostile job names,
and the right-sizing rules (the real jobs are in test_efficiency.py)."""

from __future__ import annotations

import pytest

from betty_jupyter.cluster.job_efficiency import (EFFICIENCY_FIELDS, JobEfficiency, parse_efficiency,
                                                      requested_memory, sacct_argv)
from betty_jupyter.advisor.rightsizing import MIN_RUNS, propose
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
    # The parser alone cannot split a row whose name holds Betty's separator, and leaves it out; a read through the
    # cluster never hands it one (tests/test_cluster_client.py::test_a_strangers_job_name_with_betty_s_separator…)
    if SEPARATOR not in name:
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

    from betty_jupyter.agent.tools.catalog import ClusterEfficiency

    with pytest.raises(ToolError) as refused:
        asyncio.run(ClusterEfficiency().dry_run(offline_context, args))
    assert refusal in str(refused.value) and "\n" not in str(refused.value)


def test_the_agent_tools_preview_is_the_pinned_sacct_call(offline_context) -> None:
    import asyncio

    from betty_jupyter.agent.tools.catalog import ClusterEfficiency

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


def accounting_rows(name: str) -> list[dict[str, str]]:
    """Two jobs and their steps as accounting records them, by sacct field name (blanks where not given)."""
    job_cells = {"Partition": "cpu", "ExitCode": "0:0", "Submit": "2026-11-25T03:00:00", "Start": "2026-11-25T03:00:05",
                 "End": "2026-11-25T03:01:45", "Elapsed": "00:01:40", "ElapsedRaw": "100", "Timelimit": "01:00:00",
                 "TimelimitRaw": "60", "NNodes": "1", "NCPUS": "4", "AllocCPUS": "4", "TotalCPU": "03:20.000",
                 "ReqMem": "8G", "ReqTRES": "billing=4,cpu=4,mem=8G,node=1", "AllocTRES": "billing=4,cpu=4,mem=8G,node=1",
                 "User": "ada", "Account": "lab", "NodeList": "node1", "WorkDir": "/home/ada", "Comment": "betty:1f2e"}
    return [
        {**job_cells, "JobID": "60", "JobIDRaw": "60", "JobName": name, "State": "COMPLETED"},
        {"JobID": "60.batch", "JobIDRaw": "60.batch", "JobName": "batch", "State": "COMPLETED", "MaxRSS": "1200M",
         "TRESUsageInMax": "cpu=00:01:00,mem=1200M", "ElapsedRaw": "100", "AllocCPUS": "4", "NCPUS": "4"},
        {**job_cells, "JobID": "61_2", "JobIDRaw": "63", "JobName": "train", "State": "OUT_OF_MEMORY"},
        {"JobID": "61_2.batch", "JobIDRaw": "63.batch", "JobName": "batch", "State": "OUT_OF_MEMORY", "MaxRSS": "8G"},
        {**job_cells, "JobID": "62", "JobIDRaw": "62", "JobName": "later", "State": "RUNNING", "End": "Unknown"},
    ]


def printed(records: list[dict[str, str]], fields) -> str:
    """What ``sacct --format`` ``fields`` prints of ``records``."""
    return "\n".join(SEPARATOR.join(record.get(field, "") for field, _ in fields) for record in records) + "\n"


@pytest.mark.parametrize("name", ["train", "two\nlines", "<img src=x onerror=1>", "a|b|c", f"x{SEPARATOR}y"])
def test_one_sacct_call_answers_the_history_and_the_efficiency_as_their_own_calls_would(name: str) -> None:
    import pandas as pd

    from betty_jupyter.cluster.parsing import SACCT_FIELDS, joined_fields, parse_history

    joined = joined_fields(SACCT_FIELDS, EFFICIENCY_FIELDS)
    assert len(joined) == len({field for field, _ in SACCT_FIELDS + EFFICIENCY_FIELDS}) < len(SACCT_FIELDS) + len(
        EFFICIENCY_FIELDS)  # the fields both read are asked for once
    records = accounting_rows(name)
    text = printed(records, joined)
    history = parse_history(text, joined)
    pd.testing.assert_frame_equal(history, parse_history(printed(records, SACCT_FIELDS)))
    assert parse_efficiency(text, joined) == parse_efficiency(printed(records, EFFICIENCY_FIELDS))
    found = {job.job_id: job for job in parse_efficiency(text, joined)}
    assert found["61_2"].memory_peak_bytes == 8 * GiB and "62" not in found  # still running: no figures yet
    if SEPARATOR in name:  # the parser alone cannot split that row, in either call: left out of both
        assert "60" not in found and list(history["job_id"]) == ["61_2", "62"]
    else:
        assert found["60"].name == name and found["60"].memory_peak_bytes == 1200 * MiB
        assert list(history["job_id"]) == ["60", "61_2", "62"] and history["name"][0] == name


def test_the_page_draws_the_earlier_runs_from_the_figures_recorded_when_they_ended(tmp_path) -> None:
    from betty_jupyter.experiments.efficiency import efficiency_records
    from betty_jupyter.experiments.ledger import Experiment, Ledger, StateChange

    ledger = Ledger(tmp_path / "ledger.sqlite")
    script = "#!/bin/bash\n#SBATCH --job-name=sized\n#SBATCH --mem=64G\ntrue\n"
    runs = [Experiment(slug=f"2026-11-25-sized-{n}", job_id=str(70 + n), cluster="dev", submitted="2026-11-25T01:00",
                       goal="sized", script=script, script_path=f"/s/{n}.sbatch") for n in range(4)]
    for experiment in runs:
        ledger.add(experiment)
    ledger.claim("watcher", 60)
    # The first two ended with their figures recorded; the third was recorded without any (accounting had none).
    figures = [{"job": run(experiment.job_id, (9 + n) * GiB).as_dict()} for n, experiment in enumerate(runs[:2])]
    assert ledger.record_states("watcher", [
        StateChange(experiment.slug, "COMPLETED", True, "", False, efficiency=figure)
        for experiment, figure in zip(runs[:3], figures + [None])]) == {experiment.slug for experiment in runs[:3]}
    assert ledger.get(runs[0].slug).experiment.efficiency == figures[0]
    ended = runs[3]
    records = efficiency_records(ledger, [ended], {ended.job_id: run(ended.job_id, 10 * GiB)})
    assert records[ended.slug]["runs"] == ["70", "71", "73"]
    assert "over 3 runs" in records[ended.slug]["right_sizing"]
    # Figures read now for a run win over those recorded for it (a peak that reached accounting late).
    fresh = efficiency_records(ledger, [ended], {ended.job_id: run(ended.job_id, 10 * GiB),
                                                 "70": run("70", 20 * GiB)})
    assert "peak 20GiB" in fresh[ended.slug]["right_sizing"]
    assert efficiency_records(ledger, [ended], {}) == {}  # no figures of its own: nothing recorded
