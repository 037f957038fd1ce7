"""A sweep that searches, on the real dev cluster, run as a person runs it: `betty sweep --search bayes` (one card,
approving later rounds within 12 tasks), then `betty sweeps next` round after round, each a new process that loads
the ledger and the study from disk. It finds a point near the known optimum with fewer tasks than the grid, stops
lagging tasks, runs rounds without a card within the approved budget and asks beyond it, and records every round."""

from __future__ import annotations

import json
import math
import re
import time

import pytest

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.search import Search, open_study, study_path, summarize
from betty_jupyter.experiments.sweep import Space
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.notebook.sweep import SweepView
from test_cli_cluster import betty, betty_env  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster

STEPS = 8
TOLERANCE = 1.5
"""How far above the optimum's loss the best task may be: the grid of the same ranges at one point per decade of lr
(5 × 7 × 2 = 70 tasks) has the optimum itself; the search runs 16."""
GRID_TASKS = 70


def _loss(point: dict[str, str]) -> float:
    """The task's final loss, less its last step's 1/STEPS: 0 at lr=1e-3 layers=5 opt=adam."""
    return (math.log10(float(point["lr"])) + 3) ** 2 + (int(point["layers"]) - 5) ** 2 / 4 + (point["opt"] == "sgd")


def test_a_bayes_search_finds_the_optimum_stops_lagging_tasks_and_asks_beyond_the_approved_budget(
        betty_env, dev_cluster, tmp_path):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    runs = tmp_path / "runs"
    runs.mkdir()
    script = tmp_path / "objective.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name=bowl\n#SBATCH --chdir={runs}\n#SBATCH --time=5\n"
        f"for step in $(seq 1 {STEPS}); do\n"
        "  awk -v lr=\"$lr\" -v l=\"$layers\" -v o=\"$opt\" -v s=\"$step\" 'BEGIN { x = log(lr) / log(10) + 3;"
        " printf \"step=%d loss=%.6f\\n\", s, x * x + (l - 5) * (l - 5) / 4 + (o == \"sgd\") + 1 / s }'\n"
        "  sleep 1\ndone\n")
    done = betty(betty_env, "sweep", str(script), "--grid", "lr=1e-5..1e-1:log", "layers=2..8", "opt=adam,sgd",
                 "--search", "bayes", "--budget", "16", "--batch", "4", "--objective", "loss:min",
                 "--early-stop", "median", "--approve-tasks", "12", "--yes", "--json", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    slug = json.loads(done.stdout)["page"].removeprefix("experiments/").removesuffix(".md")
    [first] = ActionLog(project).read()
    assert first.tool == "cluster_sweep" and "round 1 of a bayes search for the lowest loss" in first.preview.title
    assert "within 12 tasks" in first.preview.title and "#SBATCH --array=0-3" in first.preview.text

    ledger = Ledger(Workspace.at(project).ledger_path)
    beyond = ""
    deadline = time.monotonic() + 600  # a guard against a hang on a busy machine, not a measurement
    while len(ledger.get(slug).experiment.sweep["trials"]) < 16:
        assert time.monotonic() < deadline, ledger.get(slug).experiment.sweep
        submitted = len(ledger.get(slug).experiment.sweep["trials"])
        within = betty(betty_env, "sweeps", "next", slug, "--within-budget", "--yes", "--dir", str(project))
        if "beyond the budget approved" in within.stderr:
            assert submitted + 4 > 12 or ledger.get(slug).experiment.sweep.get("proposal"), within.stderr
            beyond = within.stderr
            asked = betty(betty_env, "sweeps", "next", slug, "--yes", "--dir", str(project))
            assert asked.returncode == 0 or "no round to run now" in asked.stderr, asked.stderr
        elif within.returncode != 0:
            assert "no round to run now" in within.stderr, within.stderr
            time.sleep(1)
    assert beyond, "no round went beyond the 12 approved tasks"

    # Every task ends; the last round tells the study about them (nothing is left to propose).
    while True:
        assert time.monotonic() < deadline
        last = betty(betty_env, "sweeps", "next", slug, "--yes", "--dir", str(project))
        assert "its budget of tasks is spent" in last.stderr or last.returncode == 0, last.stderr
        sweep = ledger.get(slug).experiment.sweep
        search = Search.from_json(sweep["search"])
        study = open_study(study_path(Workspace.at(project).state, slug), Space.parse(sweep["grid"]), search)
        summary = summarize(study, search, {n: n for n in range(16)})
        if all(trial.state != "RUNNING" for trial in summary.trials):
            break
        time.sleep(1)

    # Found near the optimum, with fewer tasks than the grid.
    points = [trial["point"] for trial in sweep["trials"]]
    assert len(points) == 16 < GRID_TASKS
    best = min(trial.value for trial in summary.trials if trial.value is not None)
    assert best - 1 / STEPS <= TOLERANCE, [(p, _loss(p)) for p in points]
    # Lagging tasks were stopped early, each with why, and told to the study as pruned, not scored.
    stopped = sweep.get("stopped") or {}
    assert stopped and all("median rule: loss=" in why for why in stopped.values()), sweep
    pruned = {trial.index for trial in summary.trials if trial.state == "PRUNED"}
    assert pruned == {int(index) for index in stopped}
    # Every round is recorded: its array, its tasks, its stops, and how it was approved.
    rounds = sweep["rounds"]
    assert sorted(index for step in rounds for index in step["tasks"]) == list(range(4, 16))
    approvals = {step["approved"] for step in rounds}
    assert approvals == {"within the approved budget", "card"}
    # Within the budget a round had no card; beyond it, a card listing its points (and any stops).
    records = [record for record in ActionLog(project).read() if record.tool == "sweep_round" and record.ok]
    assert {(record.tier, record.digest is None) for record in records} == {(0, True), (2, False)}
    assert all(record.args["within_budget"] for record in records if record.tier == 0)
    carded = [record for record in records if record.tier == 2]
    assert all(re.match(r"round \d+ of sweep .*: \d+ new task\(s\), \d+ to stop", r.preview.title) for r in carded)
    assert any(re.search(r"task \d+: lr=\S+ layers=\d opt=(adam|sgd)", str(r.preview)) for r in carded)
    # The comparison shows the search: on the page (once the watcher rewrote it), in `betty sweeps show` and the
    # notebook's view.
    page = project / "wiki" / f"experiments/{slug}.md"
    while "### Search" not in page.read_text() or "| best so far |" not in page.read_text():
        watched = betty(betty_env, "watch", "--once", "--dir", str(project))
        assert time.monotonic() < deadline, watched.stdout + watched.stderr + page.read_text()[-3000:]
        time.sleep(1)
    text = page.read_text()
    assert f"- round {rounds[-1]['round']}: tasks " in text and "approved by card" in text
    assert "median rule: loss=" in text
    shown = betty(betty_env, "sweeps", "show", slug, "--json", "--dir", str(project))
    assert shown.returncode == 0, shown.stderr
    view = SweepView(json.loads(shown.stdout))._repr_html_()
    assert "<b>Search</b>" in view and "best so far" in view and "pruned" in view
