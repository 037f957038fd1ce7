"""The plan drawer of the side panel, in Debian's Chromium against the real dev cluster.

The scripted model proposes a 4-step plan (read the partitions, estimate GPU memory, submit, follow the job). The person
finds every step in one drawer with its own preview; denies the estimate and sees the submission and the status
marked as not going to run, grants it again; edits the submission (a wrong partition is refused with one line and
nothing typed is lost; a real partition and a shorter time limit are checked and previewed again); denies the status step; and executes.
The drawer follows each step to its end; the action log shows the executed calls with exactly the granted
arguments, and the denied step never ran. Hostile text from the model stays text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, Step, call, respond, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Locator, Page, expect
from test_server_support import job_state, scancel

from betty_jupyter.agent.actions import ActionLog

HOSTILE = "<img src=x onerror=\"document.title='owned'\">"
TRAIN = """#!/bin/bash
#SBATCH --job-name=plan-drawer
#SBATCH --time=00:10:00
#SBATCH --mem=100M
echo "step=1 loss=1.9"
"""
ESTIMATE = {"model": "Llama-3.1-8B", "method": "lora", "batch_size": 4, "seq_len": 512, "gpu": "h100"}
UNKNOWN_YET = "99999999"
"""The model cannot know the job id when it plans: a number above Slurm's largest job id stands in for it."""


def granted(index: int, tool: str) -> Step:
    """The model calls plan step ``index`` with exactly the arguments the person's answer granted, as it was told."""
    def choose(request: dict[str, Any]) -> Step:
        told = next(m["content"] for m in request["messages"]
                    if m["role"] == "tool" and "The person answered the plan" in m["content"])
        line = next(each for each in told.splitlines() if each.startswith(f"step {index} {tool} "))
        return call(tool, json.loads(line.split("call it with exactly ", 1)[1]))
    return respond(choose)


def test_the_plan_drawer_grants_denies_and_edits_steps_and_runs_exactly_what_was_granted(
        lab: JupyterServer, llm: ScriptedLLM, project: dict[str, Any], dev_cluster: dict[str, str],  # noqa: F811
        page: Page) -> None:  # noqa: F811
    root = Path(project["root"])
    read = {"command": "sinfo -s"}
    submit = {"script": TRAIN, "goal": "LoRA on 500 examples", "name": "plan-drawer"}
    llm.add(call("propose_plan", {"goal": f"fine-tune Llama 3.1 8B {HOSTILE}", "steps": [
        {"tool": "cluster_run", "args": read},
        {"tool": "gpu_estimate", "args": ESTIMATE},
        {"tool": "cluster_submit", "args": submit, "depends_on": [1, 2]},
        {"tool": "cluster_status", "args": {"job_id": UNKNOWN_YET}, "depends_on": [3]}]}),
        granted(1, "cluster_run"), granted(2, "gpu_estimate"), granted(3, "cluster_submit"),
        call("cluster_status", {"job_id": UNKNOWN_YET}),  # the denied step: refused, never run
        say("Submitted; step 4 was denied, so I did not follow the job."))
    job_id: str | None = None
    with screenshot_on_failure(page, "failure", prefix="plan"):
        try:
            panel = open_the_panel(page, lab)
            panel.get_by_test_id("betty-prompt").fill("Fine-tune Llama 3.1 8B with LoRA and tell me when it starts.")
            panel.get_by_test_id("betty-send").click()
            drawer = panel.locator('[data-testid="betty-approval-card"][data-tool="propose_plan"]')
            expect(drawer).to_have_attribute("data-status", "pending")
            steps = drawer.get_by_test_id("betty-plan-step")
            expect(steps).to_have_count(4)
            assert [s.get_attribute("data-tool") for s in steps.all()] == [
                "cluster_run", "gpu_estimate", "cluster_submit", "cluster_status"]
            expect(panel.get_by_test_id("betty-plan")).to_have_count(0)  # the plan is its drawer, not a note too
            expect(step(drawer, 3).get_by_test_id("betty-plan-needs")).to_have_text("needs step 1, 2")
            expect(step(drawer, 3).get_by_test_id("betty-preview")).to_have_attribute("data-kind", "script")
            expect(step(drawer, 1).get_by_test_id("betty-preview")).to_contain_text("sinfo -s")

            deny_and_grant_again(drawer)
            edit_the_submission(page, drawer)
            step(drawer, 4).get_by_test_id("betty-plan-step-deny").click()
            expect(step(drawer, 4)).to_have_attribute("data-state", "denied")
            expect(step(drawer, 3)).to_have_attribute("data-state", "edited")
            drawer.get_by_test_id("betty-plan-execute").scroll_into_view_if_needed()
            screenshot(page, "1-answered", prefix="plan")
            drawer.get_by_test_id("betty-plan-execute").click()

            expect(drawer.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "edited")
            expect(drawer.get_by_test_id("betty-plan-execute")).to_have_count(0)
            expect(panel.get_by_test_id("betty-message-assistant").last).to_contain_text("Submitted; step 4")
            assert [s.get_attribute("data-state") for s in steps.all()] == ["done", "done", "done", "denied"]
            expect(step(drawer, 3).get_by_test_id("betty-plan-progress")).to_contain_text(
                "granted as edited → executing → done")
            summary = step(drawer, 3).get_by_test_id("betty-plan-summary").inner_text()
            found = re.search(r"submitted job (\d+)", summary)
            assert found, summary
            job_id = found.group(1)
            folded = step(drawer, 3).locator("details.betty-PlanDrawer-folded")
            expect(folded).not_to_have_attribute("open", "")  # once answered, a step's preview folds to its title
            drawer.evaluate("drawer => drawer.scrollIntoView({block: 'start'})")
            screenshot(page, "2-progress", prefix="plan")
            assert drawer.locator("img[src], [onerror]").count() == 0, "the model's HTML is text"
        finally:
            if job_id is not None and job_state(dev_cluster, job_id):
                scancel(dev_cluster, job_id)
    assert page.title() != "owned", "the model's HTML never ran"

    logged = ActionLog(root).read()
    # After the plan's answer (the partition field's own read of the partitions comes before it).
    records = logged[[r.tool for r in logged].index("propose_plan") + 1:]
    ran = {r.tool: r for r in records if r.ok}
    assert set(ran) == {"cluster_run", "gpu_estimate", "cluster_submit"}, [(r.tool, r.decision) for r in records]
    assert ran["cluster_run"].args["command"] == read["command"]
    assert {k: ran["gpu_estimate"].args[k] for k in ESTIMATE} == ESTIMATE
    edited = TRAIN.replace("#SBATCH --time=00:10:00", "#SBATCH --time=00:05:00").replace(
        "--job-name=plan-drawer\n", "--job-name=plan-drawer\n#SBATCH --partition=cpu\n")
    assert ran["cluster_submit"].decision == "edited"
    assert ran["cluster_submit"].args["script"] == edited, "what ran is the edit as checked, exactly"
    assert ran["cluster_submit"].args["goal"] == submit["goal"] and ran["cluster_submit"].args["name"] == "plan-drawer"
    (status,) = [r for r in records if r.tool == "cluster_status"]
    assert status.decision == "refused" and not status.ok, "the denied step was refused, never run"
    assert [r.decision for r in logged if r.tool == "propose_plan"] == ["edited"]


