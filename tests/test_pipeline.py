"""Pipelines read from Slurm's states, pure: each step's edges, outcome and the steps left waiting on a failure."""

from __future__ import annotations

from datetime import datetime

import pytest

from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.cluster.pipeline import Step, card, checked_steps, dependency_options, linear, step_outcomes, \
    stranded
from betty_jupyter.errors import UsageError
from betty_jupyter.experiments.chain_page import page_section, status_words
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.experiments.pipeline import pipeline_text

STEPS = [{"name": "prep", "after": [], "job_id": "11"}, {"name": "train", "after": ["prep"], "job_id": "12"},
         {"name": "eval", "after": ["train"], "job_id": "13"}]


def job(ident: str, state: str, reason: str | None = None) -> Job:
    ended = datetime(2026, 1, 2, 3, 4, 5) if JobState(state).finished else None
    return Job(ident, "x", "me", "cpu", JobState(state), reason=reason, ended=ended)


def test_each_step_runs_after_the_one_before_unless_told_otherwise() -> None:
    assert linear(["prep", "train", "eval"], {"eval": ("prep", "train")}) == {
        "prep": (), "train": ("prep",), "eval": ("prep", "train")}
    assert dependency_options([]) == []
    assert dependency_options(["11", "12"]) == ["--dependency=afterok:11:12", "--kill-on-invalid-dep=yes"]
    shown = card([Step("prep", ""), Step("train", "", ("prep",))])
    assert shown["edges"] == "prep starts at once; train after prep (--dependency=afterok)"
    assert "cancels" in shown["when a step fails"]


@pytest.mark.parametrize(("steps", "refusal"), [
    ([Step("prep", "")], "2 to 20 steps"),
    ([Step("prep", ""), Step("prep", "")], "two steps are named 'prep'"),
    ([Step("prep", "", ("train",)), Step("train", "")], "'train', which is not an earlier step"),
    ([Step("a b", ""), Step("c", "")], "step name 'a b'"),
])
def test_a_pipeline_that_cannot_run_is_refused_in_one_line(steps, refusal) -> None:
    with pytest.raises(UsageError, match=refusal):
        checked_steps(steps)


def test_a_failed_step_leaves_the_later_steps_not_run_and_ends_the_pipeline() -> None:
    jobs = {"11": job("11", "FAILED"), "12": job("12", "CANCELLED"), "13": job("13", "CANCELLED")}
    records, ended = step_outcomes(STEPS, jobs)
    assert [r["why"] for r in records] == ["failed", "not run: prep failed", "not run: train did not finish"]
    assert ended == "failed"


def test_a_pipeline_goes_on_while_a_step_waits_and_is_done_when_every_step_is() -> None:
    running = {"11": job("11", "COMPLETED"), "12": job("12", "RUNNING"), "13": job("13", "PENDING")}
    records, ended = step_outcomes(STEPS, running)
    assert ([r["why"] for r in records], ended) == (["done", "running", "waiting"], None)
    done = {ident: job(ident, "COMPLETED") for ident in ("11", "12", "13")}
    assert step_outcomes(STEPS, done)[1] == "done"


def test_steps_waiting_on_a_failed_step_are_the_ones_betty_cancels() -> None:
    jobs = {"11": job("11", "FAILED"), "12": job("12", "PENDING", "DependencyNeverSatisfied"),
            "13": job("13", "PENDING", "Dependency")}
    assert stranded(STEPS, jobs) == ["12"]
    assert stranded(STEPS, {"11": job("11", "COMPLETED"), "12": job("12", "PENDING", "Dependency")}) == []


def test_the_page_and_status_line_name_every_step_and_its_edges() -> None:
    records, ended = step_outcomes(STEPS, {"11": job("11", "COMPLETED"), "12": job("12", "OUT_OF_MEMORY"),
                                           "13": job("13", "CANCELLED")})
    experiment = Experiment(slug="s", job_id="11", cluster="dev", submitted="2026-01-01T00:00:00", goal="g",
                            script="", script_path="",
                            chain={"kind": "pipeline", "cap": 3, "steps": STEPS, "jobs": ["11", "12", "13"],
                                   "segments": records, "ended": ended})
    section = page_section(experiment)
    assert "| train | prep | 12 | 2026-01-02 03:04:05 | failed |" in section
    assert "| eval | train | 13 |" in section and "not run: train failed" in section
    assert "The pipeline ended: **failed**" in section
    assert status_words(experiment).endswith("step eval (job 13) not run: train failed · pipeline ended: failed")


def test_the_card_shows_every_steps_script_under_its_edges() -> None:
    text = pipeline_text([Step("prep", "#!/bin/bash\necho a\n"), Step("train", "#!/bin/bash\necho b", ("prep",))])
    assert text == ("# ==== step prep (starts at once) ====\n#!/bin/bash\necho a\n\n"
                    "# ==== step train (after prep) ====\n#!/bin/bash\necho b\n")


def test_a_cell_of_steps_is_read_under_the_header_lines_the_card_shows() -> None:
    from betty_jupyter.cluster.pipeline import steps_from_text

    shown = pipeline_text([Step("prep", "#!/bin/bash\necho a\n"), Step("train", "#!/bin/bash\necho b", ("prep",)),
                           Step("score", "#!/bin/bash\necho c", ("prep", "train"))])
    assert steps_from_text(shown) == [{"name": "prep", "script": "#!/bin/bash\necho a\n", "after": []},
                                      {"name": "train", "script": "#!/bin/bash\necho b\n", "after": ["prep"]},
                                      {"name": "score", "script": "#!/bin/bash\necho c\n", "after": ["prep", "train"]}]
    assert steps_from_text("# ==== step a ====\necho\n# ==== step b ====\necho\n")[1]["after"] is None
    with pytest.raises(UsageError, match="start each step with a line"):
        steps_from_text("#!/bin/bash\necho\n# ==== step a ====\necho\n")


