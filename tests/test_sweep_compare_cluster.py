"""A sweep's comparison on the real dev cluster, as a person uses it: the tasks' metrics side by side on the page, in
`betty sweeps show` and the notebook's view; the failed tasks resubmitted by index only, once a person approved the
one card; a running sweep cancelled with one card."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import subprocess
import time
from typing import Any

import pytest

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.automations.babysitter import BABYSITTER_ID
from betty_jupyter.cluster.arrays import task_count
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.notebook.sweep import SweepView
from betty_jupyter.safe_text import markdown_html
from test_cli_cluster import betty, betty_env  # noqa: F401 (a fixture)
from kernel_driver import Kernel
from notebook_support import kernel, llm, project  # noqa: F401 (fixtures)
from test_babysitter import Betty, config, region, run_scenario, until, workspace  # noqa: F401 (fixtures)
from test_cli_terminal import OnTerminal

pytestmark = pytest.mark.cluster

HOSTILE_TAG = "<img src=x onerror=alert(1)>"
HOSTILE_LINES = ("echo '<img src=x onerror=alert(2)> <b>evil</b>=1 note=1<script>alert(3)</script> x=<b>2</b>'\n"
                 "printf 'ctl=\\033[31m7 \\033]0;pwned\\007 fine=3\\n'\n")
FAILING = {1, 7}  # lr=1e-4 seed=1 and lr=1e-3 seed=1: they fail the first time only


def _wait_for_page(env, project, page, text, deadline):
    said = ""
    while text not in (project / "wiki" / page).read_text():
        watched = betty(env, "watch", "--once", "--dir", str(project))
        said += watched.stdout + watched.stderr
        assert time.monotonic() < deadline, said[-3000:] + (project / "wiki" / page).read_text()[-3000:]
        time.sleep(0.5)
    return (project / "wiki" / page).read_text()


def _queued(env, *options) -> str:
    return subprocess.run(["squeue", "-h", "-r", "-o", "%i", *options], capture_output=True, text=True, env=env).stdout


def _accounted(env, array) -> dict[str, str]:
    """Each record accounting has of the array's tasks (``4242_3``, ``4242_[2-5]``): its state."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", array, "-o", "JobID,State"], capture_output=True, text=True,
                         env=env).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line.strip())


def _answer_card(monkeypatch, betty_env, argv, answer: bytes) -> tuple[int, str]:
    """`betty ARGV` on a terminal of its own: wait for its card's question, check nothing ran, type ``answer``."""
    for name in ("BETTY_CONFIG", "JUPYTER_CONFIG_DIR"):
        monkeypatch.setenv(name, betty_env[name])
    person = OnTerminal(f"import sys\nfrom betty_jupyter.cli import main\nsys.exit(main({argv!r}))\n")
    try:
        person.wait_for("[y/N] ", timeout=120)
        shown = person.seen
        os.write(person.screen, answer)
        code = person.process.wait(120)
        return code, shown
    finally:
        if person.process.poll() is None:
            person.process.kill()
            person.process.wait()
        os.close(person.screen)


