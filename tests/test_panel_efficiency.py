"""Finished recently rows show what each job used of what it asked for, in Debian's Chromium against the dev
cluster: a job with a hostile name that touches 300 MiB of its 1 GiB shows the figures Betty's own sacct reading
gives, its name stays text, and nothing it names runs."""

from __future__ import annotations

import os
import subprocess

from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect

NAME = "<img src=x onerror=\"document.title='owned'\">|used"
JOB = "python3 -c 'import time; x = bytearray(300 * 2**20); x[::4096] = b\"x\" * len(x[::4096]); time.sleep(6)'"


def test_a_finished_row_shows_cpu_memory_and_time_used_of_the_request(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page, tmp_path) -> None:  # noqa: F811
    made = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null", "--time=2", "--mem=1G",
         f"--job-name={NAME}", "--wrap", JOB],
        capture_output=True, text=True, timeout=60, env={**os.environ, **dev_cluster}, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip().split(";")[0]
    with screenshot_on_failure(page, "failure", prefix="efficiency"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-jobs").click()
        # The tab refreshes itself while shown; the row comes once accounting records the end, its badge once
        # accounting has the step's peak.
        row = panel.locator(f'[data-testid="betty-finished-row"][data-job-id="{job_id}"][data-state="COMPLETED"]')
        expect(row).to_have_count(1)
        badge = row.get_by_test_id("betty-efficiency")
        expect(badge).to_contain_text("mem")
        figures = read_figures(dev_cluster, job_id)
        expect(badge.get_by_test_id("betty-efficiency-mem")).to_contain_text(f"mem {figures['memory']}%")
        expect(badge.get_by_test_id("betty-efficiency-CPU")).to_contain_text(f"CPU {figures['cpu']}%")
        expect(badge.get_by_test_id("betty-efficiency-time")).to_contain_text(f"time {figures['time']}%")
        assert 29 <= figures["memory"] <= 34, figures  # 300 MiB and the interpreter, of 1 GiB
        assert "of 1.0 GiB asked" in (badge.get_attribute("title") or "")
        expect(row).to_contain_text(NAME.replace('"', "`"))  # the name is text (accounting stores " as `)
        row.scroll_into_view_if_needed()
        screenshot(page, "finished-row", prefix="efficiency")
    assert page.title() != "owned", "the job name's HTML never ran"


def read_figures(dev_cluster: dict[str, str], job_id: str) -> dict[str, int]:
    """The job's figures in percent, as Betty's own sacct reading gives them (what the badge must show)."""
    from betty_jupyter.cluster.job_efficiency import parse_efficiency, sacct_argv

    out = subprocess.run(sacct_argv([job_id]), capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, **dev_cluster}).stdout
    (job,) = parse_efficiency(out)
    assert job.cpu_efficiency is not None and job.memory_efficiency is not None and job.time_efficiency is not None
    return {"cpu": round(job.cpu_efficiency * 100), "memory": round(job.memory_efficiency * 100),
            "time": round(job.time_efficiency * 100)}