def step(drawer: Locator, index: int) -> Locator:
    """Step ``index`` of the plan drawer."""
    return drawer.locator(f'[data-testid="betty-plan-step"][data-index="{index}"]')


def deny_and_grant_again(drawer: Locator) -> None:
    """Deny on the estimate: the steps that need it (directly or not) will not run; Grant undoes it."""
    step(drawer, 2).get_by_test_id("betty-plan-step-deny").click()
    expect(step(drawer, 2)).to_have_attribute("data-state", "denied")
    expect(step(drawer, 3)).to_have_attribute("data-state", "will_not_run")
    expect(step(drawer, 4)).to_have_attribute("data-state", "will_not_run")
    expect(step(drawer, 4).get_by_test_id("betty-plan-state")).to_have_text(
        "will not run: needs step 3, which will not run")
    step(drawer, 2).get_by_test_id("betty-plan-grant").click()
    for index in (2, 3, 4):
        expect(step(drawer, index)).to_have_attribute("data-state", "approved")


def edit_the_submission(page: Page, drawer: Locator) -> None:
    """Edit arguments on the submission: the single card's editor; a wrong partition is refused in one line and
    what was typed stays; the partition field and the time field's edit is checked and previewed again, then kept."""
    submission = step(drawer, 3)
    submission.get_by_test_id("betty-plan-edit").click()
    form = submission.get_by_test_id("betty-edit-form")
    editor = form.get_by_test_id("betty-edit-script").locator(".cm-editor")
    expect(editor.locator(".cm-line", has_text="#SBATCH --time=00:10:00")).to_have_count(1)
    expect(drawer.get_by_test_id("betty-plan-execute")).to_be_disabled()  # not while a step is being edited
    status = form.get_by_test_id("betty-edit-status")
    expect(status).to_have_attribute("data-state", "ready")

    editor.locator(".cm-line", has_text="#SBATCH --job-name=plan-drawer").click()
    page.keyboard.press("End")
    page.keyboard.insert_text("\n#SBATCH --partition=no-such")
    expect(status).to_have_attribute("data-state", "refused")
    expect(status).to_contain_text("step 3 (cluster_submit): the edited call is refused")
    expect(status).to_contain_text("partition 'no-such' does not exist")
    assert "\n" not in status.inner_text().strip(), "one line"
    expect(form.get_by_test_id("betty-edit-send")).to_be_disabled()
    expect(editor.locator(".cm-line", has_text="#SBATCH --partition=no-such")).to_have_count(1)
    submission.scroll_into_view_if_needed()
    screenshot(page, "3-refused-edit", prefix="plan")

    form.get_by_test_id("betty-edit-partition").select_option("cpu")
    expect(editor.locator(".cm-line", has_text="#SBATCH --partition=cpu")).to_have_count(1)
    form.get_by_test_id("betty-edit-time").fill("00:05:00")
    expect(editor.locator(".cm-line", has_text="#SBATCH --time=00:05:00")).to_have_count(1)
    expect(status).to_have_attribute("data-state", "ready")
    repreview = form.get_by_test_id("betty-edit-preview")
    expect(repreview.locator(".betty-Preview-line", has_text="#SBATCH --time=00:05:00")).to_have_count(1)
    form.get_by_test_id("betty-edit-send").click()
    expect(submission).to_have_attribute("data-state", "edited")
    expect(submission.get_by_test_id("betty-preview").locator(
        ".betty-Preview-line", has_text="#SBATCH --time=00:05:00")).to_have_count(1)