def test_a_sweeps_tasks_are_compared_and_its_failed_tasks_resubmitted_by_index_after_approval(
        betty_env, dev_cluster, tmp_path, monkeypatch):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    runs = tmp_path / "runs"
    runs.mkdir()
    script = tmp_path / "train.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name=cmp-sweep\n#SBATCH --chdir={runs}\n#SBATCH --time=5\n"
        "i=$SLURM_ARRAY_TASK_ID\n"
        "for s in 1 2 3; do echo \"step=$((s * 10)) loss=$s.${i}5 acc=0.$s$i\"; done\n" + HOSTILE_LINES +
        "if [ \"$seed\" = 1 ] && [ \"$lr\" != 3e-4 ] && [ ! -e \"retried-$i\" ]; then\n"
        "  touch \"retried-$i\"; echo 'boom' >&2; exit 1\nfi\n")
    done = betty(betty_env, "sweep", str(script), "--grid", "lr=1e-4,3e-4,1e-3", "seed=0,1,2", f"tag={HOSTILE_TAG}",
                 "--at-once", "3", "--yes", "--json", "--dir", str(project), "--goal", "which learning rate")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    array, page_name = answer["job_id"], answer["page"]
    slug = page_name.removeprefix("experiments/").removesuffix(".md")
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    deadline = time.monotonic() + 300  # a guard against a hang on a busy machine, not a measurement

    # The watcher ends the sweep FAILED and writes its comparison on the page: every task, its metrics, its cause.
    page = _wait_for_page(betty_env, project, page_name, "9 tasks: 7 COMPLETED, 2 FAILED", deadline)
    assert "## Comparison" in page
    assert "| task | lr | seed | tag | state | runtime | efficiency | loss | acc | fine | notes |" in page
    for index in range(9):
        log = (runs / f"slurm-{array}_{index}.out").read_text()
        assert f"step=30 loss=3.{index}5 acc=0.3{index}\n" in log  # what the task printed …
        row = next(line for line in page.splitlines() if line.startswith(f"| {index} ({array}_{index}) |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] == ("FAILED" if index in FAILING else "COMPLETED")
        assert cells[7:10] == [f"{float(f'3.{index}5'):.6g}", f"{float(f'0.3{index}'):.6g}", "3"]  # … is shown
        assert ("Failed: the job failed with exit code" in cells[10]) == (index in FAILING)  # 1:0 once accounted
    # Hostile output and parameters are text: nothing renders as HTML, no control character reaches the page.
    table = page[page.index("## Comparison"):page.index("<!-- betty:auto-end")]
    assert "&lt;img src=x onerror=alert(1)&gt;" in table and "<" not in table and "evil" not in table
    rendered = markdown_html(page)  # the page as a person's browser gets it: the log and script are fenced text
    assert "<img" not in rendered and "<b>" not in rendered and "<script" not in rendered
    assert "\x1b" not in table + rendered and "\x07" not in table + rendered

    # `betty sweeps show`: each metric's whole series, exactly as printed; the notebook's view of the same data.
    shown = betty(betty_env, "sweeps", "show", slug, "--json", "--dir", str(project))
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    for task in data["tasks"]:
        i = task["index"]
        assert task["series"] == {"loss": [[10.0, float(f"1.{i}5")], [20.0, float(f"2.{i}5")], [30.0, float(f"3.{i}5")]],
                                  "acc": [[10.0, float(f"0.1{i}")], [20.0, float(f"0.2{i}")], [30.0, float(f"0.3{i}")]],
                                  "fine": [[1.0, 3.0]]}
    view = SweepView(data)
    html = view._repr_html_()
    assert view.comparison.failed() == sorted(FAILING) and "Failed: tasks 1, 7" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html and html.count("<b>") == 1  # its title
    assert "\x1b" not in html and "<script>" not in html
    curves, finals = view.figures()[:2]  # loss by step, a line per task; final loss by each parameter
    lines = {line.get_gid(): line for line in curves.axes[0].get_lines()}
    assert sorted(lines) == sorted(f"task-{i}" for i in range(9))
    assert list(lines["task-4"].get_ydata()) == [1.45, 2.45, 3.45] and list(lines["task-4"].get_xdata()) == [10, 20, 30]
    assert [axes.get_xlabel() for axes in finals.axes] == ["lr", "seed", "tag"]
    text = betty(betty_env, "sweeps", "show", slug, "--dir", str(project))
    assert "failed: tasks 1, 7; resubmit them with" in text.stdout and "\x1b" not in text.stdout

    # One card resubmits the failed tasks only; denied, nothing is submitted; nothing runs before the approval.
    retry = ["sweeps", "retry", slug, "--dir", str(project)]
    code, card = _answer_card(monkeypatch, betty_env, retry, b"n\n")
    assert code != 0 and f"resubmit tasks 1, 7 of sweep {slug} (job array {array})" in card
    assert "#SBATCH --array=1,7%3" in card and "--array=0-8" not in card
    assert _queued(env, "-n", "cmp-sweep").split() == [] and len(list(runs.glob("slurm-*.out"))) == 9
    assert "retries" not in Ledger(Workspace.at(project).ledger_path).get(slug).experiment.sweep
    (runs / f"slurm-{array}_0.out").unlink()  # a task whose output is gone keeps the values read before
    code, card = _answer_card(monkeypatch, betty_env, retry, b"y\n")
    assert code == 0 and "#SBATCH --array=1,7%3" in card
    [again] = Ledger(Workspace.at(project).ledger_path).get(slug).experiment.sweep["retries"]
    assert again["tasks"] == [1, 7]
    records = ActionLog(project).read()
    assert [(r.tool, r.decision.value) for r in records] == [("cluster_sweep", "approved"), ("sweep_retry", "denied"),
                                                             ("sweep_retry", "approved")]
    assert records[-1].approver == f"{getpass.getuser()} (betty sweeps)" and records[-1].args["tasks"] == [1, 7]

    # The same experiment follows the resubmission: every task completed, each failed one shown at its retry.
    page = _wait_for_page(betty_env, project, page_name, "9 tasks: 9 COMPLETED", deadline)
    retried = again["job_id"]
    for index in sorted(FAILING):
        row = next(line for line in page.splitlines() if line.startswith(f"| {index} ({retried}_{index}) |"))
        assert "| COMPLETED |" in row and f"retry of {array}_{index} FAILED" in row
        assert f"| {float(f'3.{index}5'):.6g} | {float(f'0.3{index}'):.6g} | 3 |" in row
    assert f"resubmitted by index as job array {retried}" in page
    row = next(line for line in page.splitlines() if line.startswith(f"| 0 ({array}_0) |"))
    assert "| 3.05 | 0.3 | 3 |" in row and "its values as read before" in row
    expected = sorted([f"{retried}_1|COMPLETED", f"{retried}_7|COMPLETED"])
    while (tasks := sorted(subprocess.run(["sacct", "-n", "-X", "-P", "-j", retried, "-o", "JobID,State"],
                                          capture_output=True, text=True, env=env).stdout.split())) != expected:
        assert time.monotonic() < deadline, tasks  # only tasks 1 and 7 ran again
        time.sleep(0.5)


def test_cancelling_a_sweep_is_one_card_that_cancels_every_task(betty_env, dev_cluster, tmp_path):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    script = tmp_path / "long.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name=long-sweep\n#SBATCH --chdir={tmp_path}\n#SBATCH --time=5\n"
                      "sleep 300\n")
    done = betty(betty_env, "sweep", str(script), "--grid", "seed=0,1,2,3,4,5", "--at-once", "2", "--yes", "--json",
                 "--dir", str(project))
    assert done.returncode == 0, done.stderr
    array = json.loads(done.stdout)["job_id"]
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    deadline = time.monotonic() + 120  # a guard against a hang on a busy machine, not a measurement
    # Cancelled while two tasks run and four wait (accounting then has the exit code the watcher waits for).
    while (running := sorted(_queued(env, "-t", "RUNNING", "-j", array).split())) != [f"{array}_0", f"{array}_1"]:
        assert time.monotonic() < deadline, running
        time.sleep(0.5)
    cancelled = betty(betty_env, "sweeps", "cancel", array, "--yes", "--dir", str(project))
    assert cancelled.returncode == 0, cancelled.stderr
    [record] = [r for r in ActionLog(project).read() if r.tool == "sweep_cancel"]
    assert record.tier == 2 and record.decision.value == "approved" and record.preview.text == f"scancel {array}"
    assert "6 tasks: 4 PENDING, 2 RUNNING" in record.preview.title
    rows = _accounted(env, array)  # every task cancelled, once accounting has caught up with each
    while _queued(env, "-j", array).strip() or sum(task_count(i) for i in rows) != 6 or not all(
            state.startswith("CANCELLED") for state in rows.values()):
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)
        rows = _accounted(env, array)
    page = _wait_for_page(betty_env, project, json.loads(done.stdout)["page"], "**CANCELLED**", deadline)
    assert "6 tasks: 6 CANCELLED" in page
    again = betty(betty_env, "sweeps", "cancel", array, "--yes", "--dir", str(project))
    assert again.returncode != 0 and "has no task queued or running; nothing to cancel" in again.stderr


