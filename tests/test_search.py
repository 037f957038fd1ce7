"""A sweep that searches, without a cluster: the parameters' ranges, each round's points and stops from a made-up
set of results, a task that printed nothing, the study read back after a restart, and the budget rule."""

from __future__ import annotations

import math

import pytest

from betty_jupyter.errors import UsageError
from betty_jupyter.experiments.search import (Objective, Observation, Round, Search, first_points, open_study,
                                              plan_round, study_path, summarize, within_consent)
from betty_jupyter.experiments.sweep import Grid, Space, own_script, recorded_grid, sweep_script


def test_ranges_and_values_are_one_parser() -> None:
    space = Space.parse(["lr=1e-5..1e-2:log", "layers=2..8", "opt=adam,sgd"])
    assert space.names == ("lr", "layers", "opt")
    lr, layers, opt = space.parameters
    assert (lr.low, lr.high, lr.log, lr.whole) == (1e-5, 1e-2, True, False)
    assert (layers.low, layers.high, layers.whole) == (2, 8, True)
    assert opt.values == ("adam", "sgd")
    assert Space.parse(space.words()) == space
    # In a grid, a whole-number range is each of its numbers.
    assert [p["layers"] for p in Grid.parse(["layers=2..4"]).points()] == ["2", "3", "4"]


@pytest.mark.parametrize("words, says", [
    (["lr=1e-5..1e-2:log"], "a range of decimals"),
    (["lr=0..1:log"], "a log range needs a LOW above 0"),
    (["lr=3..1"], "LOW below HIGH"),
    (["layers=1..5000"], "spans more than"),
])
def test_a_range_a_grid_cannot_run_is_one_line(words: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=says) as refused:
        Grid.parse(words)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("make, says", [
    (lambda: Search("annealing", 10, Objective("loss"), 2), "--search"),
    (lambda: Search("bayes", 0, Objective("loss"), 1), "--budget"),
    (lambda: Search("bayes", 4, Objective("loss"), 5), "--batch"),
    (lambda: Search("bayes", 4, Objective("loss"), 2, "sometimes"), "--early-stop"),
    (lambda: Objective.parse("loss:lowest"), "--objective"),
    (lambda: Objective.parse("$(rm -rf ~):min"), "--objective"),
])
def test_a_search_betty_cannot_run_is_one_line(make, says: str) -> None:
    with pytest.raises(UsageError, match=says) as refused:
        make()
    assert "\n" not in str(refused.value)


def _loss(point: dict[str, str], step: int) -> float:
    """The made-up task: a bowl around x=1, lower with each step."""
    return (float(point["x"]) - 1) ** 2 + 1 / step


def _observe(points: dict[int, dict[str, str]], states: dict[int, str], steps: dict[int, int]) -> list[Observation]:
    return [Observation(index, index, states[index],
                        tuple((float(s), _loss(point, s)) for s in range(1, steps[index] + 1)))
            for index, point in points.items()]


def test_each_round_tells_what_ended_proposes_the_next_points_and_stops_a_lagging_task(tmp_path) -> None:
    space = Space.parse(["x=-4..6", "opt=a,b"])
    search = Search("bayes", 8, Objective.parse("loss:min"), 3, "median", seed=7)
    path = study_path(tmp_path, "s")
    first = plan_round(open_study(path, space, search), space, search, [])
    assert first.points == tuple(first_points(space, search)) and not first.stops
    points = dict(first.points)
    # Two tasks ended; the third runs far from the others' values: a round stops it and proposes three points.
    points[0], points[1], points[2] = {"x": "1", "opt": "a"}, {"x": "2", "opt": "b"}, {"x": "-4", "opt": "a"}
    observed = _observe(points, {0: "COMPLETED", 1: "COMPLETED", 2: "RUNNING"}, {0: 5, 1: 5, 2: 3})
    study = open_study(path, space, search)  # the study as a restarted Betty loads it from its file
    second = plan_round(study, space, search, observed)
    assert [stop.index for stop in second.stops] == [2]
    assert "median rule: loss=25.3333 at step 3" in second.stops[0].why
    assert [trial for trial, _ in second.points] == [3, 4, 5]
    assert all(-4 <= float(point["x"]) <= 6 and point["opt"] in ("a", "b") for _, point in second.points)
    summary = summarize(open_study(path, space, search), search, {n: n for n in range(6)})
    assert [(t.index, t.state) for t in summary.trials][:2] == [(0, "COMPLETE"), (1, "COMPLETE")]
    assert summary.trials[0].value == pytest.approx(0.2)
    assert summary.best_so_far[:2] == (pytest.approx(0.2), pytest.approx(0.2))