def test_an_array_step_runs_after_an_array_of_its_size_task_by_task_and_a_step_may_ask_singleton() -> None:
    steps = checked_steps([Step("split", "", tasks=4), Step("train", "", aftercorr=("split",), tasks=4),
                           Step("report", "", ("train",), singleton=True)])
    assert dependency_options(["11"], ["12"], True) == ["--dependency=afterok:11,aftercorr:12,singleton",
                                                       "--kill-on-invalid-dep=yes"]
    assert dependency_options([], [], True) == ["--dependency=singleton"]
    edges = card(steps)["edges"]
    assert "train aftercorr split (--dependency=aftercorr: task by task" in edges
    assert "report after train (--dependency=afterok) (--dependency=singleton" in edges
    text = pipeline_text(steps)
    assert "# ==== step train (aftercorr split) ====" in text and "# ==== step report (after train; singleton) ====" \
        in text
    from betty_jupyter.cluster.pipeline import steps_from_text

    read = steps_from_text(text)
    assert read[1]["aftercorr"] == ["split"] and read[1]["after"] == [] and read[2]["singleton"] is True


@pytest.mark.parametrize(("steps", "refusal"), [
    ([Step("a", "", tasks=4), Step("b", "", aftercorr=("a",), tasks=3)],
     r"step 'b' \(3 tasks\) runs aftercorr 'a' \(4 tasks\); aftercorr needs arrays of the same size"),
    ([Step("a", "", tasks=1), Step("b", "", aftercorr=("a",), tasks=3)], "'a' is not a job array"),
    ([Step("a", "", tasks=2), Step("b", "", ("a",), ("a",), tasks=2)], "both afterok and aftercorr"),
])
def test_aftercorr_between_anything_but_two_arrays_of_one_size_is_refused(steps, refusal) -> None:
    with pytest.raises(UsageError, match=refusal):
        checked_steps(steps)


@pytest.mark.parametrize("path", ["../etc/passwd", "data/../../x", "a\nb", "~/x", "x;rm", "-rf", "", "a b"])
def test_an_output_path_that_could_leave_the_persons_folders_is_refused(path) -> None:
    from betty_jupyter.cluster.step_outputs import checked_output

    with pytest.raises(UsageError, match="output"):
        checked_output(path)


def test_a_missing_output_stops_the_steps_after_it_and_names_the_path() -> None:
    from betty_jupyter.cluster.pipeline import dependents, outputs_due

    steps = [{**STEPS[0], "outputs": ["/d/x.npz"]}, STEPS[1], STEPS[2]]
    jobs = {"11": job("11", "COMPLETED"), "12": job("12", "RUNNING"), "13": job("13", "PENDING")}
    assert outputs_due(steps, jobs) == [steps[0]]
    assert [s["name"] for s in dependents(steps, "prep")] == ["train", "eval"]
    steps[0] = {**steps[0], "missing": "output /d/x.npz is missing"}
    assert outputs_due(steps, jobs) == []
    records, ended = step_outcomes(steps, {"11": job("11", "COMPLETED"), "12": job("12", "CANCELLED"),
                                           "13": job("13", "CANCELLED")})
    assert [r["why"] for r in records] == ["done, but output /d/x.npz is missing",
                                           "not run: prep's output /d/x.npz is missing",
                                           "not run: train did not finish"]
    assert ended == "failed"


def test_a_failed_step_is_run_again_with_the_steps_after_it_not_the_ones_that_succeeded() -> None:
    from betty_jupyter.experiments.pipeline import failed_step, retry_steps

    steps = [Step("prep", "#!/bin/bash\necho a\n"), Step("train", "#!/bin/bash\necho b\n", ("prep",), tasks=2),
             Step("score", "#!/bin/bash\necho c\n", aftercorr=("train",), singleton=True, tasks=2),
             Step("plot", "#!/bin/bash\necho d\n", ("prep",))]
    recorded = [{"name": s.name, "after": list(s.after), "job_id": str(11 + n),
                 **({"aftercorr": list(s.aftercorr), "singleton": True} if s.aftercorr else {})}
                for n, s in enumerate(steps)]
    records, _ = step_outcomes(recorded, {"11": job("11", "COMPLETED"), "12": job("12", "OUT_OF_MEMORY"),
                                          "13": job("13", "CANCELLED"), "14": job("14", "COMPLETED")})
    experiment = Experiment(slug="2026-01-01-p", job_id="11", cluster="dev", submitted="2026-01-01T00:00:00",
                            goal="g", script=pipeline_text(steps), script_path="",
                            chain={"kind": "pipeline", "steps": recorded, "segments": records})
    failed = failed_step(experiment)
    assert (failed["name"], failed["job_id"], failed["script"]) == ("train", "12", "#!/bin/bash\necho b\n")
    again = retry_steps(experiment, "train", "#!/bin/bash\necho B\n")
    assert again == [{"name": "train", "script": "#!/bin/bash\necho B\n", "after": [], "aftercorr": []},
                     {"name": "score", "script": "#!/bin/bash\necho c\n", "after": [], "aftercorr": ["train"],
                      "singleton": True}]