def test_the_babysitter_proposes_the_failed_tasks_of_a_sweep_by_index_as_one_card(workspace, config, dev_cluster):
    runs = workspace.root / "runs"
    runs.mkdir()
    script = (f"#!/bin/bash\n#SBATCH --job-name=babysat-sweep\n#SBATCH --chdir={runs}\n#SBATCH --time=5\n"
              "echo \"loss=0.$SLURM_ARRAY_TASK_ID\"\n"
              "if [ \"$seed\" = 1 ] && [ ! -e \"retried-$SLURM_ARRAY_TASK_ID\" ]; then\n"
              "  touch \"retried-$SLURM_ARRAY_TASK_ID\"; exit 3\nfi\n")
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}

    async def scenario() -> None:
        betty = Betty(workspace, config)
        try:
            assert betty.runner.resume(BABYSITTER_ID).status == "idle"
            desk = await betty.assistant.session("test-desk")
            call = asyncio.ensure_future(desk.run_tool("cluster_sweep", {
                "script": script, "grid": ["lr=1e-4,1e-3", "seed=0,1,2"], "at_once": 2, "goal": "which rate"},
                "a test"))
            card = (await until("the sweep's card", lambda: betty.cards(None)))[0]
            betty.assistant.respond(card.approval_id, "approved", "the researcher")
            sweep = (await call).data
            task = f"job babysitter: job {sweep.job_id}"
            [card] = await until("the babysitter's card", lambda: betty.cards(task))
            # One card: the failed tasks by index, the same script, its limit at once kept; nothing runs before it.
            assert (card.tool, card.tier, card.args) == ("sweep_retry", 2, {"experiment": sweep.slug, "tasks": [1, 4]})
            assert card.preview.text == sweep.script.replace("#SBATCH --array=0-5%2", "#SBATCH --array=1,4%2")
            assert card.preview.title.startswith(f"resubmit tasks 1, 4 of sweep {sweep.slug}")
            assert "task 1: lr=1e-4 seed=1\ntask 4: lr=1e-3 seed=1" == card.preview.details["points"]
            assert betty.cards() == [card] and _queued(env, "-n", "babysat-sweep").split() == []
            assert "retries" not in betty.experiment(sweep.slug).sweep
            shown = region(workspace, sweep)
            assert "Resubmitting tasks 1, 4 waits for a person's approval" in shown and "## Comparison" in shown
            betty.assistant.respond(card.approval_id, "approved", "the researcher")
            step = await until("the resubmission", lambda: (betty.experiment(sweep.slug).diagnosis or {})
                               .get("resubmission", {}).get("state") == "submitted"
                               and betty.experiment(sweep.slug).diagnosis["resubmission"])
            [retry] = betty.experiment(sweep.slug).sweep["retries"]
            assert retry["tasks"] == [1, 4] and retry["job_id"] == step["job_id"]
            # The same experiment follows the resubmission to its end: every task completed.
            await until("the sweep to end again", lambda: betty.ledger.get(sweep.slug).finished
                        and betty.ledger.get(sweep.slug).state == "COMPLETED")
            shown = region(workspace, sweep)
            assert "6 tasks: 6 COMPLETED" in shown and f"| 4 ({retry['job_id']}_4) |" in shown
            assert f"Tasks 1, 4 resubmitted as job array {retry['job_id']}, the same script, approved by the " \
                   "researcher." in shown
            assert len(betty.ledger.all()) == 1  # one experiment, its retry recorded on it
        finally:
            await betty.close()

    run_scenario(scenario)