def test_a_task_that_printed_no_loss_fails_its_trial_and_is_never_scored(tmp_path) -> None:
    space = Space.parse(["x=-4..6"])
    search = Search("random", 4, Objective.parse("loss:min"), 2, seed=1)
    path = study_path(tmp_path, "s")
    plan_round(open_study(path, space, search), space, search, [])
    observed = [Observation(0, 0, "COMPLETED", ()), Observation(1, 1, "COMPLETED", ((1.0, 0.5),))]
    plan_round(open_study(path, space, search), space, search, observed)
    summary = summarize(open_study(path, space, search), search, {0: 0, 1: 1})
    assert [(t.state, t.value, t.why) for t in summary.trials] == [("FAIL", None, "no loss printed"),
                                                                  ("COMPLETE", 0.5, "")]


def test_a_round_keeps_to_the_budget_and_a_grid_search_to_its_points(tmp_path) -> None:
    space = Space.parse(["layers=2..3", "opt=a,b"])
    grid = Search("grid", 10, Objective.parse("acc:max"), 3, seed=2)
    path = study_path(tmp_path, "g")
    first = plan_round(open_study(path, space, grid), space, grid, [])
    done = [Observation(n, n, "COMPLETED", ((1.0, 0.5),)) for n, _ in first.points]
    second = plan_round(open_study(path, space, grid), space, grid, done)
    assert len(second.points) == 1  # four points in all
    seen = {tuple(p.values()) for _, p in (*first.points, *second.points)}
    assert seen == {("2", "a"), ("2", "b"), ("3", "a"), ("3", "b")}
    small = Search("random", 3, Objective.parse("loss:min"), 2, seed=2)
    path = study_path(tmp_path, "r")
    first = plan_round(open_study(path, space, small), space, small, [])
    done = [Observation(n, n, "COMPLETED", ((1.0, 0.5),)) for n, _ in first.points]
    assert len(plan_round(open_study(path, space, small), space, small, done).points) == 1


def test_later_rounds_run_without_a_card_only_within_the_approved_tasks_and_gpu_hours() -> None:
    asked = Search("bayes", 20, Objective("loss"), 4)
    assert not within_consent(asked, 4, 4, 1, 60)
    approved = Search("bayes", 20, Objective("loss"), 4, consent_tasks=12, consent_gpu_hours=10)
    assert within_consent(approved, 4, 4, 1, 60)       # 8 tasks, 8 GPU-hours
    assert not within_consent(approved, 8, 5, 1, 60)   # 13 tasks
    assert not within_consent(approved, 8, 4, 1, 120)  # 24 GPU-hours
    assert not within_consent(approved, 4, 4, 1, None)  # no time limit: GPU-hours unbounded
    assert within_consent(approved, 4, 4, 0, None)      # no GPU asked


def test_a_later_round_runs_the_persons_script_with_only_its_points() -> None:
    script = "#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH --time=5\npython t.py --x \"$x\"\n"
    first = sweep_script(script, Grid.listed(["x"], [{"x": "1"}, {"x": "it's $(touch y)"}]), 2)
    later = sweep_script(own_script(first), Grid.listed(["x"], [{"x": "0.5"}]), 2, first=2)
    assert "#SBATCH --array=2-2%2" in later and "  2) x=0.5 ;;" in later and "0)" not in later
    assert later.count("# Betty's sweep") == 1 and later.endswith('python t.py --x "$x"\n')
    assert "x='it'\"'\"'s $(touch y)'" in first


def test_a_searchs_record_lists_its_tasks_points_in_order() -> None:
    record = {"grid": ["x=0..1", "opt=a,b"], "search": {"method": "bayes"},
              "trials": [{"trial": 0, "point": {"x": "0.5", "opt": "a"}},
                         {"trial": 1, "point": {"x": "0.1", "opt": "b"}}]}
    grid = recorded_grid(record)
    assert len(grid) == 2 and grid.points()[1] == {"x": "0.1", "opt": "b"}
    assert len(recorded_grid({"grid": ["x=0..1"], "search": {"method": "bayes"}})) == 0
    assert math.isclose(float(grid.points()[0]["x"]), 0.5)


def test_the_pages_search_section_lists_every_round_and_trial_escaped() -> None:
    from betty_jupyter.experiments.sweep_page import search_section

    hostile = "<img src=x onerror=alert(1)> | `id`"
    sweep = {"search": {"method": "bayes"}, "stopped": {"1": f"median rule: {hostile}"},
             "rounds": [{"round": 2, "job_id": "4251", "tasks": [2, 3], "stops": [{"index": 1, "why": "…"}],
                         "approved": "within the approved budget"}],
             "summary": {"objective": "loss:min", "best_so_far": [0.5, 0.5, 0.25, 0.25],
                         "trials": [{"index": 0, "value": 0.5, "state": "COMPLETE", "why": ""},
                                    {"index": 1, "value": None, "state": "PRUNED", "why": ""},
                                    {"index": 2, "value": 0.25, "state": "COMPLETE", "why": ""},
                                    {"index": 3, "value": None, "state": "FAIL", "why": "no loss printed"}],
                         "importance": {"lr": 0.8, "opt": 0.2}}}
    text = search_section(sweep)
    assert "### Search" in text and "- round 2: tasks 2, 3 (job array 4251), stopped 1; approved by within the " \
                                     "approved budget" in text
    assert "| 2 | 0.25 | 0.25 | complete |  |" in text and "| 3 |  | 0.25 | fail | no loss printed |" in text
    assert "<img" not in text and "\\| \\`id\\`" in text
    assert "parameter importance (Optuna): lr 0.8, opt 0.2" in text
    assert search_section({"grid": ["lr=1,2"]}) == ""


def test_a_round_is_claimed_once_however_many_calls_ask_for_it_at_the_same_moment() -> None:
    """Two calls that read the same proposed round: the first claims it in the ledger's transaction, the second
    changes nothing (and is refused); a claim left by a process that ended lapses; a round run clears it."""
    from betty_jupyter.agent.tools.sweep import CLAIM_SECONDS, SUBMITTING, _claimed, record_round

    proposal = Round(points=((4, {"lr": "0.001"}),), stops=()).to_json()
    sweep = {"proposal": proposal, "trials": [{"trial": n} for n in range(4)]}
    first = _claimed(proposal, 1000.0, sweep)
    assert first is not None and first[SUBMITTING] == 1000.0
    assert _claimed(proposal, 1001.0, first) is None, "a second call submits nothing"
    assert _claimed({**proposal, "points": []}, 1001.0, sweep) is None, "a round no longer proposed is not claimed"
    assert _claimed(proposal, 1000.0 + CLAIM_SECONDS, first) is not None, "a claim cut off by an ended process lapses"
    done = record_round(first, {"round": 2, "tasks": [4]}, Round.from_json(proposal))
    assert SUBMITTING not in done and "proposal" not in done and len(done["trials"]) == 5