def test_betty_sweep_in_a_notebook_shows_the_comparison_escaped_with_its_plots(kernel: Kernel) -> None:
    script = ("#!/bin/bash\n#SBATCH --job-name=nb-compare\n#SBATCH --time=5\n#SBATCH --mem=100M\n"
              "for s in 1 2; do echo \"loss=$s.$SLURM_ARRAY_TASK_ID\"; done\n" + HOSTILE_LINES)
    cell = kernel.run(f"%%betty sweep --grid lr=1e-4,<b>x</b> --goal 'compare in a notebook'\n{script}")
    root = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0])
    array = kernel.wait_for(lambda: re.search(r"as job array (\d+)", kernel.texts(root)), what="the id").group(1)

    def compared() -> Any:
        shown = kernel.run(f"%betty sweep {array}")
        html = "".join(item.get("text/html", "") for item in shown.displays)
        return (shown, html) if html.count(">COMPLETED<") == 2 else None

    shown, html = kernel.wait_for(compared, timeout=180, what="both tasks completed in the comparison")
    assert shown.status == "ok" and not shown.stderr and shown.errors == []
    assert "<th>loss</th><th>fine</th>" in html and "<td>2</td>" in html and "<td>2.1</td>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x" not in html and "<img" not in html and "\x1b" not in html
    pictures = [item for item in shown.displays if "image/png" in item]
    assert len(pictures) == 4  # for loss and for fine: the curves by step, the final value by parameter
